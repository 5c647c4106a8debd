"""Warm sessions: a source's processes kept between dialogues, each dialogue handed a fresh one.

Starting a server or a runner process costs seconds on a loaded machine; a call costs
milliseconds. So a pool keeps the processes of a source it has started and hands the
next dialogue one of them, reset (:meth:`PythonSession.reset`: the instance made anew from the
initial state; :meth:`McpSession.reset`: the working folder emptied, and a ping). A process is
started only when none is idle and fewer than ``max_sessions`` are alive; one whose session
failed (it hung, crashed, flooded), whose reset fails or whose caller was cancelled mid-call is
closed and replaced, so a dead process costs the next dialogue a start, never its verdict.

Whether a source is reset this way is vetting's finding (a reset session answers and holds what
a fresh one does: :func:`~toolfactory.executable.vetting.vet`) unless ``warm_sessions`` says so;
otherwise every session is a new process, as without the pool. Sessions over HTTP are never
pooled: the server is not ours, and a new MCP session costs a request.

On Ray, the pools live in the node's session host, shared by every worker of the node
(:mod:`toolfactory.executable.node_pool`, chosen by :func:`open_session`); the pools here are a
worker process's own, used where a stage runs outside Ray.

The processes outlive the event loop of a shard (each shard runs its own), so the pool runs them
on an event loop of its own, in a daemon thread of the worker process; a session's calls are
handed to that loop and awaited from the caller's. The processes stop when the worker process
exits (and with the pool's thread, by the launcher's parent-death signal, if it is killed).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
from collections.abc import AsyncIterator, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, TypeVar

from toolfactory.executable.session import CallResult, Environment, ExecutionFailed, Session
from toolfactory.executable.settings import ExecutableSourceSettings
from toolfactory.models import canonical_json

T = TypeVar("T")
#: How long closing the pool's processes may take when the worker process exits.
CLOSE_SECONDS = 10.0


class _Loop:
    """An event loop running in a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="toolfactory-warm-sessions", daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """`coro`, run on this loop and awaited from the caller's (a cancelled caller cancels it)."""
        return await asyncio.wrap_future(self.submit(coro))


@dataclass
class _Held:
    """One live session, held open by a task of the pool's loop until it is closed (an MCP
    session is a task group, which the task that entered it must leave)."""

    session: Session
    done: asyncio.Event
    holder: asyncio.Task[None]
    uses: int = 0

    async def close(self) -> None:
        self.done.set()
        with suppress(BaseException):
            await self.holder


@dataclass
class Counts:
    """Sessions handed out and processes started by one pool (or all of a worker's)."""

    started: int = 0
    reused: int = 0
    replaced: int = 0
    """Idle processes found dead or hung at their reset, and closed."""


@dataclass
class _SourcePool:
    environment: Environment
    limit: int
    idle: list[_Held] = field(default_factory=list)
    alive: int = 0
    counts: Counts = field(default_factory=Counts)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def acquire(self) -> tuple[_Held, bool]:
        """A fresh session (reset when reused) and whether it was reused."""
        async with self.changed:
            while True:
                while self.idle:
                    held = self.idle.pop()
                    try:
                        await held.session.reset()  # type: ignore[attr-defined]
                    except ExecutionFailed:
                        self.counts.replaced += 1
                        await self._drop(held)
                        continue
                    held.uses += 1
                    self.counts.reused += 1
                    return held, True
                if self.alive < self.limit:
                    break
                await self.changed.wait()
            self.alive += 1
        try:
            held = await self._open()
        except BaseException:
            async with self.changed:
                self.alive -= 1
                self.changed.notify()
            raise
        self.counts.started += 1
        held.uses = 1
        return held, False

    async def _open(self) -> _Held:
        ready: asyncio.Future[Session] = asyncio.get_running_loop().create_future()
        done = asyncio.Event()

        async def hold() -> None:
            try:
                async with self.environment.session() as session:
                    ready.set_result(session)
                    await done.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)

        holder = asyncio.create_task(hold())
        try:
            return _Held(await ready, done, holder)
        except BaseException:
            # Cancelled while it started (its caller gave up): nothing of it may keep running.
            done.set()
            holder.cancel()
            with suppress(BaseException):
                await holder
            raise

    async def release(self, held: _Held, reusable: bool) -> None:
        if not reusable:
            await self._drop(held)
            async with self.changed:
                self.changed.notify()
            return
        async with self.changed:
            self.idle.append(held)
            self.changed.notify()

    async def _drop(self, held: _Held) -> None:
        await held.close()
        self.alive -= 1

    async def close(self) -> None:
        while self.idle:
            await self._drop(self.idle.pop())


class _PooledSession:
    """A pooled session as the caller's loop sees it: every call runs on the pool's loop."""

    def __init__(self, loop: _Loop, held: _Held, reused: bool) -> None:
        self._loop, self._held = loop, held
        self.reusable = True
        self.reused = reused
        """Whether a process of an earlier session was reset for this one (else one was started)."""

    async def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            return await self._loop.run(coro)
        except BaseException:
            # The environment failed, or the caller gave up mid-call (its answer may still come):
            # either way nothing tells what state the process is in.
            self.reusable = False
            raise

    async def call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        return await self._run(self._held.session.call(name, arguments))

    async def state(self) -> Any:
        return await self._run(self._held.session.state())

    def __getattr__(self, name: str) -> Any:  # what vetting reads (a process, a link)
        return getattr(self._held.session, name)


class WarmPools:
    """The pools of one worker process, by source configuration."""

    def __init__(self) -> None:
        self._loop: _Loop | None = None
        self._pools: dict[str, _SourcePool] = {}
        self._lock = threading.Lock()

    def _pool(self, environment: Environment, settings: ExecutableSourceSettings) -> tuple[_Loop, _SourcePool]:
        key = canonical_json([settings.name, settings.model_dump(mode="json")])
        with self._lock:
            if self._loop is None:
                self._loop = _Loop()
                atexit.register(self.close)
            if key not in self._pools:
                # Made on the pool's loop: its condition belongs there.
                self._pools[key] = self._loop.submit(_made(environment, settings.max_sessions)).result()
            return self._loop, self._pools[key]

    @asynccontextmanager
    async def session(self, environment: Environment, settings: ExecutableSourceSettings) -> AsyncIterator[Session]:
        loop, pool = self._pool(environment, settings)
        acquired = loop.submit(pool.acquire())
        try:
            held, reused = await asyncio.wrap_future(acquired)
        except asyncio.CancelledError:
            # The caller gave up as the pool handed a session out: it goes back, unused.
            def give_back(done: concurrent.futures.Future[tuple[_Held, bool]]) -> None:
                if not done.cancelled() and done.exception() is None:
                    loop.submit(pool.release(done.result()[0], True))

            acquired.add_done_callback(give_back)
            raise
        pooled = _PooledSession(loop, held, reused)
        try:
            yield pooled  # type: ignore[misc]
        finally:
            # Whatever ended the dialogue (a rule, an LLM error), the process is reusable unless
            # one of its own calls failed or was cut short: the next reset makes it fresh.
            reusable = pooled.reusable
            # Given back whatever happens to the caller (a cancelled one too): the release runs on
            # the pool's loop, awaited here for as long as the caller lets it.
            release = loop.submit(pool.release(held, reusable))
            with suppress(BaseException):
                await asyncio.shield(asyncio.wrap_future(release))

    def counts(self) -> Counts:
        """Sessions handed out and processes started in this worker process so far."""
        total = Counts()
        for pool in list(self._pools.values()):
            total.started += pool.counts.started
            total.reused += pool.counts.reused
            total.replaced += pool.counts.replaced
        return total

    def close(self) -> None:
        """Stop every idle process (the worker process is exiting)."""
        if self._loop is None:
            return
        futures = [self._loop.submit(pool.close()) for pool in self._pools.values()]
        for future in futures:
            with suppress(Exception):
                future.result(CLOSE_SECONDS)


async def _made(environment: Environment, limit: int) -> _SourcePool:
    return _SourcePool(environment, limit)


_POOLS: dict[int, WarmPools] = {}
_POOLS_LOCK = threading.Lock()


def pools() -> WarmPools:
    """This worker process's pools (a forked child gets its own)."""
    with _POOLS_LOCK:
        return _POOLS.setdefault(os.getpid(), WarmPools())


def warm(settings: ExecutableSourceSettings, vetted: bool | None) -> bool:
    """Whether sessions of a source are reused: as configured, else as vetting found (`vetted`)."""
    if getattr(settings, "transport", "stdio") != "stdio":
        return False
    return settings.warm_sessions if settings.warm_sessions is not None else vetted is True


def open_session(environment: Environment, settings: ExecutableSourceSettings, warm: bool) -> AbstractAsyncContextManager[Session]:
    """A fresh environment of `environment`: a reset warm process when `warm`, else a new process.
    A warm one comes from the node's session host where the shard runs on Ray (shared by the
    node's workers: :mod:`toolfactory.executable.node_pool`), else from this process's pools."""
    if not warm:
        return environment.session()
    from toolfactory.executable.node_pool import current_host, hosted_session

    host = current_host()
    return hosted_session(host, environment, settings) if host is not None else pools().session(environment, settings)
