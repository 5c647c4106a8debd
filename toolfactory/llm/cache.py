"""Content-addressed cache of LLM answers (DESIGN.md §4).

The key hashes everything that determines an answer: model, messages, tools, tool choice,
response format, sampling parameters and the sample index. It does not include the endpoint's
address, so a re-run on another machine, or against another replica of the same model, re-uses
every answer already paid for. One object per answer, written as soon as the answer arrives,
so an interrupted shard loses nothing it has obtained.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from toolfactory.models import canonical_json
from toolfactory.storage import ObjectStore

CACHE_PREFIX = "llm-cache"


def request_key(request: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(request).encode()).hexdigest()


class RequestCache:
    def __init__(self, store: ObjectStore, prefix: str = CACHE_PREFIX) -> None:
        self._store = store
        self._prefix = prefix

    def _path(self, key: str) -> str:
        return f"{self._prefix}/{key[:2]}/{key}.json"

    async def get(self, key: str) -> dict[str, Any] | None:
        data = await asyncio.to_thread(self._store.read_bytes_or_none, self._path(key))
        return None if data is None else json.loads(data)

    async def put(self, key: str, response: dict[str, Any]) -> None:
        payload = json.dumps(response, ensure_ascii=False).encode()
        await asyncio.to_thread(self._store.write_bytes, self._path(key), payload)
