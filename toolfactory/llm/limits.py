"""One rate limit and one budget for a whole run, shared by every shard worker.

Shards run in separate Ray worker processes, each with its own gateway, so a limit kept in one
gateway would let every worker send its own quota. The run keeps one :class:`Ledger` instead —
the request and token buckets, the pause a 429's ``Retry-After`` asks for, and what the run has
spent — and every gateway holds a :class:`SharedLimit`, its side of that ledger.

The ledger lives in one named Ray actor per run (:mod:`toolfactory.llm.ray_ledger`): Ray is
already where every shard runs (locally or on a cluster), the actor lives exactly as long as the
run, its methods run one at a time (no locks), and a call costs well under a millisecond.
Prefect's global concurrency limits were the other candidate; they were not taken because each
acquisition is an HTTP round trip to the Prefect API (whose server then carries the load of
every request the run sends), a limit is a server-wide object rather than one per run, and they
cannot charge tokens known only after the answer or pause everyone for a ``Retry-After``.

Per request the gateway pays almost nothing: permits are *leased in batches* (up to the
worker's concurrency) and taken locally; the worker reports what it used and spent with its
next lease. No ledger at all exists when neither a limit nor a budget is set, and the gateway
then skips this module entirely. Leased permits are valid for :data:`LEASE_S` only, so a pause
set by one worker reaches every other one within that time.

Tokens are known only from an answer's usage, so the token bucket is charged after the answer
and may be overdrawn; no request starts while it is. Token-bucket libraries (aiolimiter,
limits, pyrate-limiter) were considered: they block the caller until capacity is free, grant
all or nothing, or refuse a charge past the limit, whereas the ledger must answer a lease at
once with "n permits" or "ask again in s seconds" and accept charges after the fact — which is
the few lines of :class:`TokenBucket`.

The budget (`llm.budget`) is checked at every lease: once the run's spend (seeded with what
earlier attempts of the run spent, so re-runs count) reaches it, every lease answers with the
reason and the gateway raises :class:`BudgetExhausted` before starting a request. Near the
end, leases are sized by the mean cost of a request so far, so that the run overshoots by at
most the requests already in flight.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from toolfactory.config import BudgetConfig, LLMConfig, RateLimitConfig
from toolfactory.errors import BudgetExhausted
from toolfactory.llm.cost import role_cost

LEASE_S = 0.25  # leased permits not used within this time are dropped: a pause reaches all workers this fast
SHARE_OF_SECOND = 0.2  # one lease takes at most this share of a second's requests, so workers share a binding limit
BURST_S = 1.0  # a bucket banks at most one second of its rate: a whole minute's quota at once would meet 429s


@dataclass
class Spend:
    """What requests have cost: answered requests, their tokens, their price."""

    requests: int = 0
    tokens: int = 0
    usd: float = 0.0


@dataclass(frozen=True)
class Report:
    """What a worker did with its permits since its last lease."""

    used: int = 0  # requests started
    dropped: int = 0  # permits that expired unused
    tokens: int = 0
    usd: float = 0.0


@dataclass(frozen=True)
class Grant:
    """A lease's answer: permits to use now, or how long to wait, or why the run must stop."""

    permits: int
    retry_in: float = 0.0
    stop: str | None = None


class TokenBucket:
    """`per_minute` units, refilled continuously, at most :data:`BURST_S` of them banked.

    It may be overdrawn by :meth:`charge` (tokens counted after the answer); it then holds
    nothing until the debt is refilled."""

    def __init__(self, per_minute: float, clock: Callable[[], float]) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * BURST_S)
        self._clock = clock
        self._level = self.capacity
        self._stamp = clock()

    def level(self) -> float:
        now = self._clock()
        self._level = min(self.capacity, self._level + (now - self._stamp) * self.rate)
        self._stamp = now
        return self._level

    def charge(self, units: float) -> None:
        self.level()
        self._level -= units

    def wait_for(self, units: float) -> float:
        """Seconds until the bucket holds `units`."""
        return max(0.0, (units - self.level()) / self.rate)


class Ledger:
    """The run's one authority on permits, pauses and spend. Its methods never wait."""

    def __init__(self, rate_limit: RateLimitConfig, budget: BudgetConfig, spent: Spend | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._requests = TokenBucket(rate_limit.requests_per_minute, clock) if rate_limit.requests_per_minute else None
        self._tokens = TokenBucket(rate_limit.tokens_per_minute, clock) if rate_limit.tokens_per_minute else None
        self._budget = budget
        self.spent = spent or Spend()
        self._outstanding = 0  # permits granted and not yet reported used or dropped
        self._paused_until = 0.0
        self.pauses = 0
        self.leases = 0  # calls, not permits: what leasing in batches saves shows here

    def lease(self, want: int, report: Report) -> Grant:
        """Record `report`, then grant up to `want` permits (0 with a wait, or with the reason to stop)."""
        self.leases += 1
        self._record(report)
        stop = self.exhausted()
        if stop is not None:
            return Grant(0, stop=stop)
        if want <= 0:
            return Grant(0)
        now = self._clock()
        if now < self._paused_until:
            return Grant(0, retry_in=self._paused_until - now)
        if self._tokens is not None and self._tokens.level() <= 0:
            return Grant(0, retry_in=self._tokens.wait_for(1.0))
        granted = min(want, self._affordable())
        if self._requests is not None:
            available = int(self._requests.level())
            if available < 1:
                return Grant(0, retry_in=self._requests.wait_for(1.0))
            granted = min(granted, available, max(1, int(self._requests.rate * SHARE_OF_SECOND)))
            self._requests.charge(granted)
        self._outstanding += granted
        return Grant(granted)

    def pause(self, seconds: float) -> None:
        """Start no request for `seconds` (an endpoint's ``Retry-After``), whoever asks."""
        self._paused_until = max(self._paused_until, self._clock() + seconds)
        self.pauses += 1

    def exhausted(self) -> str | None:
        """Why the budget stops the run, or None while it does not."""
        spent, budget = self.spent, self._budget
        if budget.tokens is not None and spent.tokens >= budget.tokens:
            return f"the run's LLM budget is spent: {spent.tokens:,} of llm.budget.tokens={budget.tokens:,} tokens"
        if budget.usd is not None and spent.usd >= budget.usd:
            return f"the run's LLM budget is spent: ${spent.usd:,.4f} of llm.budget.usd={budget.usd:g}"
        return None

    def state(self) -> dict[str, Any]:
        return {"requests": self.spent.requests, "tokens": self.spent.tokens, "usd": round(self.spent.usd, 6),
                "pauses": self.pauses, "leases": self.leases, "exhausted": self.exhausted()}

    def _record(self, report: Report) -> None:
        self.spent.requests += report.used
        self.spent.tokens += report.tokens
        self.spent.usd += report.usd
        self._outstanding = max(0, self._outstanding - report.used - report.dropped)
        if self._tokens is not None and report.tokens:
            self._tokens.charge(report.tokens)

    def _affordable(self) -> int:
        """Permits whose expected cost (the mean per request so far) fits the budget left,
        less those already out; at least one, so no worker ever waits on another's lease."""
        if not self.spent.requests:
            return 1 << 30
        left = math.inf
        for limit, spent in ((self._budget.tokens, self.spent.tokens), (self._budget.usd, self.spent.usd)):
            if limit is not None and spent > 0:
                left = min(left, (limit - spent) / (spent / self.spent.requests))
        if left == math.inf:
            return 1 << 30
        return max(1, int(left) - self._outstanding)


class LedgerPort(Protocol):
    """How a worker reaches the ledger (in process, or a Ray actor)."""

    async def lease(self, want: int, report: Report) -> Grant: ...

    async def pause(self, seconds: float) -> None: ...


class LocalPort:
    """A ledger in this process: for a single-process client (the CLI's tools, tests)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def lease(self, want: int, report: Report) -> Grant:
        return self.ledger.lease(want, report)

    async def pause(self, seconds: float) -> None:
        self.ledger.pause(seconds)


class SharedLimit:
    """One gateway's side of the run's ledger: permits leased in batches and taken locally."""

    def __init__(self, port: LedgerPort, llm: LLMConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.port = port
        self.llm = llm
        self._clock = clock
        self._permits = 0
        self._expires = 0.0
        self._used = self._dropped = self._tokens = 0  # since the last report
        self._usd = 0.0
        self._stop: str | None = None
        self._lock = asyncio.Lock()
        self._pending: set[asyncio.Task[None]] = set()  # pauses on their way to the ledger

    async def acquire(self) -> None:
        """Wait for a permit to start one request; :class:`BudgetExhausted` once the budget is spent."""
        while not self._take():
            async with self._lock:  # one lease at a time; the others wait for its permits
                if self._take():
                    return
                await self._lease()

    def spent(self, role: str, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0) -> None:
        """Count an answered request's usage; reported with the next lease. A token budget counts
        every token (cached ones too, as a tokens-per-minute limit does); the money budget bills
        the cached ones at the role's cached price."""
        self._tokens += prompt_tokens + completion_tokens
        self._usd += role_cost(self.llm, role, prompt_tokens, completion_tokens, cached_prompt_tokens) or 0.0

    def pause(self, seconds: float) -> None:
        """The endpoint asked to wait `seconds`: stop here at once, and tell every worker."""
        self._dropped += self._permits
        self._permits = 0
        task = asyncio.get_running_loop().create_task(self.port.pause(seconds))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def aclose(self) -> None:
        """Report what is left (the run's spend must count every answer)."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        self._dropped += self._permits
        self._permits = 0
        await self.port.lease(0, self._report())

    def _take(self) -> bool:
        if self._permits and self._clock() < self._expires:
            self._permits -= 1
            self._used += 1
            return True
        return False

    def _report(self) -> Report:
        report = Report(self._used, self._dropped, self._tokens, self._usd)
        self._used = self._dropped = self._tokens = 0
        self._usd = 0.0
        return report

    async def _lease(self) -> None:
        if self._stop is not None:
            raise BudgetExhausted(self._stop)
        self._dropped += self._permits  # expired
        self._permits = 0
        grant = await self.port.lease(self.llm.max_concurrency, self._report())
        if grant.stop is not None:
            self._stop = grant.stop
            raise BudgetExhausted(grant.stop)
        if grant.permits:
            self._permits, self._expires = grant.permits, self._clock() + LEASE_S
        else:
            await asyncio.sleep(grant.retry_in)
