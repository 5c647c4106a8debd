"""Live progress of a stage in the terminal: shards done, records in and out, pass rate so far,
LLM calls and an ETA. Shown only when stderr is a terminal (quiet in a worker, a pipe or CI);
the same counts go to the Prefect log of every shard either way."""

from __future__ import annotations

from contextlib import contextmanager
from types import TracebackType
from typing import Any, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn


def _display(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description:<10}"), BarColumn(bar_width=16), MofNCompleteColumn(), TextColumn("shards"),
        TextColumn("{task.fields[line]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
        console=console, transient=False,
    )


@contextmanager
def shared_display() -> Iterator[Progress | None]:
    """One live display for the stages that run at once, a line each (a terminal shows one live
    display at a time); None when stderr is not a terminal."""
    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    with _display(console) as display:
        yield display


class StageProgress:
    """A stage's line: on `display` (see :func:`shared_display`) when given, else on a display of
    its own."""

    def __init__(self, stage: str, shards: int, display: Progress | None = None) -> None:
        self.stage = stage
        self.counts = {"in": 0, "out": 0, "rejected": 0, "calls": 0, "failed": 0}
        self._own = display is None
        console = Console(stderr=True)
        self._progress = display if display is not None else _display(console) if console.is_terminal and shards else None
        self._total = shards
        if self._progress is not None:
            self._task: TaskID = self._progress.add_task(stage, total=shards, line="")

    def __enter__(self) -> StageProgress:
        if self._progress is not None and self._own:
            self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._progress is not None and self._own:
            self._progress.stop()

    def not_started(self) -> None:
        """A shard that waited for its input and will not run: one less to wait for."""
        self._total -= 1
        if self._progress is not None:
            self._progress.update(self._task, total=self._total)

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
