"""What a flow needs around it: a Prefect API, a Ray session and an LLM endpoint.

Prefect: the server named by PREFECT_API_URL, else a temporary local one. Ray: the cluster at
RAY_ADDRESS (or `orchestration.ray_address`), else a local Ray; either way its workers get the
flow's PREFECT_API_URL, so they report to the same API instead of each starting a temporary
server of their own. LLM: the configured endpoint, or the offline simulator on a free loopback
port when the provider is `simulator`. Ledger: the run's shared rate limit and budget, a named Ray
actor, when either is configured (see :mod:`toolfactory.llm.limits`).

What this module starts itself (the temporary Prefect API, a local Ray, the simulator) is waited
for by a deadline in wall time, `orchestration.*_start_timeout_s`, saying so while it waits, and
a start that fails ends in one :class:`~toolfactory.errors.StartupFailed` line with nothing left
running (:mod:`toolfactory.run.startup`); a run's flow ends `Failed` with that line
(:func:`startup_failure`).
"""

from __future__ import annotations

import importlib
import math
import os
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import httpx
import ray
from prefect import get_run_logger
from prefect.client.orchestration import get_client
from prefect.events.worker import EventsWorker
from prefect.exceptions import MissingContextError
from prefect.logging.handlers import APILogWorker
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.states import Failed

from toolfactory.config import Config
from toolfactory.config.run import OrchestrationConfig
from toolfactory.errors import StartupFailed
from toolfactory.llm.limits import Spend
from toolfactory.run.lifetime import descendants, guard_child, release_child
from toolfactory.run.startup import Spawned, Startup, one_line, say
from toolfactory.run.stats import StatsDB
from toolfactory.llm.simulator_process import SimulatorNotStarted, free_port, start_simulator


@contextmanager
def prefect_api(timeout_s: float = OrchestrationConfig().prefect_start_timeout_s, report: Callable[[str], None] = say) -> Iterator[str]:
    """A Prefect API for the flows run in this block; its URL. The temporary one, when no server
    is set, is waited for `timeout_s` in wall time (see :mod:`toolfactory.run.startup`)."""
    if PREFECT_API_URL.value():
        yield str(PREFECT_API_URL.value())
        return
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    server = temporary_api(timeout_s, report)
    pid = server.server_process.pid
    try:
        with temporary_settings({PREFECT_API_URL: server.api_url}):
            try:
                yield server.api_url
            finally:
                # Deliver queued run logs and events while the server still listens; otherwise
                # their workers retry against a closed port at exit.
                APILogWorker.drain_all(timeout=10)
                EventsWorker.drain_all(timeout=10)
    finally:
        server.stop()
        release_child(pid)


def temporary_api(timeout_s: float, report: Callable[[str], None] = say, port: int | None = None) -> Any:
    """Prefect's temporary server (a `SubprocessASGIServer`), started and waited for here rather
    than by its `start()`, whose wait counts only its own sleeps and is capped by a setting of
    Prefect's (20 s) that a busy machine exceeds. The process is Prefect's own command
    (`_run_uvicorn_command`: its settings reach the server as Prefect passes them); a server that
    exits while starting (its port taken, a locked database) is started once more on another
    port. `port`: the first attempt's (default: a free one). tests/test_startup.py runs this."""
    from prefect.server.api.server import SubprocessASGIServer

    with Startup("the temporary Prefect API", "orchestration.prefect_start_timeout_s", timeout_s, report) as startup:
        for attempt in (1, 2):
            server = SubprocessASGIServer()
            server.port = port if port is not None and attempt == 1 else free_port()
            server.running = True
            server.server_process = process = server._run_uvicorn_command()
            guard_child(process.pid)  # stopped by the guard if this process is killed meanwhile
            try:
                startup.wait_until(lambda timeout: _healthy(f"{server.api_url}/health", timeout), lambda: _exit_status(process))
                return server
            except StartupFailed as exc:
                server.stop()
                release_child(process.pid)
                if attempt == 2 or startup.expired():
                    raise
                startup.say(f"{exc}; starting it once more on another port")
    raise AssertionError("unreachable")


def _healthy(url: str, timeout: float) -> bool:
    try:
        return httpx.get(url, timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def _exit_status(process: subprocess.Popen[Any]) -> str | None:
    status = process.poll()
    return None if status is None else f"the process exited with status {status}"


def current_api_url() -> str:
    with get_client(sync_client=True) as client:
        return str(client.api_url)


@contextmanager
def ray_session(config: Config, warm: int = 0) -> Iterator[None]:
    """Ray for the shard tasks; left as found if the caller already started it.

    A local Ray started here gets `warm` workers (at most its shard slots) that import the shard
    task's modules at once, in the background: a worker's first shard would otherwise start only
    after about 3 s of imports (more when several start on busy cores), and the stages after the
    first would wait for them (measured with `benchmarks.overlap`)."""
    if ray.is_initialized():
        yield
        return
    address = config.orchestration.ray_address or os.environ.get("RAY_ADDRESS")
    # A local Ray takes its auth mode from the driver's environment, and its workers must agree
    # with it, so it is set here and not in the runtime env.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    env = {"PREFECT_API_URL": current_api_url()}
    kwargs: dict[str, object] = {"namespace": "toolfactory", "log_to_driver": False}
    if address:
        ray.init(address=address, runtime_env={"env_vars": env}, **kwargs)  # type: ignore[arg-type]
    else:
        slots = shard_slots(config)
        before = descendants({os.getpid()})
        # "local", not None: with None, Ray connects to whatever `ray start` last recorded in
        # /tmp/ray/ray_current_cluster, and hangs if that cluster has died.
        kwargs.update(include_dashboard=False, num_cpus=config.orchestration.ray_num_cpus,
                      _system_config={"num_workers_soft_limit": slots})
        # The workers of a local Ray inherit the environment of the raylet started here. A
        # runtime env would do the same, but Ray's prestarted and pooled workers have none, so
        # every shard worker would be a new process, started while the shards wait.
        # Ray starts its workers at niceness 15, to keep its own daemons responsive. A local Ray's
        # workers do the run's work, though: beside other work at the usual niceness 0 (a build,
        # another job, a CI runner's neighbours) they get a few percent of a core. Measured beside
        # six busy processes on 2 cores: the quickstart took 797 s with them at 15, 201 s at 0.
        # They run at the niceness of the run itself.
        local = {} if "RAY_worker_niceness" in os.environ else {"RAY_worker_niceness": "0"}
        _start_local_ray(kwargs, {**env, **local}, config.orchestration.ray_start_timeout_s, _reporter())
        # A local Ray is this driver's: its head processes die with it, but the agents and
        # workers they start do not always (measured: the runtime-env and dashboard agents stay
        # up). The guard stops every process of its tree when the driver dies. A remote cluster
        # outlives the driver by design; there Ray itself ends the tasks of a job whose driver
        # disconnected, and a shard never commits once its driver is gone (lifetime.Driver).
        for pid in descendants({os.getpid()}) - before:
            guard_child(pid, tree=True)
        for _ in range(min(warm, slots)):
            _warm.remote()  # not awaited: the workers import while the first stage runs
    try:
        yield
    finally:
        ray.shutdown()


# Ray's own waits while a local node starts, in seconds (the raylet's for its agents in ms), each
# given the run's deadline unless the environment sets it: the GCS's port file (30 s), the raylet
# for its agents' port files (its own start wait) and for their registration.
_RAY_WAITS = {"RAY_gcs_server_port_wait_time_s": 1, "RAY_raylet_start_wait_time_s": 1, "RAY_agent_register_timeout_ms": 1000}


def ray_waits(seconds: float) -> dict[str, str]:
    """Ray's own start-up waits (:data:`_RAY_WAITS`) set to `seconds`, as environment variables of
    the processes a node starts, except those the environment sets already."""
    return {name: str(max(1, math.ceil(seconds * unit))) for name, unit in _RAY_WAITS.items() if name not in os.environ}


def _start_local_ray(kwargs: dict[str, object], env: dict[str, str], timeout_s: float, report: Callable[[str], None]) -> None:
    """`ray.init` of a local Ray, waited for `timeout_s` in wall time (see
    :mod:`toolfactory.run.startup`). A start that fails before its deadline (a port taken, a stale
    session folder) is tried once more; a failed start leaves no process of Ray's running."""
    with Startup("the local Ray", "orchestration.ray_start_timeout_s", timeout_s, report) as startup:
        for attempt in (1, 2):
            waits = ray_waits(startup.remaining())
            failure = ""
            with Spawned() as spawned:
                try:
                    with _environment({**env, **waits}), node_registration_until(startup.deadline):
                        ray.init(address="local", **kwargs)  # type: ignore[arg-type]
                except Exception as exc:  # Ray raises bare Exceptions and RuntimeErrors alike
                    failure = f"{type(exc).__name__}: {exc}"
                else:
                    if not startup.expired():
                        return
                # Each of Ray's waits ends by the deadline, but a start is more than its waits: one
                # that ended after it is a start that did not finish in time.
                error = startup.failed(failure)
                ray.shutdown()
                spawned.stop()
            if attempt == 2 or startup.expired():
                raise error
            startup.say(f"{error}; starting it once more")


@contextmanager
def node_registration_until(deadline: float) -> Iterator[None]:
    """Ray's wait for a new node to register with its GCS, stretched to `deadline` (monotonic).

    `ray._private.node.Node` polls `services.get_node` for 30 s, a constant in its code, then
    fails with "The current node timed out during startup": on a busy machine the raylet often
    registers later. Within this block `get_node` itself keeps asking until `deadline`, so Ray's
    loop ends when the node registers or the deadline has passed. tests/test_startup.py fails if
    a Ray release stops calling it so."""
    import ray._private.services as services

    original = services.get_node

    def patient(gcs_address: str, node_id: str) -> Any:
        while True:
            try:
                return original(gcs_address, node_id)
            except RuntimeError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    services.get_node = patient
    try:
        yield
    finally:
        services.get_node = original


def _reporter() -> Callable[[str], None]:
    """Where a start's waiting lines go: the flow run's log (the terminal and the Prefect UI) in a
    flow, stderr elsewhere. Resolved here, in the caller's thread, where the run context is."""
    try:
        return get_run_logger().info  # type: ignore[no-any-return]
    except MissingContextError:
        return say


@ray.remote(num_cpus=0)
def _warm() -> None:
    """Import what a shard task's first run in this worker would, before one waits for it."""
    importlib.import_module("tasks.shard")


def shard_slots(config: Config) -> int:
    """The shards a local Ray runs at once: its CPUs over `orchestration.shard_cpus`.

    Ray keeps that many idle workers rather than its default of one per CPU. With fractional
    shard CPUs, the default kills the extra workers a second after a stage's shards end, and the
    next stage waits for new ones to start and import the project: measured 10 s of a 90 s run
    on 2 busy cores (`benchmarks.overlap`). A remote cluster sets this on its nodes
    (`RAY_num_workers_soft_limit`, deploy/kuberay/raycluster.yaml)."""
    cpus = config.orchestration.ray_num_cpus or len(os.sched_getaffinity(0))
    return max(1, math.ceil(cpus / config.orchestration.shard_cpus))


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """`values` in this process's environment for the block; the environment as it was after it."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def llm_endpoint(config: Config) -> Iterator[str | None]:
    """The base URL workers send LLM requests to (None: the configured `llm.base_url`)."""
    if config.llm.provider != "simulator":
        yield None
        return
    timeout_s = config.orchestration.simulator_start_timeout_s
    with Startup("the offline simulator", "orchestration.simulator_start_timeout_s", timeout_s, _reporter()) as startup:
        try:
            simulator = start_simulator(config.llm.simulator, ready_timeout_s=timeout_s, settings_name="llm.simulator")
        except SimulatorNotStarted as exc:
            detail = f"exited with status {exc.status}: {one_line(exc.output)}" if exc.status is not None else ""
            raise (startup.exited(detail) if detail else startup.timed_out()) from None
    guard_child(simulator.pid)  # stopped on exit, or by the guard if this process is killed
    try:
        yield simulator.base_url
    finally:
        simulator.stop()
        release_child(simulator.pid)


def startup_failure(exc: StartupFailed) -> Any:
    """The final state of a run's flow that could not start a process of its own: `Failed` with
    the one line (the part, the time waited, the setting), not a traceback in the flow's log."""
    return Failed(message=str(exc), data=exc)


@contextmanager
def session_hosts(config: Config, run_id: str) -> Iterator[None]:
    """The run's session hosts (made by its shards, one per node that opened a warm session of an
    executable source) are closed when its stages end, with the processes they kept."""
    try:
        yield
    finally:
        from toolfactory.executable.node_pool import close_hosts

        close_hosts(run_id, config.orchestration.session_host_close_timeout_s)


@dataclass(frozen=True)
class RunLedger:
    """The run's ledger actor: `ref` goes to every shard job; the flow asks it why the run stopped."""

    ref: Any
    handle: Any

    def stop_reason(self) -> str | None:
        from toolfactory.llm.ray_ledger import ledger_state

        return ledger_state(self.handle)["exhausted"]  # type: ignore[no-any-return]


@contextmanager
def run_ledger(config: Config, run_id: str, stats: StatsDB) -> Iterator[RunLedger | None]:
    """The run's shared limit and budget (inside a Ray session), None when neither is set. The
    budget starts from what every earlier attempt of the run spent, so a re-run cannot reset it."""
    if not (config.llm.rate_limit.enabled or config.llm.budget.enabled):
        yield None
        return
    from toolfactory.llm.ray_ledger import start_ledger, stop_ledger

    requests, tokens, usd = stats.run_spend(run_id)
    ref, handle = start_ledger(run_id, config.llm, Spend(requests, tokens, usd))
    try:
        yield RunLedger(ref, handle)
    finally:
        stop_ledger(handle)
