"""The launcher every tool process runs under: limits hold and nothing outlives it."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

from conftest import process_alive
from toolfactory.executable.confine import EXIT_PROCESS_LIMIT, ProcessLimits, confined


def run(argv: list[str], limits: ProcessLimits | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(confined(argv, limits or ProcessLimits()), check=False, capture_output=True, text=True, timeout=timeout)



def wait_gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not process_alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_the_command_s_output_and_exit_status_pass_through() -> None:
    done = run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (done.returncode, done.stdout, done.stderr.strip().splitlines()[-1]) == (3, "out\n", "err")


def test_what_the_command_left_running_is_killed_when_it_exits(tmp_path) -> None:
    pidfile = tmp_path / "pid"
    done = run(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; exit 0"])
    assert done.returncode == 0
    assert wait_gone(int(pidfile.read_text()))


def test_a_daemon_that_left_the_process_group_is_killed_too(tmp_path) -> None:
    pidfile = tmp_path / "pid"
    script = f"import os,subprocess; p=subprocess.Popen(['sleep','60'], start_new_session=True); open({str(pidfile)!r},'w').write(str(p.pid))"
    assert run([sys.executable, "-c", script]).returncode == 0
    assert wait_gone(int(pidfile.read_text()))


def test_forking_past_the_limit_kills_everything_and_says_so(tmp_path) -> None:
    pidfile = tmp_path / "pids"
    done = run(["sh", "-c", f"for i in 1 2 3 4 5 6 7 8; do sleep 60 & echo $! >> {pidfile}; done; wait"],
               ProcessLimits(max_processes=4))
    assert done.returncode == EXIT_PROCESS_LIMIT
    assert "process limit (4) exceeded" in done.stderr
    assert all(wait_gone(int(pid)) for pid in pidfile.read_text().split())


def test_memory_past_the_limit_fails_the_allocation() -> None:
    done = run([sys.executable, "-c", "b = bytearray(1024 * 1024 * 1024)"], ProcessLimits(memory_mb=256))
    assert done.returncode != 0 and "MemoryError" in done.stderr


def test_a_killed_parent_leaves_no_process_behind(tmp_path) -> None:
    pidfile = tmp_path / "pid"
    inner = confined(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], ProcessLimits())
    parent = subprocess.Popen([sys.executable, "-c", f"import subprocess; subprocess.run({inner!r}, check=False)"])
    deadline = time.monotonic() + 20
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(pidfile.read_text())
    assert process_alive(grandchild)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert wait_gone(grandchild)


def test_without_network_the_host_s_loopback_is_out_of_reach() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)"
        isolated = run([sys.executable, "-c", probe])
        allowed = run([sys.executable, "-c", probe], ProcessLimits(network=True))
    assert allowed.returncode == 0, allowed.stderr
    if "network not isolated" in isolated.stderr:
        # The OS refuses a network namespace (no root, no user namespaces): said, not silent.
        assert isolated.returncode == 0
    else:
        assert isolated.returncode != 0
        assert "ConnectionRefused" in isolated.stderr or "unreachable" in isolated.stderr
