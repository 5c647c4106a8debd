"""Exceptions raised by toolfactory.

    ToolfactoryError
    ├── ConfigError            invalid configuration; raised before any work starts
    │   └── PreflightFailed    the endpoint cannot serve what the config asks; names the field
    ├── TerminalError          retrying cannot help (bad input, unknown run)
    │   ├── RunNotFound
    │   ├── EndpointRefused    the endpoint refused one kind of request again and again
    │   ├── DriverGone         the process that submitted a shard died; the shard is not committed
    │   ├── BudgetExhausted    the run's LLM budget is spent; a re-run with a larger one finishes it
    │   ├── StartupFailed      a process the run starts for itself did not start in time (or exited)
    │   └── RunFailed          a run ended Failed (shards missing, a floor, a refusal): its summary
    └── TransientError         retrying may help (network, rate limits, a flaky endpoint)
        └── ShardIncomplete    records of a shard failed on transient LLM errors; re-run completes it

Record-level problems are not exceptions that escape a shard: they become
:class:`toolfactory.models.Rejected` records with a reason code. :class:`LLMFailure` is the
exception that carries such a reason code out of the LLM gateway to the stage that rejects.

Every exception of the project derives from :class:`ToolfactoryError`, which pickles whatever its
``__init__`` takes: a shard's error crosses from a Ray worker to the driver (and into Prefect's
state) with its class, message and attributes (reason, flags, metrics) intact. The errors of one
concern live beside it, under this tree (``RenderError`` in :mod:`toolfactory.render`, the
simulator's ``SimulatorError``, …); one that callers also catch as a Python exception derives
from that one too (``PlanError(ToolfactoryError, ValueError)``). The documentation's exception
reference (``docs/hooks/exception_reference.py``) draws the whole tree from the code, and the suite
fails on an exception class outside it (``tests/test_errors_pickle.py``).
"""

from __future__ import annotations

from typing import Any


def _restore(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    """An exception as it was pickled, without calling its ``__init__`` (whose parameters need not
    be its ``args``)."""
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class ToolfactoryError(Exception):
    """Base of every error toolfactory raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception's own reduction calls ``cls(*args)``, which fails (on unpickling, far from the
        # cause) for any subclass whose ``__init__`` takes other arguments than it passes on.
        return _restore, (type(self), self.args, self.__dict__)


class ConfigError(ToolfactoryError):
    """The configuration is invalid; the message names the field and what is allowed."""


class TerminalError(ToolfactoryError):
    """An error that a retry cannot fix."""


class RunNotFound(TerminalError):
    def __init__(self, run_id: str, root: str) -> None:
        super().__init__(f"no run {run_id!r} under {root} (no manifest.json)")
        self.run_id = run_id


class PreflightFailed(ConfigError):
    """A capability the run needs is not served by the endpoint (see :mod:`toolfactory.preflight`).

    The message names the config field to change; ``table`` is the check's table, printed above it.
    """

    def __init__(self, message: str, table: str = "") -> None:
        super().__init__(message, table)
        self.table = table

    def __str__(self) -> str:
        return str(self.args[0])


class EndpointRefused(TerminalError):
    """The endpoint answered one role's requests of one shape with the same kind of client error
    (400, 422, …) more often than ``llm.max_repeated_refusals``: every record would fail alike, so
    the stage stops instead of rejecting them all. Every argument goes to ``Exception.__init__``,
    so that it pickles across Ray."""

    def __init__(self, role: str, model: str, shape: str, status: int, message: str, count: int) -> None:
        super().__init__(role, model, shape, status, message, count)
        self.role, self.model, self.shape, self.status, self.endpoint_message, self.count = role, model, shape, status, message, count

    def __str__(self) -> str:
        return (
            f"llm.roles.{self.role} (model {self.model!r}): the endpoint refused {self.count} requests of the same "
            f"shape ({self.shape}) with {self.status}: {self.endpoint_message}"
        )


class DriverGone(TerminalError):
    """The driver that submitted a shard has ended (killed): its shard must not commit, since
    `rerun` owns the run now."""


class BudgetExhausted(TerminalError):
    """The run has spent its `llm.budget`: no new request may start.

    Not a record's fault, so it fails the shard (whose work a re-run with a larger budget redoes)
    instead of rejecting records. ``metrics`` holds what the attempt spent, for the stats.
    """

    metrics: dict[str, Any] | None = None


class RunFailed(TerminalError):
    """A run that ended `Failed`, as its flow's final state carries it: Prefect wants an exception
    (or nothing) as a failed state's data, and the CLI and the tests read the run's summary from it.
    The message is the one the operator reads (the shards, the first error, the re-run command)."""

    def __init__(self, message: str, summary: dict[str, Any]) -> None:
        super().__init__(message)
        self.summary = summary


class StartupFailed(TerminalError):
    """A process the run starts for itself (the temporary Prefect API, a local Ray, the offline
    simulator) did not start within its deadline, or exited while starting. Nothing it started is
    left running. The message is one line: the part, the time waited, and the setting to raise."""

    def __init__(self, message: str, part: str, setting: str) -> None:
        super().__init__(message, part, setting)
        self.part, self.setting = part, setting

    def __str__(self) -> str:
        return str(self.args[0])


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

    def __init__(self, reason: str, message: str, *, transient: bool, detail: str | None = None,
                 parameter: str | None = None) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.transient = transient
        self.detail = detail  # the endpoint's own words, when it refused the request
        self.parameter = parameter  # the request field it named as refused (`max_tokens`, `temperature`)


def retryable(exc: BaseException) -> bool:
    """Whether running the failed work again may succeed: a :class:`TransientError`, or an
    :class:`LLMFailure` whose cause was the endpoint (a stage that calls the gateway outside
    :func:`toolfactory.stages.records.map_records` lets it escape the shard as it is)."""
    return isinstance(exc, TransientError) or (isinstance(exc, LLMFailure) and exc.transient)
