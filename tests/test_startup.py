"""The processes a run starts for itself (the temporary Prefect API, a local Ray, the offline
simulator) start however long a busy machine makes them take, say so while they start, and when
one does not start in time the run ends with one line naming it, the time waited and the setting
to raise, exit 2, and nothing it started left running."""

from __future__ import annotations

import inspect
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import REPO, small_run_overrides

BIN = Path(sys.executable).parent

PARTS = {
    "prefect": ("the temporary Prefect API", "orchestration.prefect_start_timeout_s"),
    "ray": ("the local Ray", "orchestration.ray_start_timeout_s"),
    "simulator": ("the offline simulator", "orchestration.simulator_start_timeout_s"),
}


def _marked(marker: str) -> list[str]:
    """The command lines of the processes whose environment carries `marker`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as environ:
                if marker.encode() not in environ.read():
                    continue
            with open(f"/proc/{entry.name}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry.name}/stat") as stat:
                if stat.read().rsplit(")", 1)[-1].split()[0] == "Z":
                    continue  # exited, not yet reaped
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        found.append(f"{entry.name}: {command[:200]}")
    return found


def _clean_env(marker: str, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("TOOLFACTORY_", "PREFECT_API_URL", "RAY_ADDRESS"))}
    return {**env, "TOOLFACTORY_TEST_MARKER": marker, **extra}


def _left_running(marker: str, grace_s: float = 60) -> list[str]:
    """What still runs of the marked processes once they had `grace_s` to stop (the driver's
    guard stops what the driver could not, a moment after it exits)."""
    deadline = time.monotonic() + grace_s
    while (left := _marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


@pytest.mark.parametrize("part", sorted(PARTS))
def test_a_part_that_does_not_start_in_time_ends_the_run_in_one_line_and_leaves_no_process(
    part: str, prefect_api: str, tmp_path: Path
) -> None:
    name, setting = PARTS[part]
    marker = uuid.uuid4().hex
    # The other parts start as a run starts them; Prefect's own is the session's, to save a start.
    env = _clean_env(marker, **({} if part == "prefect" else {"PREFECT_API_URL": prefect_api}))
    try:
        done = subprocess.run(
            [BIN / "toolfactory", "run", *(f"--set={o}" for o in small_run_overrides(tmp_path / "data")),
             f"--set={setting}=0.05", "--set", f"stats.path={tmp_path / 'stats.duckdb'}"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert done.returncode == 2, done.stderr[-3000:]
        assert len(errors) == 1, done.stderr[-3000:]
        assert errors[0].startswith(f"error: {name} did not start within 0.05 s"), errors
        assert errors[0].endswith(f"raise {setting}"), errors
        assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    finally:
        left = _left_running(marker)
    assert not left, left


def test_a_start_says_it_is_waiting_while_it_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    import toolfactory.run.startup as startup
    from flows.runtime import temporary_api

    monkeypatch.setattr(startup, "REPORT_EVERY_S", 0.05)
    lines: list[str] = []
    server = temporary_api(600, lines.append)
    try:
        assert lines, "no line while Prefect's server started"
        assert all(line.startswith("waiting for the temporary Prefect API to start: ") and line.endswith(" s…")
                   for line in lines), lines
    finally:
        server.stop()


def test_a_prefect_api_whose_port_is_taken_starts_once_more_on_another(monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    import toolfactory.run.startup as startup
    from flows.runtime import temporary_api
    from toolfactory.run.lifetime import release_child

    monkeypatch.setattr(startup, "REPORT_EVERY_S", 3600)  # only the retry's line
    lines: list[str] = []
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = temporary_api(600, lines.append, port=port)
        try:
            assert server.port != port
            assert httpx.get(f"{server.api_url}/health", timeout=60).status_code == 200
            [line] = lines
            assert line.startswith("the temporary Prefect API failed to start after ") and "on another port" in line, line
        finally:
            pid = server.server_process.pid
            server.stop()
            release_child(pid)


def test_ray_still_waits_for_a_node_through_the_call_the_run_stretches() -> None:
    """flows.runtime stretches Ray's fixed 30 s wait for a new node by making the call that wait
    polls patient: a Ray release that polls another call would bring the 30 s back."""
    import ray._private.node as node

    assert "ray._private.services.get_node(" in inspect.getsource(node.Node.__init__)


def test_the_simulator_start_is_one_deadline_for_all_its_attempts() -> None:
    from toolfactory.simulator import SimulatorNotStarted, SimulatorSettings, start_simulator

    started = time.monotonic()
    with pytest.raises(SimulatorNotStarted) as failed:
        start_simulator(SimulatorSettings(), ready_timeout_s=0.05)
    assert failed.value.status is None  # not ready, rather than exited
    assert time.monotonic() - started < 30  # the child's start (seconds on a busy machine), not 3 attempts' waits


@pytest.mark.e2e
def test_the_quickstart_completes_beside_a_cpu_load(tmp_path: Path) -> None:
    """`make demo`'s run (its config, with fewer requests), with its own temporary Prefect API,
    local Ray and simulator, beside busy processes, three per core (the other pytest worker runs
    its tests meanwhile too)."""
    marker = uuid.uuid4().hex
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"], env=_clean_env(marker))
            for _ in range(3 * len(os.sched_getaffinity(0)))]
    try:
        started = time.monotonic()
        done = subprocess.run(
            [BIN / "toolfactory", "run", "--config", str(REPO / "configs" / "quickstart.yaml"),
             "--set", f"storage.root={tmp_path / 'data'}", "--set", f"stats.path={tmp_path / 'stats.duckdb'}",
             # Every part the demo starts, and every stage, with fewer requests: its executable
             # sources and a few synthesized APIs without the seed catalog, fewer instructions each. What
             # a busy machine puts at risk is the starts, not the volume (and the busy processes
             # slow every other test of the suite while this one runs).
             "--set", "tasks.instructions_per_executable_tool=2", "--set", "tools.builtin_catalog=false",
             "--set", "tools.builtin_introductions=false", "--set", "tools.synthesis.count=2"],
            cwd=tmp_path, env=_clean_env(marker), capture_output=True, text=True, timeout=1500)
        wall = time.monotonic() - started
    finally:
        for process in busy:
            process.kill()
            process.wait()
    assert done.returncode == 0, done.stderr[-4000:]
    assert "completed" in done.stdout, done.stdout[-3000:]
    print(f"quickstart beside {len(busy)} busy processes: {wall:.0f} s")
    assert not _left_running(marker)
