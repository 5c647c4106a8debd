"""Warm sessions shared by every worker of a Ray node: one session host per (run, node).

A worker process's own pool (:mod:`toolfactory.executable.pool`) reuses a source's processes
only for the shards that worker runs. Ray spreads a stage's shards over several worker processes
per node, and the verify stage's replays over others again, so each of them started its own
processes of every source: the starts grew with the workers, not with the work. Here the
processes live in one Ray actor per run and node (the *session host*), and every worker of that
node leases its sessions from it: a source is started about as many times as the node ever runs
sessions of it at once, whatever the number of workers and stages.

The host is an async actor that asks for no CPU and is pinned to its node (its processes are
local to the workers that call them; a call costs a local actor round trip, well under the
milliseconds of the call itself). It is found by name, made by the first worker that needs it
(``get_if_exists``) and detached from that worker, whose exit must not take the sessions of the
others with it; the run's flow closes every host of the run when its stages end
(:func:`close_hosts`). A lease names the worker process holding it: a sweep gives back, as not
reusable, the leases of a worker that died, so a killed worker leaks no process.

The host puts no limit of its own on how many processes run: each shard still takes a slot per
session (``max_sessions``), so a node runs at most as many as its shards hold at once, as
before, and a dialogue waiting for one source while holding another cannot wait on another
worker's dialogue (no cross-worker deadlock).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any

from toolfactory.executable.confine import alive
from toolfactory.executable.pool import Counts, _Held, _SourcePool
from toolfactory.executable.session import EXEC_CRASHED, CallResult, Environment, ExecutionFailed, Session
from toolfactory.executable.settings import ExecutableSourceSettings
from toolfactory.models import canonical_json

#: How often the host looks for leases whose worker process died (seconds).
SWEEP_SECONDS = 5.0
#: A host that has leased nothing for this long stops (its run's driver died before closing it).
IDLE_EXIT_SECONDS = 900.0
#: No pool limit of the host's own: the shards' slots bound the sessions (see the module doc).
UNBOUNDED = 1 << 30
PREFIX = "toolfactory-sessions-"

_HOST: contextvars.ContextVar[HostRef | None] = contextvars.ContextVar("toolfactory_session_host", default=None)


@dataclass(frozen=True)
class HostRef:
    """Which session host a shard's warm sessions come from: its run and its node."""

    run_id: str
    node_id: str

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.run_id}-{self.node_id}"


def use_host(run_id: str) -> contextvars.Token[HostRef | None] | None:
    """From now on in this context (a shard running in a Ray worker), warm sessions come from the
    session host of `run_id` on this node; nothing changes outside Ray."""
    import ray

    if not ray.is_initialized():
        return None
    return _HOST.set(HostRef(run_id, ray.get_runtime_context().get_node_id()))


def current_host() -> HostRef | None:
    return _HOST.get()


class SessionHost:
    """The Ray actor: the node's warm pools, leased out session by session."""

    def __init__(self, sweep_s: float = SWEEP_SECONDS, idle_exit_s: float | None = None) -> None:
        self._pools: dict[str, _SourcePool] = {}
        self._leases: dict[str, tuple[_SourcePool, _Held, int]] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._sweep_s = sweep_s
        self._idle_exit_s = idle_exit_s
        self._last_used = time.monotonic()

    def pid(self) -> int:
        """The host's process (the sources' processes are its descendants)."""
        return os.getpid()

    def leases(self) -> int:
        return len(self._leases)

    async def acquire(self, environment: Environment, key: str, holder: int) -> tuple[str, bool, str | None] | _Failed:
        """A fresh session of `environment` for the worker process `holder`: (lease, reused, the
        source's version), or why it could not start."""
        self._last_used = time.monotonic()
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep())
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = _SourcePool(environment, UNBOUNDED)
        try:
            held, reused = await pool.acquire()
        except ExecutionFailed as exc:
            return _Failed(exc.reason, exc.message)
        lease = uuid.uuid4().hex
        self._leases[lease] = (pool, held, holder)
        version = getattr(held.session, "version", None)
        return lease, reused, str(version()) if callable(version) else None

    async def call(self, lease: str, name: str, arguments: dict[str, Any]) -> CallResult | _Failed:
        try:
            return await self._session(lease).call(name, arguments)
        except ExecutionFailed as exc:
            return _Failed(exc.reason, exc.message)

    async def state(self, lease: str) -> Any:
        try:
            return await self._session(lease).state()
        except ExecutionFailed as exc:
            return _Failed(exc.reason, exc.message)

    async def release(self, lease: str, reusable: bool) -> None:
        self._last_used = time.monotonic()
        found = self._leases.pop(lease, None)
        if found is not None:
            await found[0].release(found[1], reusable)

    def counts(self) -> dict[str, int]:
        total = Counts()
        for pool in self._pools.values():
            total.started += pool.counts.started
            total.reused += pool.counts.reused
            total.replaced += pool.counts.replaced
        return {"started": total.started, "reused": total.reused, "replaced": total.replaced}

    async def close(self) -> None:
        """Stop every process: the leased ones too (the run is over)."""
        for lease in list(self._leases):
            await self.release(lease, False)
        for pool in self._pools.values():
            await pool.close()

    def _session(self, lease: str) -> Session:
        found = self._leases.get(lease)
        if found is None:
            raise ExecutionFailed(EXEC_CRASHED, "the session was given back (its worker process was gone)")
        return found[1].session

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_s)
            for lease, (_pool, _held, holder) in list(self._leases.items()):
                if not alive(holder):
                    with suppress(Exception):
                        await self.release(lease, False)
            if self._idle_exit_s is not None and not self._leases and time.monotonic() - self._last_used > self._idle_exit_s:
                # Nobody closed it (its run's driver was killed): it stops its processes and
                # itself, rather than hold them on the cluster for good.
                await self.close()
                import ray

                ray.actor.exit_actor()  # type: ignore[no-untyped-call]


@dataclass(frozen=True)
class _Failed:
    """An :class:`ExecutionFailed` crossing the actor boundary as data (its reason intact)."""

    reason: str
    message: str

    def raised(self) -> ExecutionFailed:
        return ExecutionFailed(self.reason, self.message)


def _host(ref: HostRef) -> Any:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return ray.remote(SessionHost).options(
        name=ref.name, get_if_exists=True, lifetime="detached", num_cpus=0, max_restarts=0, max_concurrency=1024,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=ref.node_id, soft=False),
    ).remote(SWEEP_SECONDS, IDLE_EXIT_SECONDS)


class HostedSession:
    """A session leased from the node's host, as the caller's loop sees it."""

    def __init__(self, actor: Any, lease: str, reused: bool, version: str | None) -> None:
        self._actor, self._lease, self._version = actor, lease, version
        self.reusable = True
        self.reused = reused
        """Whether a process of an earlier session was reset for this one (else one was started)."""

    async def _ask(self, reply: Any) -> Any:
        try:
            answer = await _remote(reply)
        except BaseException:
            self.reusable = False  # cut short mid-call: nothing tells what state the process is in
            raise
        if isinstance(answer, _Failed):
            self.reusable = False
            raise answer.raised()
        return answer

    async def call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        return await self._ask(self._actor.call.remote(self._lease, name, arguments))  # type: ignore[no-any-return]

    async def state(self) -> Any:
        return await self._ask(self._actor.state.remote(self._lease))

    def version(self) -> str | None:
        return self._version


async def _remote(reply: Any) -> Any:
    """A Ray reply awaited; the actor's death is a crash of the session's environment."""
    from ray.exceptions import RayActorError

    try:
        return await reply
    except RayActorError as exc:
        raise ExecutionFailed(EXEC_CRASHED, f"the node's session host is gone ({type(exc).__name__})") from None


@asynccontextmanager
async def hosted_session(ref: HostRef, environment: Environment, settings: ExecutableSourceSettings) -> AsyncIterator[Session]:
    """A fresh session of `environment` leased from the host `ref` names, given back on leaving
    (reusable unless one of its calls failed or was cut short)."""
    key = canonical_json([settings.name, settings.model_dump(mode="json")])
    for attempt in (1, 2):
        actor = _host(ref)
        acquired = asyncio.ensure_future(_remote(actor.acquire.remote(environment, key, os.getpid())))
        try:
            answer = await asyncio.shield(acquired)
            break
        except ExecutionFailed:
            if attempt == 2:
                raise
            # The host stopped as this worker found it (idle for long): the next one is made anew.
        except asyncio.CancelledError:
            acquired.add_done_callback(_give_back(actor))
            raise
    if isinstance(answer, _Failed):
        raise answer.raised()
    lease, reused, version = answer
    session = HostedSession(actor, lease, reused, version)
    try:
        yield session
    finally:
        release = asyncio.ensure_future(_remote(actor.release.remote(lease, session.reusable)))
        with suppress(BaseException):
            await asyncio.shield(release)


def _give_back(actor: Any) -> Any:
    """A callback that gives back, unused, a session handed out to a caller that gave up."""

    def give_back(done: asyncio.Future[Any]) -> None:
        if not done.cancelled() and done.exception() is None and not isinstance(done.result(), _Failed):
            actor.release.remote(done.result()[0], True)

    return give_back


def close_hosts(run_id: str, timeout_s: float) -> int:
    """Close and remove every session host of `run_id` (its stages are over); how many."""
    import ray

    if not ray.is_initialized():
        return 0
    names = [entry["name"] if isinstance(entry, dict) else entry
             for entry in ray.util.list_named_actors(all_namespaces=False)]
    closed = 0
    for name in names:
        if not str(name).startswith(f"{PREFIX}{run_id}-"):
            continue
        with suppress(Exception):
            actor = ray.get_actor(name)
            with suppress(Exception):
                ray.get(actor.close.remote(), timeout=timeout_s)
            ray.kill(actor)
            closed += 1
    return closed
