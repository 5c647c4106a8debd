"""Exceptions raised by toolfactory.

    ToolfactoryError
    ├── ConfigError            invalid configuration; raised before any work starts
    ├── TerminalError          retrying cannot help (bad input, unknown run)
    │   ├── RunNotFound
    │   └── BudgetExhausted   the run's LLM budget is spent; a re-run with a larger one finishes it
    └── TransientError         retrying may help (network, rate limits, a flaky endpoint)
        └── ShardIncomplete    records of a shard failed on transient LLM errors; re-run completes it

Record-level problems are not exceptions that escape a shard: they become
:class:`toolfactory.models.Rejected` records with a reason code. :class:`LLMFailure` is the
exception that carries such a reason code out of the LLM gateway to the stage that rejects.
"""

from __future__ import annotations

from typing import Any


class ToolfactoryError(Exception):
    """Base of every error toolfactory raises on purpose."""


class ConfigError(ToolfactoryError):
    """The configuration is invalid; the message names the field and what is allowed."""


class TerminalError(ToolfactoryError):
    """An error that a retry cannot fix."""


class RunNotFound(TerminalError):
    def __init__(self, run_id: str, root: str) -> None:
        super().__init__(f"no run {run_id!r} under {root} (no manifest.json)")
        self.run_id = run_id


class BudgetExhausted(TerminalError):
    """The run has spent its `llm.budget`: no new request may start.

    Not a record's fault, so it fails the shard (whose work a re-run with a larger budget redoes)
    instead of rejecting records. ``metrics`` holds what the attempt spent, for the stats.
    """

    metrics: dict[str, Any] | None = None


class TransientError(ToolfactoryError):
    """An error that a retry may fix; shard tasks retry these."""


class ShardIncomplete(TransientError):
    """Some records of a shard failed on transient LLM errors.

    Their answers obtained so far are cached, so a retry or a re-run pays only for the rest.
    ``metrics`` holds what the attempt spent, so that the run's accounting includes it.
    """

    metrics: dict[str, Any] | None = None


class LLMFailure(ToolfactoryError):
    """An LLM request that did not give a usable answer, with a stable reason code.

    ``transient`` tells whether the cause was the endpoint (rate limit, 5xx, timeout, connection)
    rather than the answer itself (malformed JSON, schema mismatch after re-asks).
    """

    def __init__(self, reason: str, message: str, *, transient: bool) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.transient = transient
