"""Shared fixtures: real Prefect (test harness), real local Ray, moto's S3 server over HTTP,
and the simulator as a real HTTP server. Each is started once per session."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
# Startup limits with room for a busy 2-core machine (the suite runs on two workers), for what
# Prefect starts by its own means (the test harness, a Prefect worker's temporary API): it starts
# in seconds on an idle machine, and in over a minute on a loaded one. A run's own processes wait by
# their settings (orchestration.*_start_timeout_s).
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
# Fake credentials for moto's S3 server, set before any Ray worker starts so that workers
# inherit them as production workers inherit theirs (unsigned uploads would be refused by S3).
S3_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "moto-test-access-key",
    "AWS_SECRET_ACCESS_KEY": "fake-secret-value-123456789",
    "AWS_REGION": "us-east-1",
}
os.environ.update(S3_CREDENTIALS)

REPO = Path(__file__).resolve().parents[1]
# The papers' released data (ToolBench answers, queries and response examples; ToolAlpaca's files).
# Read here, at import, because the autouse fixture below hides every TOOLFACTORY_* variable.
REAL_DATA = Path(os.environ.get("TOOLFACTORY_REAL_DATA") or REPO.parent / "shared" / "data")
REAL_DATA_PARTS = ("toolbench/answer", "toolbench/instruction", "toolbench/response_examples", "toolalpaca")


# One HTTP client for the tests' own requests (a simulator's settings and counters, a server's
# readiness): each new httpx client loads the system's certificates, about 20 ms. No connection is
# kept open, since a later simulator may listen on a port an earlier one left.
http = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))


def _ci() -> bool:
    """CI runs every real-data test: there, missing data is an error rather than a skip."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No TOOLFACTORY_* variable from the outside changes what a test sees."""
    for key in list(os.environ):
        if key.startswith("TOOLFACTORY_"):
            monkeypatch.delenv(key)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of the papers' released data; the test is skipped (failed under CI) without it."""
    missing = [part for part in REAL_DATA_PARTS if not (REAL_DATA / part).is_dir()]
    if missing:
        reason = (
            f"needs the papers' released data (ToolBench, ToolAlpaca) at {REAL_DATA}, missing {', '.join(missing)}: "
            "set TOOLFACTORY_REAL_DATA to a copy (see docs/development/tests.md, 'Tests on the released data')"
        )
        if _ci():
            pytest.fail(reason)
        pytest.skip(reason)
    return REAL_DATA


# Tests that run whole flows (a Prefect server, a local Ray, a driver's processes) are spread over
# both pytest-xdist workers (`make test` runs two) like every other test; each worker starts its
# own session fixtures (a Prefect harness, a local Ray), which share nothing but the CPUs.


# Fixtures that run a flow once for the tests of their module (they take the Prefect API).
_RUNTIME = {"prefect_api", "ray_cluster", "ray_head"}


# First, so that pytest-xdist's own hook (which turns an xdist_group mark into the node id's
# "@group" suffix that --dist loadgroup schedules by) sees the groups given here.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that read the released data, so that `-m real_data` selects them; give the
    tests that share a module fixture's run one xdist group, so that `--dist loadgroup` sends them
    to one worker and the run is made once (`--dist load` would spread them and make it twice);
    put the tests that run whole flows first, so that the two workers end together on the many
    short tests instead of one of them finishing a long flow alone."""
    items.sort(key=lambda item: item.get_closest_marker("e2e") is None)  # stable: file order otherwise
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.real_data)
        definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        for name in getattr(item, "fixturenames", ()):
            shared = definitions.get(name, ())
            if shared and shared[-1].scope == "module" and _RUNTIME & set(shared[-1].argnames):
                item.add_marker(pytest.mark.xdist_group(f"{item.module.__name__}.{name}"))  # type: ignore[attr-defined]
                break


@pytest.fixture(scope="session")
def prefect_api() -> Iterator[str]:
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield str(PREFECT_API_URL.value())


@pytest.fixture(scope="session")
def ray_cluster(prefect_api: str, ray_head: str) -> Iterator[None]:
    """This pytest process as a driver of the worker's Ray cluster (`ray_head`), for the tests
    that run flows in-process: one cluster a worker, shared with its command-line runs."""
    import ray

    ray.init(
        address=ray_head,
        log_to_driver=False,
        namespace="toolfactory-tests",
        runtime_env={"env_vars": {"PREFECT_API_URL": prefect_api}},
    )
    yield
    ray.shutdown()


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie has exited). It may end between the open of its
    /proc entry and the read, which then raises ProcessLookupError: gone, too."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def ray_head() -> Iterator[str]:
    """The address of a Ray cluster (`ray start --head`) that this pytest worker's runs share: its
    command-line runs, and its in-process ones through `ray_cluster`.

    A `toolfactory run` in a subprocess otherwise starts and stops a local Ray of its own: 10 s
    each on an idle 2-core machine, 20 to 30 s on a busy one; a second cluster a worker costs
    its start and its daemons' CPU for the whole session. Tests of the local Ray itself (its start, its stop with a
    killed driver, a stale cluster record) do not use it. Each pytest-xdist worker starts its own,
    on ports of its own and in a temp dir of its own (short: Ray's socket paths are
    length-limited), so that neither two workers' clusters nor a `ray start` elsewhere on the
    machine meet in /tmp/ray; stopped, with every process it started, at the session's end.

    A head that has not started within 120 s is stopped and started once more, on other ports (a
    port found free may be taken before Ray binds it; once, a head waited silently for 180 s), with a
    warning that shows its logs; a second failure fails the tests that need it, with both logs.
    Ray's own waits are each attempt's deadline (flows/ray_node.py), as a run's are its own."""
    failures: list[str] = []
    for deadline_s in (120, 300):
        head = _RayHead()
        failure = head.start(deadline_s)
        if failure is None:
            break
        failures.append(failure)
        head.stop()
    else:
        raise RuntimeError("`ray start --head` did not start a cluster, twice:\n" + "\n\n".join(failures))
    if failures:
        import warnings

        warnings.warn(f"`ray start --head` started at the second attempt; the first:\n{failures[0]}", stacklevel=1)
    try:
        yield head.address
    finally:
        head.stop()


class _RayHead:
    """One `ray start --head` of `ray_head`, on free ports and in a temp dir of its own."""

    def __init__(self) -> None:
        import tempfile

        self.port = _free_port()
        self.ports = {f"--{name}={_free_port()}" for name in (
            "ray-client-server-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
            "runtime-env-agent-port", "metrics-export-port", "node-manager-port", "object-manager-port")}
        self.temp_dir = tempfile.mkdtemp(prefix="tfray", dir="/tmp")
        self.address = f"127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, deadline_s: float) -> str | None:
        """Start the head and wait until it runs; None, or why it does not (with its logs)."""
        import sys
        import time

        # The workers inherit this environment, as the workers of a production cluster inherit
        # theirs: the S3 credentials above, no TOOLFACTORY_* setting.
        env = {key: value for key, value in os.environ.items() if not key.startswith(("TOOLFACTORY_", "RAY_ADDRESS"))}
        # Idle workers kept for the most shard slots a test asks for (test_overlap's 0.6 CPU a shard:
        # four, as flows.runtime.shard_slots counts them), as a run's own local Ray keeps one per slot.
        # With Ray's default of one per CPU, the workers past two are killed when a stage ends and
        # started again, each importing the project, by the next stage.
        env["RAY_num_workers_soft_limit"] = "4"
        # Workers at the run's own niceness, as a run's local Ray has them (flows/runtime.py): at
        # Ray's 15, the shards of every test wait behind any busy process on the machine.
        env["RAY_worker_niceness"] = "0"
        log = Path(self.temp_dir) / "head.log"
        with log.open("w") as out:
            self.process = subprocess.Popen(
                # Ray's command line with the run's patience for a new node (flows/ray_node.py).
                [sys.executable, "-m", "flows.ray_node", "start", "--head", f"--port={self.port}", *sorted(self.ports), "--num-cpus=2", "--include-dashboard=false",
                 "--disable-usage-stats", f"--temp-dir={self.temp_dir}", "--node-ip-address=127.0.0.1", "--block"],
                env={**env, "RAY_AUTH_MODE": "disabled", "TOOLFACTORY_ORCHESTRATION__RAY_START_TIMEOUT_S": str(deadline_s)}, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = time.monotonic() + deadline_s
        while "Ray runtime started" not in log.read_text():
            exited = self.process.poll()
            if exited is not None or time.monotonic() > deadline:
                why = f"exited with {exited}" if exited is not None else f"not started after {deadline_s} s"
                return f"{why} (port {self.port}, {' '.join(sorted(self.ports))}):\n{self._logs()}"
            time.sleep(0.2)
        return None

    def _logs(self) -> str:
        logs = Path(self.temp_dir, "session_latest", "logs")
        parts = [Path(self.temp_dir, "head.log").read_text()[-3000:]]
        for name in ("gcs_server.err", "gcs_server.out", "raylet.err", "raylet.out"):
            path = logs / name
            if path.is_file() and path.stat().st_size:
                parts.append(f"--- {name}:\n{path.read_text(errors='replace')[-1500:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Killed, not stopped: Ray's own shutdown takes about 40 s (measured: the raylet 10 s, the
        GCS 30 s more), and the cluster holds nothing the session keeps."""
        import shutil
        import signal
        import time

        from toolfactory.run.lifetime import descendants

        if self.process is not None:
            started = descendants({self.process.pid}) | {self.process.pid}
            for pid in started:  # Ray's agents leave the process group: each is killed by its pid
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.process.wait(30)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in started):
                time.sleep(0.1)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[dict[str, str]]:
    """moto's S3 server on a free loopback port (credentials: S3_CREDENTIALS above)."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="toolfactory")
    yield {"endpoint": endpoint, "bucket": "toolfactory", **S3_CREDENTIALS}
    server.stop()


@pytest.fixture(scope="session")
def simulator_url() -> Iterator[str]:
    from toolfactory.simulator import SimulatorSettings, start_simulator

    with start_simulator(SimulatorSettings()) as sim:
        yield sim.base_url


def break_endpoint_once_planned(planned: Callable[[], bool], simulator_root: str, timeout_s: float = 300) -> Any:
    """A started thread that makes the simulator at `simulator_root` answer every request with a
    500 once `planned()` is true (the run's manifest exists: preflight has passed), or after
    `timeout_s`."""
    import threading
    import time

    def breaker() -> None:
        deadline = time.monotonic() + timeout_s
        while not planned() and time.monotonic() < deadline:
            time.sleep(0.02)
        http.post(f"{simulator_root}/simulator/settings", json={"rate_500": 1.0}).raise_for_status()

    thread = threading.Thread(target=breaker, daemon=True)
    thread.start()
    return thread


def small_run_overrides(root: Path | str, **extra: Any) -> list[str]:
    """Overrides for a quick run: few tools, no simulated latency or content faults."""
    values: dict[str, Any] = {
        "storage.root": str(root),
        "tools.max_tools": 8,
        # The catalog only: documentation generation and synthesis have tests of their own.
        "tools.builtin_introductions": False,
        "tools.synthesis.count": 0,
        # One recipe with no target mode: the recipes and modes have tests of their own.
        "tasks.recipes": "{toolalpaca: 1}",
        # One shard a stage: each shard is a Prefect task run on Ray (about 0.25 CPU-seconds of
        # orchestration in the driver, a worker and the server). Tests of what shards do to each
        # other (fan-in, overlap, a failed shard, a re-run) ask for several.
        "tools.tools_per_shard": 8,
        "tasks.instructions_per_tool": 2,
        "llm.simulator.latency_ms": 0,
        "llm.simulator.latency_jitter_ms": 0,
        "llm.simulator.rate_malformed_json": 0,
        "llm.simulator.rate_hallucinated_function": 0,
        "llm.simulator.rate_missing_required": 0,
        "llm.simulator.rate_wrong_type": 0,
        "llm.simulator.rate_parallel_calls": 0,
        "llm.simulator.rate_follow_up_call": 0,
        "llm.simulator.rate_clarify": 0,
        "llm.simulator.rate_decline": 0,
        "orchestration.task_retry_delay_s": 0,
        # Retries keep their number, not their wait: the gateway's tests check the backoff itself.
        "llm.backoff_initial_s": 0.05,
        **extra,
    }
    return [f"{key}={value}" for key, value in values.items()]


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Any]:
    """`mount(size, read_only)`: a real small file system of its own (a tmpfs, which needs root),
    for a full or read-only disk; unmounted afterwards."""
    if os.geteuid() != 0:  # CI runs as root: there the test must run
        reason = "mounting a tmpfs needs root"
        if _ci():
            pytest.fail(reason)
        pytest.skip(reason)
    mounted: list[Path] = []

    def mount(size: str = "1m", read_only: bool = False) -> Path:
        target = tmp_path / f"fs-{len(mounted)}"
        target.mkdir()
        options = f"size={size}" + (",ro" if read_only else "")
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], check=True)
        mounted.append(target)
        return target

    yield mount
    for target in mounted:
        subprocess.run(["umount", "-l", str(target)], check=False)


@pytest.fixture
def toolfactory_here(ray_cluster: None, capsys: pytest.CaptureFixture[str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`toolfactory_here(*args)`: the command line's own entry point (`toolfactory.cli.main`) run
    in this process, with the session's Prefect API and Ray cluster; its exit code and output as
    a subprocess's would be.

    For the tests whose point is what a command says and returns (a spent budget, failed shards,
    a second run on a root): in a subprocess, each run would also import the project and start
    Ray workers of its own, which import it again (about 25 CPU-seconds a run). Tests of what
    only a process shows (a kill, a terminal, where a process finds its Ray cluster) keep a
    subprocess."""
    import signal
    import sys

    from toolfactory import cli

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()  # what the test printed before is not the command's
        argv, sigterm = sys.argv, signal.getsignal(signal.SIGTERM)
        sys.argv = ["toolfactory", *args]
        try:
            cli.main()
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        finally:
            sys.argv = argv
            signal.signal(signal.SIGTERM, sigterm)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["toolfactory", *args], code, out, err)

    return run
