"""What the running server remembers: settings, attempt counts per request, statistics.

Attempt counts make transport faults retry-able (see :mod:`.faults`): the n-th sighting of a
request body draws its own fault. The table is bounded (oldest entries are forgotten first)
so a long-running demo server does not grow without limit.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any, Literal

from .faults import TransportFault
from .prefix_cache import PrefixCache
from .settings import SimulatorSettings

RequestKind = Literal["chat", "embedding"]

MAX_TRACKED_REQUESTS = 1_000_000


class SimulatorState:
    """Mutable server state; every mutation happens under one asyncio lock."""

    def __init__(self, settings: SimulatorSettings) -> None:
        self.settings = settings
        self._lock = asyncio.Lock()
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._requests: dict[RequestKind, int] = {"chat": 0, "embedding": 0}
        self._faults: dict[str, int] = {fault.value: 0 for fault in TransportFault}
        self.prefix_cache = PrefixCache(settings.prefix_cache_blocks)

    async def register(self, kind: RequestKind, request_hash: str) -> int:
        """Count a request and return its attempt number (0 for the first sighting)."""
        async with self._lock:
            self._requests[kind] += 1
            attempt = self._seen.get(request_hash, 0)
            self._seen[request_hash] = attempt + 1
            self._seen.move_to_end(request_hash)
            if len(self._seen) > MAX_TRACKED_REQUESTS:
                self._seen.popitem(last=False)
            return attempt

    async def record_fault(self, fault: TransportFault) -> None:
        async with self._lock:
            self._faults[fault.value] += 1

    async def update_settings(self, changes: dict[str, Any]) -> SimulatorSettings:
        """Apply a partial update (validated as a whole) and return the new settings."""
        async with self._lock:
            merged = {**self.settings.model_dump(), **changes}
            self.settings = SimulatorSettings.model_validate(merged)
            self.prefix_cache.max_blocks = self.settings.prefix_cache_blocks
            return self.settings

    async def reset(self) -> None:
        """Zero every counter and forget attempt counts (settings are kept)."""
        async with self._lock:
            self._seen.clear()
            self._requests = {"chat": 0, "embedding": 0}
            self._faults = {fault.value: 0 for fault in TransportFault}
            self.prefix_cache.clear()

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self._requests["chat"] + self._requests["embedding"],
            "chat_requests": self._requests["chat"],
            "embedding_requests": self._requests["embedding"],
            "faults": dict(self._faults),
            "prompt_tokens": self.prefix_cache.prompt_tokens,
            "cached_prompt_tokens": self.prefix_cache.cached_tokens,
        }
