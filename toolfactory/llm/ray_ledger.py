"""The run's :class:`~toolfactory.llm.limits.Ledger` as a named Ray actor (the Ray adapter of
:mod:`toolfactory.llm.limits`, which says why the ledger lives here).

The flow starts one actor per run before its stages and kills it after them; a shard worker finds
it by name from the :class:`LedgerRef` in its job. The actor asks for no CPU, so it never takes a
slot from the shard tasks, and runs one call at a time, so the ledger needs no lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ray

from toolfactory.config import LLMConfig
from toolfactory.llm.limits import Grant, Ledger, Report, SharedLimit, Spend


@dataclass(frozen=True)
class LedgerRef:
    """Where a worker finds its run's ledger: plain data, cheap to ship with every shard job."""

    name: str
    namespace: str

    def connect(self, llm: LLMConfig) -> SharedLimit:
        return SharedLimit(_ActorPort(ray.get_actor(self.name, namespace=self.namespace)), llm)


class _ActorPort:
    def __init__(self, actor: Any) -> None:
        self._actor = actor

    async def lease(self, want: int, report: Report) -> Grant:
        return await self._actor.lease.remote(want, report)  # type: ignore[no-any-return]

    async def pause(self, seconds: float) -> None:
        await self._actor.pause.remote(seconds)


def start_ledger(run_id: str, llm: LLMConfig, spent: Spend) -> tuple[LedgerRef, Any]:
    """A new ledger actor for `run_id`, seeded with what the run has spent so far; (ref, handle)."""
    ref = LedgerRef(f"toolfactory-ledger-{run_id}", ray.get_runtime_context().namespace)
    actor = ray.remote(Ledger).options(name=ref.name, namespace=ref.namespace, num_cpus=0, max_restarts=0)
    return ref, actor.remote(llm.rate_limit, llm.budget, spent)


def ledger_state(handle: Any) -> dict[str, Any]:
    """What the run spent, how often it paused, and why it stopped (None: it did not)."""
    return ray.get(handle.state.remote())  # type: ignore[no-any-return]


def stop_ledger(handle: Any) -> None:
    ray.kill(handle)
