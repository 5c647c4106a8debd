"""Children that do not outlive their driver.

A run's driver starts servers of its own (the temporary Prefect API, the offline simulator). When
it exits normally it stops them; when it is killed (SIGKILL, OOM) it cannot, and they would stay up
indefinitely. So the driver starts one small guard process and tells it, through a pipe, the id of
every child it starts (for a local Ray, the whole tree under each of its head processes: the
agents and workers they start would otherwise outlive them). The guard blocks on that pipe; end of file means the driver is gone, however
it died, and the guard then terminates every child still alive and exits. The guard ignores the
terminal's Ctrl-C (it lives in its own session) so that it always outlives the driver.

    python -m toolfactory.run.lifetime        (reads `pid` or `tree pid` to watch, `-pid` to forget, a line each, from stdin)

The same holds for the work a driver hands out: a shard commits only while the driver that
submitted it lives (:class:`Driver`), so no shard of a dead driver becomes visible after it died.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

_STOP_TIMEOUT_S = 5.0


def start_ticks(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot; None: it does not run): tells it from a
    later one given its id."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[-1].split()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None if fields[0] == "Z" else fields[19]  # a zombie has exited


def _host() -> str:
    import socket

    return socket.gethostname()


@dataclass(frozen=True)
class Driver:
    """The process that planned and submitted a run's shards, as a worker can recognise it."""

    host: str = field(default_factory=_host)
    pid: int = field(default_factory=os.getpid)
    started: str | None = field(default_factory=lambda: start_ticks(os.getpid()))

    def gone(self) -> bool:
        """True when this driver has certainly ended. A worker on another machine cannot see it
        and answers False: there the cluster itself ends a dead driver's tasks (Ray stops the
        workers of a job whose driver disconnected)."""
        if self.host != _host() or self.started is None:
            return False
        return start_ticks(self.pid) != self.started


class Guard:
    """The driver's side: a pipe to the guard process."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "toolfactory.run.lifetime"], stdin=subprocess.PIPE, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self._lock = threading.Lock()

    def watch(self, pid: int, tree: bool = False) -> None:
        """Terminate process `pid` (and, with `tree`, every process it starts) when this process
        dies without stopping it."""
        with self._lock:
            assert self._process.stdin is not None
            self._process.stdin.write(f"{'tree ' if tree else ''}{pid}\n".encode())
            self._process.stdin.flush()

    def forget(self, pid: int) -> None:
        """`pid` was stopped by the driver: never signal it (its id may be reused)."""
        with self._lock:
            assert self._process.stdin is not None
            self._process.stdin.write(f"-{pid}\n".encode())
            self._process.stdin.flush()

    def close(self) -> None:
        """The driver is ending: the guard stops what is left and exits."""
        if self._process.stdin is not None and not self._process.stdin.closed:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=_STOP_TIMEOUT_S * 2)
        except subprocess.TimeoutExpired:
            self._process.kill()


_guard: Guard | None = None
_guard_lock = threading.Lock()


def guard_child(pid: int, tree: bool = False) -> None:
    """Have process `pid` (with `tree`, its descendants too) terminated when this process dies,
    even by SIGKILL."""
    global _guard
    with _guard_lock:
        if _guard is None:
            _guard = Guard()
            atexit.register(_guard.close)
        _guard.watch(pid, tree)


def release_child(pid: int) -> None:
    """Process `pid` has been stopped: the guard forgets it."""
    with _guard_lock:
        if _guard is not None:
            _guard.forget(pid)


def _alive(pid: int, started: str | None = None) -> bool:
    """Process `pid` runs (and, given `started`, is the one that started then, not a reuse of its id)."""
    ticks = start_ticks(pid)
    return ticks is not None and (started is None or ticks == started)


def _parents() -> dict[int, int]:
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as stat:
                    found[int(entry.name)] = int(stat.read().rsplit(")", 1)[-1].split()[1])
            except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError, ValueError):
                continue
    return found


def descendants(roots: set[int]) -> set[int]:
    """Every live process below `roots` (not the roots themselves)."""
    parents, found, frontier = _parents(), set(), set(roots)
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def stop_processes(pids: dict[int, str | None]) -> None:
    """Stop every process of `pids` (id -> :func:`start_ticks`) that still runs: TERM, then KILL
    what is still alive after a grace period."""
    for pid, started in pids.items():
        if _alive(pid, started):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    while time.monotonic() < deadline and any(_alive(pid, started) for pid, started in pids.items()):
        time.sleep(0.1)
    for pid, started in pids.items():
        if _alive(pid, started):
            os.kill(pid, signal.SIGKILL)


class _Watched:
    """What the guard will stop: pids with their start time, and roots whose trees it follows."""

    def __init__(self) -> None:
        self.pids: dict[int, str | None] = {}
        self.trees: set[int] = set()
        self.lock = threading.Lock()

    def add(self, pid: int, tree: bool) -> None:
        """Watch `pid` unless it has ended already: without its start time, the process given
        its id later would be taken for it and stopped."""
        started = start_ticks(pid)
        if started is None:
            return
        with self.lock:
            self.pids.setdefault(pid, started)
            if tree:
                self.trees.add(pid)

    def forget(self, pid: int) -> None:
        with self.lock:
            self.pids.pop(pid, None)
            self.trees.discard(pid)

    def follow(self) -> None:
        """Note the processes the watched trees have started since the last look. A tree's root
        may die with the driver and its children be re-parented at once, so they are noted while
        the driver lives, not when it dies."""
        with self.lock:
            roots = {pid for pid in self.trees if _alive(pid, self.pids.get(pid))}
        for pid in descendants(roots) if roots else ():
            self.add(pid, tree=False)  # one that has ended since it was found is not noted


_FOLLOW_EVERY_S = 0.5


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watched = _Watched()
    done = threading.Event()

    def follow() -> None:
        while not done.wait(_FOLLOW_EVERY_S):
            watched.follow()

    threading.Thread(target=follow, daemon=True).start()
    for line in sys.stdin.buffer:  # ends when the driver closes the pipe or dies
        words = line.decode().split()
        tree = words[:1] == ["tree"]
        text = words[-1] if words else ""
        if text.lstrip("-").isdigit():
            pid = int(text)
            watched.forget(-pid) if pid < 0 else watched.add(pid, tree)
    done.set()
    watched.follow()
    stop_processes(dict(watched.pids))


if __name__ == "__main__":
    main()
