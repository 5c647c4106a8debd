"""Content-addressed cache of LLM answers (docs/architecture.md §6).

The key hashes everything that determines an answer: model, messages, tools, tool choice,
response format, sampling parameters and the sample index. It does not include the endpoint's
address, so a re-run on another machine, or against another replica of the same model, re-uses
every answer already paid for. One object per answer, so a lookup needs no index however large
the cache grows across nights.

Writes go through one background thread, fed by a queue: the event loop never waits for storage
and never pays a thread hop per request (measured: a hop per put and per get cost the gateway
~20 % of its throughput when CPU-bound), while answers still reach storage continuously as the
shard runs. :meth:`close` drains the queue. Lookups on a local folder are done inline (a miss is
one `stat`); on S3 they go to a thread, since they wait on the network.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import queue
import threading
from typing import Any

from toolfactory.models import canonical_json
from toolfactory.storage import ObjectStore

CACHE_PREFIX = "llm-cache"
_STOP = object()


def request_key(request: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(request).encode()).hexdigest()


class RequestCache:
    def __init__(self, store: ObjectStore, prefix: str = CACHE_PREFIX) -> None:
        self._store = store
        self._prefix = prefix
        self._pending: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._error: BaseException | None = None

    def _path(self, key: str) -> str:
        return f"{self._prefix}/{key[:2]}/{key}.json"

    def _read(self, key: str) -> dict[str, Any] | None:
        data = self._store.read_bytes_or_none(self._path(key))
        return None if data is None else json.loads(data)

    async def get(self, key: str) -> dict[str, Any] | None:
        if self._store.atomic_rename:  # a local folder: cheaper than a thread hop
            return self._read(key)
        return await asyncio.to_thread(self._read, key)

    def put(self, key: str, response: dict[str, Any]) -> None:
        """Queue an answer for writing; returns at once."""
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_pending, name="llm-cache-writer", daemon=True)
            self._writer.start()
        self._pending.put((key, response))

    def _write_pending(self) -> None:
        while (item := self._pending.get()) is not _STOP:
            key, response = item
            try:
                self._store.write_bytes(self._path(key), json.dumps(response, ensure_ascii=False).encode())
            except Exception as exc:  # surfaced by close(): the shard must not claim a cache it lacks
                self._error = self._error or exc

    def close(self) -> None:
        """Write every queued answer; raise the first write error, if any."""
        if self._writer is not None:
            self._pending.put(_STOP)
            self._writer.join()
            self._writer = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)
