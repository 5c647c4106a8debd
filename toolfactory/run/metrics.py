"""What one attempt at a shard reports: its LLM use and, once the shard commits, its metrics.

docs/architecture.md §4, rule 6. A worker builds a :class:`ShardMetrics` when its shard commits
and returns it to the flow, which records it in the stats (:mod:`toolfactory.run.stats`) and
shows it in the stage's progress; the same object, as JSON, is the shard's metrics sidecar
(``<stage>/_metrics/part-NNNNN.json``), from which the stats of any machine are rebuilt. An
attempt still running (or killed) keeps an :class:`AttemptUsage` in its usage file
(:mod:`toolfactory.run.attempts`).

The files stay as they were: :meth:`ShardMetrics.to_dict` writes back exactly the fields that were
given (an optional one left out stays out), and :meth:`~ShardMetrics.from_dict` reads sidecars
written before a field existed (their `inputs`, say), with that field's default.
"""

from __future__ import annotations

import logging
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from toolfactory.storage import ObjectStore
from toolfactory.storage.shards import METRICS_UNREADABLE, ShardPaths, read_metrics

log = logging.getLogger(__name__)


class _Contract(BaseModel):
    """A record passed between processes and stored as JSON: immutable, and written back with
    the fields it was given only (see :meth:`to_dict`)."""

    model_config = ConfigDict(frozen=True)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object a file holds: the fields given, no default filled in."""
        return self.model_dump(mode="json", exclude_unset=True)


class LLMTotals(_Contract):
    """An attempt's LLM use over every role (:meth:`toolfactory.llm.usage.UsageMeter.totals`)."""

    calls: int = 0  # requests the endpoint answered
    cache_hits: int = 0  # requests the run's request cache answered
    retries: int = 0
    reasks: int = 0  # answers asked again because they did not fit their schema
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # of the prompt tokens, those the endpoint's prompt cache served
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float | None = None  # None: a role that used tokens has no price


class RoleUsage(_Contract):
    """One role's LLM use in an attempt (:meth:`toolfactory.llm.usage.UsageMeter.to_dict`, priced)."""

    model_config = ConfigDict(frozen=True, extra="allow")  # what a newer meter adds is kept

    calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    reasks: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    failures: dict[str, int] = Field(default_factory=dict)  # reason code -> requests
    served_by: dict[str, int] = Field(default_factory=dict)  # "model (fingerprint)" -> answers
    cost_usd: float | None = None


class AttemptFacts(_Contract):
    """Who an attempt was and what its LLM use was: what every attempt reports, finished or not."""

    attempt_id: str
    run_id: str
    stage: str
    shard: int
    started_at: str | None = None  # ISO time (UTC); None: its usage file could not be read
    finished_at: str | None = None
    llm: LLMTotals = Field(default_factory=LLMTotals)
    llm_by_role: dict[str, RoleUsage] = Field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """The record a file (or an older version of this program) wrote; a ValueError (pydantic's
        ValidationError) names the field that does not fit."""
        return cls.model_validate(data)


class AttemptUsage(AttemptFacts):
    """An attempt's usage file: its LLM use so far, and how it ended (`running` while it runs)."""

    outcome: str


class ShardMetrics(AttemptFacts):
    """A shard's metrics, as its committing attempt reports them.

    `fingerprint` identifies the shard's input (:meth:`ShardSpec.fingerprint`); `inputs` are the
    files it read (None in sidecars written before they were recorded: its planned inputs) and
    `missing_inputs` those a fan-in shard proceeded without (:mod:`toolfactory.run.fan_in`).
    `attempts` is added by the task that ran it (how often it ran), `node` names the Ray node."""

    started_at: str
    finished_at: str
    fingerprint: str = ""
    wall_s: float = 0.0
    node: str | None = None
    inputs: tuple[str, ...] | None = None
    missing_inputs: tuple[str, ...] = ()
    items_in: int = 0
    items_out: int = 0
    rejected: int = 0
    rejections: dict[str, int] = Field(default_factory=dict)  # reason code -> records
    layers: dict[str, tuple[int, int]] = Field(default_factory=dict)  # layer -> (records in, passed)
    profile: dict[str, dict[str, int]] = Field(default_factory=dict)  # dimension -> value -> count
    attempts: int | None = None

    def with_attempts(self, attempts: int) -> ShardMetrics:
        """These metrics with how often the shard's task ran."""
        return self.model_copy(update={"attempts": attempts})


def stored_metrics(store: ObjectStore, paths: ShardPaths) -> ShardMetrics | None:
    """A shard's metrics sidecar; None when there is none or it cannot be read (not JSON, or a
    field that does not fit) — then the shard is not done, and running it again writes it anew."""
    data = read_metrics(store, paths)
    if data is None:
        return None
    try:
        return ShardMetrics.from_dict(data)
    except ValueError as exc:
        log.warning("%s: %s: %s", METRICS_UNREADABLE, store.uri(paths.metrics), " ".join(str(exc).split())[:300])
        return None


__all__ = ["AttemptFacts", "AttemptUsage", "LLMTotals", "RoleUsage", "ShardMetrics", "stored_metrics"]
