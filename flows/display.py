"""The process's one progress display: a block of bars redrawn in place on a terminal, plain
lines anywhere else.

On a terminal (:class:`TerminalDisplay`) there is one block for the whole process, a line per
running stage; several stages may run at once (:mod:`flows.overlap`) and groups of stages come
one after another, each adding its lines to the same block. A stage that ends leaves the block
and prints one final line above it, and every other line the process writes to the terminal
(Prefect's and Ray's log records, `print`) is printed above the block too
(:mod:`flows.terminal_output`), so the block never leaves a stale copy behind.

Anywhere else (a pipe, CI, a Prefect worker's log) a redrawn block would be a smear of control
characters, so :class:`PlainDisplay` writes whole lines: a stage's counts at most once a minute
while it runs (at a shard's end, so a stage with nothing new says nothing) and one line when it
ends. A quickstart run so prints a line per stage.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from datetime import timedelta
from types import TracebackType
from typing import IO, Callable, Iterable, Iterator, Protocol

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Column

from flows.terminal_output import TerminalOutput
from toolfactory.stages import STAGE_NAMES

PLAIN_INTERVAL_S = 60.0  # a running stage's plain line, at most this often
_ORDER = {stage: i for i, stage in enumerate(STAGE_NAMES)}


class StageLine(Protocol):
    """A stage's place on the display."""

    def update(self, done: int, total: int, summary: str) -> None:
        """Shards done of `total`, and the counts so far (`summary`)."""

    def end(self, done: int, total: int, summary: str) -> None:
        """The stage is over: its final line."""


class Display(Protocol):
    """Where stages show their progress (see :func:`shared_display`)."""

    def add(self, stage: str, total: int) -> StageLine:
        """A line for `stage`, of `total` shards."""


def _clock(seconds: float) -> str:
    return str(timedelta(seconds=int(seconds)))


def final_line(stage: str, done: int, total: int, seconds: float, summary: str) -> str:
    """What a stage leaves when it ends, on a terminal and in a log alike."""
    return f"{stage:<10} {done}/{total} shards in {_clock(seconds)} · {summary}"


def running_line(stage: str, done: int, total: int, seconds: float, summary: str) -> str:
    """A running stage's counts, in a log."""
    return f"{stage:<10} {done}/{total} shards so far ({_clock(seconds)}) · {summary}"


class _Bar:
    def __init__(self, display: TerminalDisplay, task: TaskID, stage: str) -> None:
        self._display = display
        self._task = task
        self._stage = stage
        self._start = time.monotonic()

    def update(self, done: int, total: int, summary: str) -> None:
        self._display.progress.update(self._task, completed=done, total=total, line=summary)

    def end(self, done: int, total: int, summary: str) -> None:
        self._display.progress.remove_task(self._task)
        # Printed through the live console: above the block, which is drawn again without the stage.
        self._display.console.print(final_line(self._stage, done, total, time.monotonic() - self._start, summary),
                                    highlight=False, markup=False, soft_wrap=True)


class _Bars(Progress):
    """The bars in the order of the pipeline, whichever stage flow started first."""

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(sorted(self.tasks, key=lambda task: _ORDER.get(task.description, len(_ORDER))))


class TerminalDisplay:
    """One block of bars, a line per running stage, redrawn in place on the terminal `file`;
    while it is live, the process's other output is printed above it."""

    def __init__(self, file: IO[str]) -> None:
        self.console = Console(file=file)
        self.progress = _Bars(
            TextColumn("{task.description:<10}"), BarColumn(bar_width=16), MofNCompleteColumn(), TextColumn("shards"),
            # The counts give way on a narrow terminal: a bar that wrapped would be two lines.
            TextColumn("{task.fields[line]}", table_column=Column(no_wrap=True, overflow="ellipsis")),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            # Redirection is TerminalOutput's: rich's would send a redirected stdout to the terminal.
            console=self.console, transient=False, redirect_stdout=False, redirect_stderr=False,
            refresh_per_second=2,  # the clocks tick in seconds; two cores are shared
        )
        self._output = TerminalOutput(self.console)

    def __enter__(self) -> TerminalDisplay:
        self.progress.start()
        self._output.capture()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            self._output.release()
        finally:
            self.progress.stop()  # the last frame stays: the stages that had not ended, if any

    def add(self, stage: str, total: int) -> StageLine:
        self._output.capture()  # Ray, imported since the display began, brought a log handler of its own
        return _Bar(self, self.progress.add_task(stage, total=total, line=""), stage)


class _PlainLine:
    def __init__(self, display: PlainDisplay, stage: str) -> None:
        self._display = display
        self._stage = stage
        self._start = self._last = display.clock()

    def update(self, done: int, total: int, summary: str) -> None:
        now = self._display.clock()
        if now - self._last >= self._display.interval:
            self._last = now
            self._display.write(running_line(self._stage, done, total, now - self._start, summary))

    def end(self, done: int, total: int, summary: str) -> None:
        self._display.write(final_line(self._stage, done, total, self._display.clock() - self._start, summary))


class PlainDisplay:
    """Whole lines on `file`: a running stage's counts at most every `interval` seconds (of
    `clock`), and its final line."""

    def __init__(self, file: IO[str], interval: float = PLAIN_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.file = file
        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()  # stages of a group report from threads of their own

    def __enter__(self) -> PlainDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add(self, stage: str, total: int) -> StageLine:
        return _PlainLine(self, stage)

    def write(self, line: str) -> None:
        with self._lock:
            self.file.write(line + "\n")
            self.file.flush()


def is_live_terminal(file: IO[str]) -> bool:
    """Whether `file` is a terminal a block can be redrawn on (rich's test: TTY_INTERACTIVE and
    TERM=dumb are honoured)."""
    console = Console(file=file)
    return console.is_terminal and not console.is_dumb_terminal


# The display of this process, while one is open: a terminal has one block, whoever draws on it.
_active: TerminalDisplay | PlainDisplay | None = None
_active_lock = threading.Lock()


@contextmanager
def shared_display(file: IO[str] | None = None) -> Iterator[Display]:
    """The process's display: the one open already, else one on `file` (default: stderr) for
    the duration of the block, with bars on a terminal and plain lines anywhere else."""
    global _active
    file = file if file is not None else sys.stderr
    with _active_lock:
        current = _active
        if current is None:
            _active = opened = TerminalDisplay(file) if is_live_terminal(file) else PlainDisplay(file)
    if current is not None:
        yield current
        return
    try:
        with opened:
            yield opened
    finally:
        with _active_lock:
            _active = None
