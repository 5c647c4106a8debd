"""A stage's progress: shards done, records in and out, pass rate so far and LLM calls, shown on
the process's display (:mod:`flows.display`: bars on a terminal, plain lines elsewhere); the
same counts go to the Prefect log of every shard either way."""

from __future__ import annotations

from contextlib import ExitStack
from types import TracebackType
from flows.display import Display, StageLine, shared_display
from toolfactory.run.metrics import ShardMetrics

__all__ = ["StageProgress", "shared_display"]


class StageProgress:
    """A stage's line: on `display` when given, else on the process's display (see
    :func:`~flows.display.shared_display`)."""

    def __init__(self, stage: str, shards: int, display: Display | None = None) -> None:
        self.stage = stage
        self.counts = {"in": 0, "out": 0, "rejected": 0, "calls": 0, "failed": 0}
        self._display = display
        self._total = shards
        self._done = 0
        self._line: StageLine | None = None
        self._own = ExitStack()

    def __enter__(self) -> StageProgress:
        if self._total:
            display = self._display if self._display is not None else self._own.enter_context(shared_display())
            self._line = display.add(self.stage, self._total)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if self._line is not None:
                self._line.end(self._done, self._total, self.line())
        finally:
            self._own.close()

    def not_started(self) -> None:
        """A shard that waited for its input and will not run: one less to wait for."""
        self._total -= 1
        if self._line is not None:
            self._line.update(self._done, self._total, self.line())

    def shard_done(self, metrics: ShardMetrics | None) -> None:
        """One shard finished: its metrics, or None when it failed."""
        self._done += 1
        if metrics is None:
            self.counts["failed"] += 1
        else:
            self.counts["in"] += metrics.items_in
            self.counts["out"] += metrics.items_out
            self.counts["rejected"] += metrics.rejected
            self.counts["calls"] += metrics.llm.calls
        if self._line is not None:
            self._line.update(self._done, self._total, self.line())

    def line(self) -> str:
        c = self.counts
        judged = c["out"] + c["rejected"]
        rate = f"{c['out'] / judged:.0%}" if judged else "-"
        failed = f" · {c['failed']} failed" if c["failed"] else ""
        return f"in {c['in']} · out {c['out']} · pass {rate} · {c['calls']} LLM calls{failed}"
