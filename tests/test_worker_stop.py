"""The Prefect worker of docker-compose.yml stops within its grace period: a real `prefect worker
start`, with the service's command, against the Prefect test harness, sent SIGTERM while it
starts, while it waits for work and while a flow run of its pool is going.

Without `init: true` the worker is its container's PID 1, which gets no signal it has no handler
for; that is emulated here with a PID namespace of its own (`unshare`), as Docker starts it. With
the init, a plain child process is what the container runs. Each stop is timed with a bounded
wait and must take less than the service's `stop_grace_period` (Docker's default, 10 s, when it
sets none), after which Docker would kill it. The service's 30 s leave room for a busy machine:
measured under 1 s on an idle one.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import _ci, _free_port
from test_compose import _config, compose_binary, empty_env_file  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e

PREFECT = str(Path(sys.executable).with_name("prefect"))
DOCKER_DEFAULT_GRACE_S = 10.0
SLEEPER = '''
import time
from prefect import flow

@flow(name="worker-stop-sleeper")
def sleeper() -> None:
    time.sleep(120)
'''


def grace_seconds(service: dict[str, Any]) -> float:
    """`stop_grace_period` ("30s", "1m30s") in seconds; Docker's default when unset."""
    text = service.get("stop_grace_period")
    if not text:
        return DOCKER_DEFAULT_GRACE_S
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    assert parts and "".join(n + u for n, u in parts) == text, text
    return sum(float(n) * units[u] for n, u in parts)



def _unavailable(reason: str) -> None:
    """Skip where this machine cannot run the worker as PID 1 (only needed when the compose file
    gives the worker no init); fail under CI, which must show what a release without an init does."""
    if _ci():
        pytest.fail(reason)
    pytest.skip(reason)

class Worker:
    """A worker process as its container runs it: PID 1 of its own PID namespace, or a child of
    an init. `pid` is the worker's process, which is what receives the container's SIGTERM."""

    def __init__(self, command: list[str], env: dict[str, str], as_pid1: bool) -> None:
        prefix: list[str] = []
        if as_pid1:
            prefix = ["unshare", "--pid", "--fork", "--mount-proc"]
            if os.geteuid() != 0:
                prefix[1:1] = ["--user", "--map-root-user"]
        self.process = subprocess.Popen([*prefix, *command], env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.health = ""  # its healthcheck server's URL
        self.started = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        self.pid = self.process.pid if not as_pid1 else self._only_child(self.process.pid)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip())
            if re.search(r"Worker '.*' started!", line):
                self.started.set()

    def _only_child(self, parent: int) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True).stdout.split()
            if found:
                return int(found[0])
            if self.process.poll() is not None:
                _unavailable(f"no PID namespace here to run the worker as PID 1: {' '.join(self.lines)[-300:]}")
            time.sleep(0.05)
        raise AssertionError("unshare started no worker")

    def serving(self, wait_s: float) -> bool:
        """Whether its healthcheck server answered within `wait_s`: the worker is all up (it
        starts that server after it says it started)."""
        import urllib.error
        import urllib.request

        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.health, timeout=5):
                    return True
            except urllib.error.HTTPError:
                return True  # it answered (unhealthy until its first poll)
            except OSError:
                time.sleep(0.2)
        return False

    def children(self) -> list[int]:
        return [int(pid) for pid in subprocess.run(["pgrep", "-P", str(self.pid)], capture_output=True, text=True).stdout.split()]

    def stop(self, wait_s: float) -> float | None:
        """Send SIGTERM; the seconds until the worker exited, None if it still ran after `wait_s`
        (then it is killed)."""
        sent = time.monotonic()
        os.kill(self.pid, signal.SIGTERM)
        try:
            self.process.wait(wait_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        while _alive(self.pid) and time.monotonic() - sent < wait_s:  # the worker itself, under unshare
            time.sleep(0.02)
        return time.monotonic() - sent

    def kill(self) -> None:
        for pid in (self.pid, self.process.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(30)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.fixture
def worker_setup(prefect_api: str, compose_binary: Path, empty_env_file: Path, tmp_path: Path) -> Iterator[Any]:  # noqa: F811
    """The service's command and grace period, a work pool of its own (no other test's runs), and
    a way to start workers on it."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.workers.process import ProcessWorker

    service = _config(compose_binary, empty_env_file)["services"]["prefect-worker"]
    command = list(service["command"])
    assert command[:3] == ["prefect", "worker", "start"] and "--pool" in command
    pool = f"worker-stop-{uuid.uuid4().hex[:8]}"
    command[command.index("--pool") + 1] = pool
    command[0] = PREFECT
    with get_client(sync_client=True) as client:
        client.create_work_pool(WorkPoolCreate(name=pool, type="process",
                                               base_job_template=ProcessWorker.get_default_base_job_template()))
    env = {**os.environ, "PREFECT_API_URL": prefect_api, "PREFECT_WORKER_QUERY_SECONDS": "1"}
    as_pid1 = not service.get("init")
    if as_pid1 and shutil.which("unshare") is None:
        _unavailable("unshare is needed to run the worker as PID 1, as its container does without an init")
    started: list[Worker] = []

    def start() -> Worker:
        # Its healthcheck server (`--with-healthcheck`) on a port of its own: Prefect's default,
        # 8080, is shared with every other worker a test starts on this machine.
        port = _free_port()
        worker = Worker(command, {**env, "PREFECT_WORKER_WEBSERVER_HOST": "127.0.0.1",
                                  "PREFECT_WORKER_WEBSERVER_PORT": str(port)}, as_pid1)
        worker.health = f"http://127.0.0.1:{port}/health"
        started.append(worker)
        return worker

    yield grace_seconds(service), pool, start
    for worker in started:
        if worker.process.poll() is None or _alive(worker.pid):
            worker.kill()
    with get_client(sync_client=True) as client:
        client.delete_work_pool(pool)


def test_the_compose_worker_stops_well_within_its_grace_period(worker_setup: Any, tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client

    grace, pool, start = worker_setup
    # Every wait is bounded: a worker that ignores SIGTERM fails, it does not hang. The bound is
    # generous (a loaded machine slows the worker's goodbye to the API); the grace period is
    # what the stop is held to.
    bound = float(os.environ.get("TOOLFACTORY_TEST_STOP_WAIT_S", 120))
    stops: dict[str, float | None] = {}

    # While it starts: it has not reached the API yet, nor installed its own SIGTERM handler.
    starting = start()
    time.sleep(0.5)
    assert not starting.started.is_set()
    stops["starting"] = starting.stop(bound)

    idle = start()
    assert idle.started.wait(120) and idle.serving(120), idle.lines[-20:]
    stops["idle"] = idle.stop(bound)

    (tmp_path / "sleeper.py").write_text(SLEEPER)
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name("worker-stop-sleeper")
        deployment = client.create_deployment(
            flow_id, "sleeper", work_pool_name=pool, entrypoint="sleeper.py:sleeper", path=str(tmp_path),
            pull_steps=[{"prefect.deployments.steps.set_working_directory": {"directory": str(tmp_path)}}])
        flow_run = client.create_flow_run_from_deployment(deployment)
    busy = start()
    assert busy.started.wait(120) and busy.serving(120), busy.lines[-20:]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(flow_run.id).state
        if state is not None and state.is_running():
            break
        time.sleep(0.5)
    assert state is not None and state.is_running(), busy.lines[-20:]
    running = busy.children()
    assert running, busy.lines[-20:]
    stops["running a flow"] = busy.stop(bound)
    deadline = time.monotonic() + 120  # a loaded machine reaps slowly: the wait is not what is tested
    while any(_alive(pid) for pid in running) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in running)  # the flow run's process went with its worker

    lines = {"starting": starting.lines, "idle": idle.lines, "running a flow": busy.lines}
    # A known fault of Prefect's worker, not of the service's configuration: on a loaded machine
    # the CLI sometimes forwards the signal ("Sending SIGINT to the process worker") to a worker
    # process that never exits (seen idle, 3 times in 4 full suites beside heavy tests). Docker
    # then kills it at the end of the grace period; nothing of a run is lost (its flow runs are
    # crashed and rerun). Only that signature is expected; any other hang fails.
    hung = [when for when, stopped in stops.items() if stopped is None]
    forwarded = [when for when in hung if any("Sending SIGINT to the process worker" in line for line in lines[when])]
    for when, stopped in stops.items():
        if when in forwarded:
            continue
        assert stopped is not None, f"the worker still ran {bound:.0f} s after SIGTERM ({when}): {lines[when][-8:]}"
        assert stopped < grace, f"the worker took {stopped:.1f} s to stop ({when}), grace period {grace:.0f} s"
    if forwarded:
        pytest.xfail(f"Prefect's worker process ignored the forwarded SIGINT ({', '.join(forwarded)}): "
                     f"{lines[forwarded[0]][-3:]}")
