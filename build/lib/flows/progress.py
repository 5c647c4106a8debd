"""Live progress of a stage in the terminal: shards done, records in and out, pass rate so far,
LLM calls and an ETA. Shown only when stderr is a terminal (quiet in a worker, a pipe or CI);
the same counts go to the Prefect log of every shard either way."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class StageProgress:
    def __init__(self, stage: str, shards: int) -> None:
        self.stage = stage
        self.counts = {"in": 0, "out": 0, "rejected": 0, "calls": 0, "failed": 0}
        console = Console(stderr=True)
        self._progress: Progress | None = None
        if console.is_terminal and shards:
            self._progress = Progress(
                TextColumn("{task.description:<10}"), BarColumn(bar_width=16), MofNCompleteColumn(), TextColumn("shards"),
                TextColumn("{task.fields[line]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=console, transient=False,
            )
            self._task: TaskID = self._progress.add_task(stage, total=shards, line="")

    def __enter__(self) -> StageProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()

    def shard_done(self, metrics: dict[str, Any] | None) -> None:
        """One shard finished: its metrics, or None when it failed."""
        if metrics is None:
            self.counts["failed"] += 1
        else:
            self.counts["in"] += metrics["items_in"]
            self.counts["out"] += metrics["items_out"]
            self.counts["rejected"] += metrics["rejected"]
            self.counts["calls"] += metrics["llm"].get("calls", 0)
        if self._progress is not None:
            self._progress.update(self._task, advance=1, line=self.line())

    def line(self) -> str:
        c = self.counts
        judged = c["out"] + c["rejected"]
        rate = f"{c['out'] / judged:.0%}" if judged else "-"
        failed = f" · {c['failed']} failed" if c["failed"] else ""
        return f"in {c['in']} · out {c['out']} · pass {rate} · {c['calls']} LLM calls{failed}"
