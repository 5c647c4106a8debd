"""What a flow needs around it: a Prefect API, a Ray session and an LLM endpoint.

Prefect: the server named by PREFECT_API_URL, else a temporary local one. Ray: the cluster at
RAY_ADDRESS (or `orchestration.ray_address`), else a local Ray; either way its workers get the
flow's PREFECT_API_URL, so they report to the same API instead of each starting a temporary
server of their own. LLM: the configured endpoint, or the offline simulator on a free loopback
port when the provider is `simulator`. Ledger: the run's shared rate limit and budget, a named Ray
actor, when either is configured (see :mod:`toolfactory.llm.limits`).
"""

from __future__ import annotations

import importlib
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import ray
from prefect.client.orchestration import get_client
from prefect.events.worker import EventsWorker
from prefect.logging.handlers import APILogWorker
from prefect.settings import PREFECT_API_URL, temporary_settings

from toolfactory.config import Config
from toolfactory.run.lifetime import descendants, guard_child, release_child
from toolfactory.llm.limits import Spend
from toolfactory.run.stats import StatsDB
from toolfactory.simulator import start_simulator


@contextmanager
def prefect_api() -> Iterator[str]:
    """A Prefect API for the flows run in this block; its URL."""
    if PREFECT_API_URL.value():
        yield str(PREFECT_API_URL.value())
        return
    from prefect.server.api.server import SubprocessASGIServer

    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    server = SubprocessASGIServer()
    server.start()
    pid = server.server_process.pid if server.server_process else None
    if pid is not None:
        guard_child(pid)  # stopped below, or by the guard if this process is killed
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
        if pid is not None:
            release_child(pid)


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
        with _environment(env):
            ray.init(address="local", **kwargs)  # type: ignore[arg-type]
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
    with start_simulator(config.llm.simulator) as simulator:
        guard_child(simulator.pid)  # stopped on exit, or by the guard if this process is killed
        try:
            yield simulator.base_url
        finally:
            simulator.stop()
            release_child(simulator.pid)


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
