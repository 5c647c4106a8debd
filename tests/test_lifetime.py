"""A driver's servers do not outlive it: killed with SIGKILL, its guard stops them (a whole run's
servers and local Ray: tests/test_fault_matrix.py, the SIGKILLed driver)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, process_alive

DRIVER = """
import subprocess, sys, time
from toolfactory.run.lifetime import guard_child, release_child
child = subprocess.Popen(["sleep", "300"])
guard_child(child.pid)
if sys.argv[1] == "release":
    release_child(child.pid)
print(child.pid, flush=True)
time.sleep(300 if sys.argv[1] == "wait" else 0)
"""



def _gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(process_alive(pid) for pid in pids):
            return True
        time.sleep(0.2)
    return False


def _driver(mode: str) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen([sys.executable, "-c", DRIVER, mode], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert process.stdout is not None
    return process, int(process.stdout.readline())


@pytest.mark.fault_matrix
def test_a_killed_drivers_child_is_stopped_by_the_guard() -> None:
    driver, child = _driver("wait")
    assert process_alive(child)
    driver.kill()
    driver.wait()
    assert _gone_within([child], 15)


@pytest.mark.fault_matrix
def test_a_child_the_driver_released_is_left_alone() -> None:
    driver, child = _driver("release")
    driver.wait()
    try:
        time.sleep(1)
        assert process_alive(child)
    finally:
        os.kill(child, signal.SIGKILL)


def test_the_guard_does_not_watch_a_process_that_has_ended() -> None:
    """A process that ended before the guard noted it (a short-lived child found in a tree) has no
    start time; its id may go to another process by the time the guard stops what it watches,
    which it would then stop in its place."""
    from toolfactory.run.lifetime import _Watched

    ended = subprocess.Popen(["true"])
    ended.wait()
    watched = _Watched()
    watched.add(ended.pid, tree=True)
    watched.add(os.getpid(), tree=False)
    assert ended.pid not in watched.pids and ended.pid not in watched.trees
    assert os.getpid() in watched.pids

