"""Children that do not outlive their driver.

A run's driver starts servers of its own (the temporary Prefect API, the offline simulator). When
it exits normally it stops them; when it is killed (SIGKILL, OOM) it cannot, and they would stay up
indefinitely. So the driver starts one small guard process and tells it, through a pipe, the id of
every child it starts. The guard blocks on that pipe; end of file means the driver is gone, however
it died, and the guard then terminates every child still alive and exits. The guard ignores the
terminal's Ctrl-C (it lives in its own session) so that it always outlives the driver.

    python -m toolfactory.lifetime        (reads `pid` to watch or `-pid` to forget, a line each, from stdin)
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
import time

_STOP_TIMEOUT_S = 5.0


class Guard:
    """The driver's side: a pipe to the guard process."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "toolfactory.lifetime"], stdin=subprocess.PIPE, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self._lock = threading.Lock()

    def watch(self, pid: int) -> None:
        """Terminate process `pid` when this process dies without stopping it."""
        with self._lock:
            assert self._process.stdin is not None
            self._process.stdin.write(f"{pid}\n".encode())
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


def guard_child(pid: int) -> None:
    """Have process `pid` terminated when this process dies, even by SIGKILL."""
    global _guard
    with _guard_lock:
        if _guard is None:
            _guard = Guard()
            atexit.register(_guard.close)
        _guard.watch(pid)


def release_child(pid: int) -> None:
    """Process `pid` has been stopped: the guard forgets it."""
    with _guard_lock:
        if _guard is not None:
            _guard.forget(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop(pids: list[int]) -> None:
    """TERM every live pid, then KILL what is still alive after a grace period."""
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.1)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pids: set[int] = set()
    for line in sys.stdin.buffer:  # ends when the driver closes the pipe or dies
        text = line.decode().strip()
        if text.lstrip("-").isdigit():
            pid = int(text)
            pids.discard(-pid) if pid < 0 else pids.add(pid)
    _stop(sorted(pids))


if __name__ == "__main__":
    main()
