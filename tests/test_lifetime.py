"""A driver's servers do not outlive it: killed with SIGKILL, its guard stops them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, process_alive, small_run_overrides

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


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(stat.split(")")[-1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _command(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


@pytest.mark.fault_matrix
@pytest.mark.e2e
def test_a_sigkilled_run_leaves_no_server_or_simulator_behind(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # the run starts its own server
    overrides = small_run_overrides(tmp_path / "data", **{"llm.simulator.latency_ms": 500})
    args = [str(Path(sys.executable).with_name("toolfactory")), "run", *sum((["--set", o] for o in overrides), [])]
    run = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert run.stdout is not None
    servers: list[int] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(servers) < 2:
        line = run.stdout.readline()
        assert line, "the run ended before it started its servers"
        servers = [pid for pid in _children(run.pid) if "uvicorn" in _command(pid) or "toolfactory.simulator" in _command(pid)]
    assert len(servers) == 2, [_command(pid) for pid in _children(run.pid)]
    run.kill()
    run.wait()
    assert _gone_within(servers, 30), [_command(pid) for pid in servers if process_alive(pid)]
