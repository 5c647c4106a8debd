"""The run's shared rate limit and budget: the ledger on a fake clock, a worker's side of it in
asyncio, and the gateway against the simulator over real HTTP with a limit and a price."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Iterator

import pytest

from toolfactory.config import BudgetConfig, RateLimitConfig, load_config
from toolfactory.errors import BudgetExhausted, ConfigError
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.llm.cost import priced_usage, role_cost, total_cost
from toolfactory.llm.limits import Grant, Ledger, LocalPort, Report, SharedLimit, Spend
from toolfactory.simulator import SimulatorSettings, start_simulator


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ledger(rpm: float | None = None, tpm: float | None = None, tokens: int | None = None, usd: float | None = None,
           spent: Spend | None = None) -> tuple[Ledger, Clock]:
    clock = Clock()
    return Ledger(RateLimitConfig(requests_per_minute=rpm, tokens_per_minute=tpm), BudgetConfig(tokens=tokens, usd=usd),
                  spent, clock=clock), clock


NOTHING = Report()


# --- the ledger -------------------------------------------------------------------------------


def test_requests_per_minute_are_granted_at_their_rate_and_no_faster() -> None:
    book, clock = ledger(rpm=600)  # 10 a second, a second's worth banked, 2 per lease
    granted = [book.lease(64, NOTHING).permits for _ in range(5)]
    assert granted == [2, 2, 2, 2, 2]
    refused = book.lease(64, NOTHING)
    assert refused.permits == 0 and refused.retry_in == pytest.approx(0.1)
    clock.now += 0.5
    assert sum(book.lease(64, NOTHING).permits for _ in range(10)) == 5


def test_tokens_are_charged_after_the_answer_and_stop_requests_until_refilled() -> None:
    book, clock = ledger(tpm=600)  # 10 tokens a second
    assert book.lease(8, NOTHING).permits == 8
    refused = book.lease(8, Report(used=8, tokens=50))  # 10 banked - 50 spent: 40 in debt
    assert refused.permits == 0 and refused.retry_in == pytest.approx(4.1)
    clock.now += 4.1
    assert book.lease(8, NOTHING).permits == 8


def test_a_pause_refuses_every_lease_until_it_ends() -> None:
    book, clock = ledger(rpm=6000)
    book.pause(2.0)
    assert book.lease(4, NOTHING) == Grant(0, retry_in=pytest.approx(2.0))
    clock.now += 2.0
    assert book.lease(4, NOTHING).permits == 4
    assert book.state()["pauses"] == 1


def test_the_budget_stops_every_lease_once_spent_and_names_the_field() -> None:
    book, _ = ledger(tokens=100)
    assert book.lease(4, NOTHING).permits == 4
    assert book.lease(4, Report(used=1, tokens=60)).permits == 1  # 40 left: less than one more request on average
    stopped = book.lease(4, Report(used=1, tokens=50))
    assert stopped.permits == 0 and stopped.stop is not None
    assert "110 of llm.budget.tokens=100" in stopped.stop
    assert book.lease(0, NOTHING).stop == stopped.stop  # and stays stopped


def test_leases_near_the_budget_are_sized_by_the_mean_cost_of_a_request() -> None:
    book, _ = ledger(tokens=1000, spent=Spend(requests=10, tokens=100, usd=0.0))  # 10 tokens a request so far
    assert book.lease(200, NOTHING).permits == 90
    assert book.lease(200, NOTHING).permits == 1  # those 90 are out: one at a time, never none
    assert book.lease(200, Report(used=90, tokens=900)).stop is not None


def test_what_earlier_attempts_spent_counts_against_the_budget() -> None:
    book, _ = ledger(usd=0.5, spent=Spend(requests=40, tokens=9000, usd=0.5))
    assert "llm.budget.usd=0.5" in (book.lease(1, NOTHING).stop or "")


def test_a_money_budget_needs_a_price_for_every_role() -> None:
    with pytest.raises(ConfigError, match=r"llm.budget.usd needs a price .* user"):
        load_config(None, ["llm.budget.usd=5"], environ={})
    prices = [f"llm.roles.{role}.usd_per_million_prompt_tokens=1" for role in ("user", "assistant", "tool", "judge", "designer")]
    assert load_config(None, ["llm.budget.usd=5", *prices], environ={}).llm.budget.usd == 5


def test_cost_comes_from_the_role_prices_and_an_unpriced_role_is_unknown_not_free() -> None:
    llm = load_config(None, ["llm.roles.judge.usd_per_million_prompt_tokens=2",
                             "llm.roles.judge.usd_per_million_completion_tokens=8"], environ={}).llm
    assert role_cost(llm, "judge", 1_000_000, 500_000) == pytest.approx(6.0)
    assert role_cost(llm, "user", 10, 10) is None
    usage = {"judge": {"prompt_tokens": 1000, "completion_tokens": 100}, "user": {"prompt_tokens": 0, "completion_tokens": 0}}
    assert total_cost(priced_usage(llm, usage)) == pytest.approx(0.0028)
    usage["user"]["prompt_tokens"] = 5
    assert total_cost(priced_usage(llm, usage)) is None


# --- a worker's side: leases in batches -------------------------------------------------------


class CountingPort(LocalPort):
    def __init__(self, book: Ledger) -> None:
        super().__init__(book)
        self.leases = 0
        self.reports: list[Report] = []

    async def lease(self, want: int, report: Report) -> Grant:
        self.leases += 1
        self.reports.append(report)
        return await super().lease(want, report)


def llm_config(*overrides: str) -> Any:
    return load_config(None, list(overrides), environ={}).llm


def test_permits_are_leased_in_batches_of_the_workers_concurrency() -> None:
    book = Ledger(RateLimitConfig(requests_per_minute=1e9), BudgetConfig())
    port = CountingPort(book)
    limit = SharedLimit(port, llm_config("llm.max_concurrency=32"))

    async def go() -> None:
        for _ in range(100):
            await limit.acquire()
        await limit.aclose()

    asyncio.run(go())
    assert port.leases == 4 + 1  # ceil(100 / 32) leases, and the closing report
    assert book.state()["requests"] == 100


def test_a_spent_budget_raises_before_a_request_starts_and_every_answer_is_reported() -> None:
    book = Ledger(RateLimitConfig(), BudgetConfig(tokens=50))
    limit = SharedLimit(LocalPort(book), llm_config("llm.max_concurrency=1"))

    async def go() -> int:
        started = 0
        with pytest.raises(BudgetExhausted, match="llm.budget.tokens=50"):
            while True:
                await limit.acquire()
                started += 1
                limit.spent("user", 15, 5)
        await limit.aclose()
        return started

    assert asyncio.run(go()) == 3  # 20, 40, 60 tokens: the third crossed it, no fourth started
    assert book.state()["tokens"] == 60


# --- the gateway with a limit, over HTTP --------------------------------------------------------


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings()) as simulator:
        yield simulator


def test_the_gateway_sends_no_faster_than_the_limit_and_reports_cost(sim: Any) -> None:
    llm = llm_config("llm.rate_limit.requests_per_minute=240", "llm.roles.user.usd_per_million_prompt_tokens=1",
                     "llm.roles.user.usd_per_million_completion_tokens=4")
    book = Ledger(llm.rate_limit, llm.budget)

    async def go() -> float:
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), llm, limit=SharedLimit(LocalPort(book), llm)) as gateway:
            started = time.monotonic()
            await asyncio.gather(*(gateway.chat("user", [{"role": "user", "content": f"question {i}"}]) for i in range(8)))
            return time.monotonic() - started

    elapsed = asyncio.run(go())
    assert elapsed >= 0.9  # 4 a second, 4 banked: the last 4 wait a quarter of a second each
    state = book.state()
    assert state["requests"] == 8 and state["tokens"] > 0
    assert state["usd"] > 0


def test_a_rerun_may_change_the_rate_limit_and_the_budget() -> None:
    from toolfactory.run.operational import rerun_config

    snapshot = load_config(None, ["llm.budget.tokens=1000"], environ={}).snapshot()
    config = rerun_config(snapshot, ["llm.budget.tokens=5000", "llm.rate_limit.requests_per_minute=60"])
    assert config.llm.budget.tokens == 5000 and config.llm.rate_limit.requests_per_minute == 60


def test_cached_prompt_tokens_cost_the_cached_price_or_the_prompt_price_without_one() -> None:
    prices = ["llm.roles.judge.usd_per_million_prompt_tokens=2", "llm.roles.judge.usd_per_million_completion_tokens=8"]
    discounted = load_config(None, [*prices, "llm.roles.judge.usd_per_million_cached_prompt_tokens=1"], environ={}).llm
    assert role_cost(discounted, "judge", 1_000_000, 0, cached_prompt_tokens=600_000) == pytest.approx(0.8 + 0.6)
    assert role_cost(llm_config(*prices), "judge", 1_000_000, 0, cached_prompt_tokens=600_000) == pytest.approx(2.0)
    usage = {"judge": {"prompt_tokens": 1_000_000, "cached_prompt_tokens": 1_000_000, "completion_tokens": 0}}
    assert total_cost(priced_usage(discounted, usage)) == pytest.approx(1.0)
