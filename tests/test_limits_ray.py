"""One limit for the whole run, on a real local Ray: shard workers in separate processes share
the run's ledger actor, and a 429's Retry-After met by one of them stops the others too."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import pytest

from conftest import http
from toolfactory.config import load_config
from toolfactory.errors import LLMFailure
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.llm.limits import Spend
from toolfactory.simulator import SimulatorSettings, start_simulator

ray = pytest.importorskip("ray")
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module


def llm_config(*overrides: str) -> Any:
    base = ["llm.max_retries=0", "llm.timeout_s=10", "llm.max_concurrency=8"]
    return load_config(None, [*base, *overrides], environ={}).llm


def send(base_url: str, llm: Any, ledger: Any, tag: str, count: int, gap_s: float = 0.0, start_at: float = 0.0) -> list[float]:
    """A worker: `count` distinct requests one after another from `start_at` (wall clock); the
    wall-clock time each was answered."""

    async def go() -> list[float]:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        limit = ledger.connect(llm) if ledger is not None else None
        answered = []
        async with LLMGateway(Endpoint(base_url, "sk-test"), llm, limit=limit) as gateway:
            for i in range(count):
                try:
                    await gateway.chat("user", [{"role": "user", "content": f"{tag} question {i}"}])
                except LLMFailure:
                    pass  # the worker that meets the 429 (no retries here)
                answered.append(time.time())
                await asyncio.sleep(gap_s)
        return answered

    return asyncio.run(go())


worker = ray.remote(num_cpus=0)(send)


def warm_up_two_workers(base_url: str, llm: Any) -> None:
    """Start two worker processes (imports included) before anything is timed."""
    ray.get([worker.remote(base_url, llm, None, "warm", 0, 0.0, time.time() + 0.5) for _ in range(2)])


@pytest.fixture
def ledger(ray_cluster: None) -> Any:
    from toolfactory.llm.ray_ledger import start_ledger, stop_ledger

    handles = []

    def start(run_id: str, llm: Any) -> Any:
        ref, handle = start_ledger(run_id, llm, Spend())
        handles.append(handle)
        return ref, handle

    yield start
    for handle in handles:
        stop_ledger(handle)


def test_two_workers_share_one_requests_per_minute_limit(ledger: Any) -> None:
    from toolfactory.llm.ray_ledger import ledger_state

    llm = llm_config("llm.rate_limit.requests_per_minute=240")  # 4 a second, 4 banked
    ref, handle = ledger("two-workers", llm)
    with start_simulator(SimulatorSettings()) as sim:
        warm_up_two_workers(sim.base_url, llm)
        start_at = time.time() + 1.0  # both begin together
        answers = ray.get([worker.remote(sim.base_url, llm, ref, tag, 6, 0.0, start_at) for tag in ("a", "b")])
        elapsed = max(t for times in answers for t in times) - start_at
    # 12 requests at 4 a second after 4 banked: 2 s together; each worker alone would need 0.5 s.
    assert elapsed >= 1.7
    assert ledger_state(handle)["requests"] == 12


def test_a_retry_after_met_by_one_worker_pauses_every_worker(ledger: Any) -> None:
    from toolfactory.llm.ray_ledger import ledger_state

    llm = llm_config("llm.rate_limit.requests_per_minute=60000")  # never binding: only the pause slows anyone
    # Worker A's endpoint answers 429 with Retry-After 1.5 s; worker B's never does, so whatever
    # slows B comes from A's 429 through the shared ledger.
    with start_simulator(SimulatorSettings(rate_429=1.0, retry_after_s=1.5)) as limited, start_simulator(SimulatorSettings()) as free:

        def largest_gap(shared: Any) -> tuple[float, float]:  # shared=None: each worker on its own
            """B's longest stillness, and when it began relative to A's 429."""
            http.post(f"{free.root_url}/simulator/reset").raise_for_status()
            b = worker.remote(free.base_url, llm, shared, "b", 30, 0.1)  # ~3 s of steady requests
            while http.get(f"{free.root_url}/simulator/stats").json()["chat_requests"] < 5:
                time.sleep(0.05)  # B is under way
            [met_429] = ray.get(worker.remote(limited.base_url, llm, shared, "a", 1))
            answered = ray.get(b)
            gap, began = max((later - earlier, earlier) for earlier, later in zip(answered, answered[1:]))
            return gap, began - met_429

        warm_up_two_workers(free.base_url, llm)
        ref, handle = ledger("pause", llm)
        gap, when = largest_gap(ref)
    assert ledger_state(handle)["pauses"] == 1
    # B (10 requests a second) stood still for most of the 1.5 s, from about when A met its 429;
    # without the shared ledger its gaps stay near 0.1 s.
    assert gap >= 1.0 and abs(when) <= 1.0
