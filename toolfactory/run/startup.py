"""Waiting for the processes a run starts for itself: the temporary Prefect API, a local Ray, the
offline simulator.

On a busy machine (a shared CI runner, a laptop during a build, a worker node running other jobs:
load 7 to 30 on 2 cores) each of them takes from seconds to minutes to start, and the libraries'
own waits are short and fixed: Prefect's temporary server gets 20 s, counted in its sleeps only,
and a local Ray node 30 s. A run then failed before doing any work, with a message over several
lines. Here every such start has a deadline in wall time that is a setting
(`orchestration.*_start_timeout_s`), says every :data:`REPORT_EVERY_S` seconds that it is still
waiting, and ends, when it does not start, in one :class:`~toolfactory.errors.StartupFailed` line
naming the part, the time waited and the setting to raise. What the start left running is stopped
(:class:`Spawned`): a failed start leaves no process behind.

This module knows no server: :mod:`flows.runtime` and the simulator's launcher use it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import TracebackType
from typing import Callable

from toolfactory.errors import StartupFailed
from toolfactory.run.lifetime import descendants, start_ticks, stop_processes

REPORT_EVERY_S = 15.0


def say(line: str) -> None:
    """A line on stderr: above the progress display on a terminal, in the log elsewhere."""
    print(line, file=sys.stderr, flush=True)


def one_line(text: str, limit: int = 300) -> str:
    """The last non-empty line of a (multi-line) error, shortened: what a one-line message quotes."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= limit else last[: limit - 1] + "…"


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


class Startup:
    """One part's start: its deadline in wall time, a line while it waits, one error if it fails.

        with Startup("the local Ray", "orchestration.ray_start_timeout_s", 300) as startup:
            ...  # start it; startup.wait_until(ready, exited) polls
    """

    def __init__(self, part: str, setting: str, timeout_s: float, report: Callable[[str], None] = say,
                 every_s: float | None = None) -> None:
        self.part, self.setting, self.timeout_s = part, setting, timeout_s
        self._report, self._every_s = report, REPORT_EVERY_S if every_s is None else every_s
        self.started = time.monotonic()
        self.deadline = self.started + timeout_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._keep_saying, name=f"waiting for {part}", daemon=True)

    def __enter__(self) -> Startup:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._done.set()
        self._thread.join()

    def _keep_saying(self) -> None:
        while not self._done.wait(self._every_s):
            self._report(f"waiting for {self.part} to start: {_seconds(self.waited())}…")

    def waited(self) -> float:
        return time.monotonic() - self.started

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def say(self, line: str) -> None:
        self._report(line)

    def timed_out(self, detail: str = "") -> StartupFailed:
        """The error of a start that did not finish by the deadline."""
        because = f" ({one_line(detail)})" if detail else ""
        return StartupFailed(
            f"{self.part} did not start within {self.timeout_s:g} s (waited {_seconds(self.waited())}){because}; "
            f"on a busy machine, raise {self.setting}", self.part, self.setting)

    def exited(self, detail: str) -> StartupFailed:
        """The error of a start that failed before the deadline (the process exited, or refused)."""
        return StartupFailed(f"{self.part} failed to start after {_seconds(self.waited())}: {one_line(detail)}",
                             self.part, self.setting)

    def failed(self, detail: str) -> StartupFailed:
        """:meth:`timed_out` once the deadline has passed, else :meth:`exited`."""
        return self.timed_out(detail) if self.expired() else self.exited(detail)

    def wait_until(self, ready: Callable[[float], bool], exited: Callable[[], str | None], interval_s: float = 0.1) -> None:
        """Poll until `ready(timeout)` (given the time left, for its own request) is true; raise
        :meth:`exited` as soon as `exited()` names why the process is gone, :meth:`timed_out` at
        the deadline."""
        while True:
            why = exited()
            if why is not None:
                raise self.exited(why)
            if ready(max(0.1, min(5.0, self.remaining()))):
                return
            if self.expired():
                raise self.timed_out()
            time.sleep(min(interval_s, self.remaining()))


class Spawned:
    """The processes this process starts below it during a block, noted while they live (one that
    dies leaves its children to init, out of this process's tree), so that a failed start can stop
    them all."""

    def __init__(self, every_s: float = 0.25) -> None:
        self._before = descendants({os.getpid()})
        self._every_s = every_s
        self._seen: dict[int, str | None] = {}  # pid -> its start time: a reused id is not stopped
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="started processes", daemon=True)

    def __enter__(self) -> Spawned:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._done.set()
        self._thread.join()
        self._note()

    def _note(self) -> None:
        with self._lock:
            for pid in descendants({os.getpid(), *self._seen}) - self._before:
                if pid not in self._seen:
                    self._seen[pid] = start_ticks(pid)

    def _follow(self) -> None:
        while not self._done.wait(self._every_s):
            self._note()

    def pids(self) -> set[int]:
        self._note()
        return set(self._seen)

    def stop(self) -> None:
        """TERM, then KILL, every process noted that still runs."""
        self._note()
        stop_processes(dict(self._seen))
