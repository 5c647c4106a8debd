"""Content-addressed cache of LLM answers (docs/architecture.md §6).

The key hashes everything that determines an answer: model, messages, tools, tool choice,
response format, sampling parameters and the sample index. It does not include the endpoint's
address, so a re-run on another machine, or against another replica of the same model, re-uses
every answer already paid for. One object per answer, ``llm-cache/<k[:2]>/<k>.json``, holding the
JSON body the endpoint sent, as sent (never parsed and dumped again), so a lookup needs no index
however large the cache grows across nights.

In a local folder an answer is written on the event loop before the gateway returns it: a
temporary file renamed into place, ~40 µs of system calls (measured). Handing it to a writer
thread instead cost ~0.5 ms of CPU and 10-40 context switches per request (measured): the
thread's wake-ups and its fight for the GIL with a CPU-bound loop. So a process killed at any
moment has lost only the requests still in flight, and a file is whole or absent. Files are not
fsynced: a crash of the machine (not of the process) may cut one, and a file that does not parse
is a miss, never an answer.

On S3, where a write waits on the network, writes go through one background thread fed by a
queue, and lookups go to a thread; :meth:`RequestCache.close` drains the queue, so a killed
process loses the requests in flight and the answers still queued.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import queue
import threading
import uuid
from typing import Any

from toolfactory.models import canonical_json
from toolfactory.storage import ObjectStore

CACHE_PREFIX = "llm-cache"
_STOP = object()


def request_key(request: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(request).encode()).hexdigest()


def _answer(data: bytes | None) -> dict[str, Any] | None:
    """The answer stored in `data`; None for a miss or for a file cut short."""
    if not data:
        return None
    try:
        value = json.loads(data)
    except ValueError:  # a proper prefix of a JSON object never parses: its brace is open
        return None
    return value if isinstance(value, dict) else None


class RequestCache:
    def __init__(self, store: ObjectStore, prefix: str = CACHE_PREFIX) -> None:
        self._store = store
        self._prefix = prefix
        self._folder = store.local_path(prefix)  # None on S3
        self._made: set[str] = set()  # the folders this cache has made
        self._pending: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._error: BaseException | None = None

    def _path(self, key: str) -> str:
        return f"{self._prefix}/{key[:2]}/{key}.json"

    async def get(self, key: str) -> dict[str, Any] | None:
        if self._folder is not None:  # a local folder: a miss is one failed `open`, cheaper than a thread hop
            try:
                with open(f"{self._folder}/{key[:2]}/{key}.json", "rb") as file:
                    return _answer(file.read())
            except FileNotFoundError:
                return None
        return _answer(await asyncio.to_thread(self._store.read_bytes_or_none, self._path(key)))

    def put(self, key: str, body: bytes) -> None:
        """Store `body`, the endpoint's JSON answer: at once in a local folder, queued on S3."""
        if self._folder is not None:
            try:
                self._write_file(key, body)
            except OSError as exc:  # surfaced by close(): the shard must not claim a cache it lacks
                self._error = self._error or exc
            return
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_pending, name="llm-cache-writer", daemon=True)
            self._writer.start()
        self._pending.put((key, body))

    def _write_file(self, key: str, body: bytes) -> None:
        folder = f"{self._folder}/{key[:2]}"
        if folder not in self._made:
            os.makedirs(folder, exist_ok=True)
            self._made.add(folder)
        temporary = f"{folder}/.tmp-{uuid.uuid4().hex}"  # never listed; a killed write's is removed by a re-run
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(body)
            os.replace(temporary, f"{folder}/{key}.json")
        except BaseException:
            if os.path.exists(temporary):
                os.remove(temporary)
            raise

    def _write_pending(self) -> None:
        while (item := self._pending.get()) is not _STOP:
            key, body = item
            try:
                self._store.write_bytes(self._path(key), body)
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
        if self._writer is None:
            self.close()  # nothing queued: no thread hop
        else:
            await asyncio.to_thread(self.close)
