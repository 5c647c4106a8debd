"""What each attempt at a shard has spent, kept in storage while it runs.

A shard's metrics reach the stats when its task returns; an attempt that never returns (its Ray
worker was killed, its node lost, its driver SIGKILLed) would take its LLM spending with it. So
every attempt writes its usage meter, as it goes, to

    runs/<run_id>/<stage>/_usage/part-NNNNN/<attempt_id>.json

from a background thread, once a second and only when the meter changed, then a last time when
the attempt ends. The gateway does nothing more per request than count (its hot path is
unchanged); a killed attempt loses at most the calls of its last second. The driver adds every
attempt file into DuckDB (:func:`attempt_usage`), keyed by the attempt id, so re-reading them on
a re-run never counts an attempt twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import threading
from datetime import datetime, timezone
from typing import Any, Iterator

from toolfactory.config import LLMConfig
from toolfactory.errors import DriverGone
from toolfactory.llm.cost import priced_usage, total_cost
from toolfactory.llm.usage import UsageMeter
from toolfactory.run.metrics import AttemptUsage
from toolfactory.storage.shards import ShardPaths
from toolfactory.storage import ObjectStore

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 1.0
RUNNING, COMPLETED, FAILED, INTERRUPTED = "running", "completed", "failed", "interrupted"
# An attempt whose usage file cannot be read: counted, its usage unknown.
UNREADABLE = "unreadable"


# Ends that say the attempt was stopped from outside (its driver died, its process was told to
# stop), not that its work failed: a re-run finishes such a shard.
_STOPPED: tuple[type[BaseException], ...] = (DriverGone, KeyboardInterrupt, SystemExit, asyncio.CancelledError)


def usage_path(paths: ShardPaths, attempt_id: str) -> str:
    return f"runs/{paths.run_id}/{paths.stage}/_usage/part-{paths.index:05d}/{attempt_id}.json"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class AttemptLog:
    """Keeps one attempt's usage file current; use as a context manager around the attempt."""

    def __init__(self, store: ObjectStore, paths: ShardPaths, attempt_id: str, meter: UsageMeter, started_at: str,
                 every_s: float = FLUSH_EVERY_S, llm: LLMConfig | None = None) -> None:
        self._store, self._paths, self._meter = store, paths, meter
        self._llm = llm  # its prices: a killed attempt's cost is counted too
        self._head = {"attempt_id": attempt_id, "run_id": paths.run_id, "stage": paths.stage, "shard": paths.index,
                      "started_at": started_at, "host": socket.gethostname(), "pid": os.getpid()}
        self._path = usage_path(paths, attempt_id)
        self._every_s = every_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._written: Any = None
        self._thread = threading.Thread(target=self._loop, name="attempt-usage", daemon=True)

    def __enter__(self) -> AttemptLog:
        self.flush(RUNNING)  # the attempt is visible (host, pid) before its first call
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        try:
            self.close(INTERRUPTED if kind is not None and issubclass(kind, _STOPPED) else FAILED)
        except Exception:
            if kind is None:
                raise
            # the attempt's own error is the one to report; its usage file stays `running` and
            # is counted as interrupted

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self.flush(RUNNING)
            except Exception:  # a storage hiccup: the next flush, or the final one, writes it
                pass

    def flush(self, outcome: str) -> None:
        """Write the meter if it changed since the last write (or the outcome did)."""
        with self._lock:
            # Copies taken with the GIL held by C code: the event loop may add a role meanwhile.
            usage = (self._meter.totals(), self._meter.to_dict(), outcome)
            if usage == self._written:
                return
            totals, by_role = usage[0], usage[1]
            if self._llm is not None:
                by_role = priced_usage(self._llm, by_role)
                totals = {**totals, "cost_usd": total_cost(by_role)}
            record = {**self._head, "outcome": outcome, "finished_at": _now(), "llm": totals, "llm_by_role": by_role}
            self._store.write_bytes(self._path, json.dumps(record, sort_keys=True).encode())
            self._written = usage

    def close(self, outcome: str) -> None:
        """Stop the thread and write the attempt's last state (once; later calls do nothing)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.flush(outcome)


def attempt_usage(store: ObjectStore, run_id: str, stage: str) -> Iterator[AttemptUsage]:
    """Every attempt file of a stage; an attempt still `running` in storage never finished. A file
    that cannot be read (empty, truncated, a field that does not fit) stops nothing: its attempt is
    counted with the outcome `unreadable` and no usage (what it spent is lost), and a warning names
    the file."""
    name = re.compile(rf"runs/{re.escape(run_id)}/{re.escape(stage)}/_usage/part-(\d+)/([0-9a-f]+)\.json")
    for path in store.list(f"runs/{run_id}/{stage}/_usage/"):
        if (match := name.fullmatch(path)) and (data := store.read_bytes_or_none(path)) is not None:
            try:
                record = json.loads(data)
                if not isinstance(record, dict) or not isinstance(record.get("outcome"), str):
                    raise ValueError("not an attempt record")
                attempt = AttemptUsage.from_dict(record)
            except ValueError as exc:  # a JSONDecodeError, a UnicodeDecodeError, a ValidationError too
                log.warning("%s: %s: %s", UNREADABLE, store.uri(path), " ".join(str(exc).split())[:200])
                yield AttemptUsage(attempt_id=match[2], run_id=run_id, stage=stage, shard=int(match[1]), outcome=UNREADABLE)
                continue
            yield attempt.model_copy(update={"outcome": INTERRUPTED}) if attempt.outcome == RUNNING else attempt
