"""A run's summary: per-stage pass rates, rejections, shard status and LLM use, as the stats sum them.

The stats database builds it (:mod:`toolfactory.run.stats.queries`); the end of a run, `toolfactory
stats`, the run's floors and failure message, its Prefect artifacts and its report read it. Every
reader reads attributes, so a field a reader needs and the summary lacks is an error where the
reader is written, not a missing key at the end of a night's run.

At the edges it is the JSON object it always was: `toolfactory stats --json` prints
:meth:`RunSummary.to_dict`, and a run's flow returns it as its Prefect result (scripts read it
with :func:`flows.execute.summary_of`); :meth:`RunSummary.from_dict` reads it back.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from toolfactory.stages.base import CALLS_BY_RECIPE, RECIPES


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)


class LayerCount(_Part):
    """A check layer within a stage (verify: rules, then execution, then model)."""

    # "in" in the JSON object (a Python keyword, so not the attribute's name)
    items_in: int = Field(validation_alias=AliasChoices("in", "items_in"), serialization_alias="in")
    passed: int
    pass_rate: float | None = None


class FailedShard(_Part):
    """A shard that did not complete: `failed`, or `blocked` by a missing input."""

    shard: int
    status: str
    error: str | None = None


class StageSummary(_Part):
    """One stage of a run, summed over its shards; LLM use over every attempt, failed ones too."""

    stage: str
    shards_total: int = 0
    shards_completed: int = 0
    shards_failed: int = 0  # failed or blocked
    items_in: int = 0
    items_out: int = 0
    rejected: int = 0
    llm_calls: int = 0  # requests the endpoint answered
    cache_hits: int = 0  # requests the run's request cache answered
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float | None = 0.0  # None: an attempt's cost is unknown (a role without a price)
    wall_s: float = 0.0  # summed over shards
    pass_rate: float | None = None  # accepted over judged (out + rejected); None: nothing judged
    rejections: dict[str, int] = Field(default_factory=dict)  # reason -> records, most frequent first
    layers: dict[str, LayerCount] = Field(default_factory=dict)
    # dimension -> value -> count; a `*_uses` dimension is {"distinct": n, "total": n}
    profile: dict[str, dict[str, int]] = Field(default_factory=dict)
    missing_inputs: tuple[str, ...] = ()  # inputs a fan-in shard proceeded without, not read since
    failed_shards: tuple[FailedShard, ...] = ()

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class StageCost(_Part):
    """A stage's LLM calls and tokens per record of the dataset."""

    llm_calls: float | None = None
    tokens: float | None = None


class RecipeCost(_Part):
    """The LLM requests the stages made for one recipe's records, and that recipe's records kept."""

    accepted: int
    llm_calls: int
    llm_calls_per_accepted: float | None = None


class PerAccepted(_Part):
    """What one record of the dataset cost, in LLM calls and tokens (see :func:`per_accepted`)."""

    accepted: int = 0
    llm_calls: float | None = None
    tokens: float | None = None
    by_stage: dict[str, StageCost] = Field(default_factory=dict)
    by_recipe: dict[str, RecipeCost] = Field(default_factory=dict)


class RoleCost(_Part):
    """One role's LLM use over the run and its cost (None: the role used tokens and has no price)."""

    calls: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class LastAttempt(_Part):
    """The latest execution of a run (the first, or its latest re-run)."""

    started_at: str | None = None
    wall_s: float | None = None


class RunSummary(_Part):
    """A run as its stats sum it: its status, its stages in run order and what it cost.

    `started_at` and `wall_s` span every execution of the run (the first and each re-run:
    `attempts`); `reason` says why a run failed when it is not (only) a missing shard, `message`
    what its end showed. `rerun` is the command that finishes a run with shards not committed,
    set by the execution that ends it. `status` None: the stats do not know the run."""

    run_id: str
    status: str | None = None
    per_accepted: PerAccepted = Field(default_factory=PerAccepted)
    started_at: str | None = None
    finished_at: str | None = None
    wall_s: float | None = None
    attempts: int | None = None
    last_attempt: LastAttempt | None = None
    reason: str | None = None
    message: str | None = None
    made_by: str | None = None
    simulated: bool | None = None
    cost_usd: float | None = None
    cost_by_role: dict[str, RoleCost] = Field(default_factory=dict)
    stages: tuple[StageSummary, ...] = ()
    rerun: str | None = None

    def stage(self, name: str) -> StageSummary | None:
        """The stage called `name`; None when the run has no shard of it."""
        return next((s for s in self.stages if s.stage == name), None)

    def ended(self, rerun: str, message: str) -> RunSummary:
        """This summary with the command that finishes the run and the message its end shows."""
        return self.model_copy(update={"rerun": rerun, "message": message})

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of `toolfactory stats --json` and of a run flow's result (`rerun` only
        when there is one, as before it was typed)."""
        data = self.model_dump(mode="json", by_alias=True)
        if data["rerun"] is None:
            del data["rerun"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSummary:
        """A summary from its JSON object (:meth:`to_dict`); keys it does not know (`problems`,
        `damaged` of `stats --json`) are left out."""
        return cls.model_validate(data)


def per_accepted(stages: tuple[StageSummary, ...]) -> PerAccepted:
    """LLM calls and tokens per dialogue of the dataset, per stage and per recipe.

    `stages` are a run's stages in run order; the last one's output is the dataset (so a stage
    that spends calls on records later stages reject has them charged to the kept ones: the cost
    of a kept record). Per recipe, the calls the stages attribute to the records of that recipe
    (:data:`~toolfactory.stages.base.CALLS_BY_RECIPE`) over the recipe's records in the dataset."""
    if not stages:
        return PerAccepted()
    accepted = stages[-1].items_out

    def ratio(n: float) -> float | None:
        return round(n / accepted, 2) if accepted else None

    by_stage = {s.stage: StageCost(llm_calls=ratio(s.llm_calls), tokens=ratio(s.tokens))
                for s in stages if s.llm_calls or s.tokens}
    kept = stages[-1].profile.get(RECIPES, {})
    calls: dict[str, int] = {}
    for s in stages:
        for recipe, n in s.profile.get(CALLS_BY_RECIPE, {}).items():
            calls[recipe] = calls.get(recipe, 0) + int(n)
    by_recipe = {
        recipe: RecipeCost(accepted=int(kept.get(recipe, 0)), llm_calls=n,
                           llm_calls_per_accepted=round(n / kept[recipe], 2) if kept.get(recipe) else None)
        for recipe, n in sorted(calls.items())
    }
    return PerAccepted(accepted=accepted, llm_calls=ratio(sum(s.llm_calls for s in stages)),
                       tokens=ratio(sum(s.tokens for s in stages)), by_stage=by_stage, by_recipe=by_recipe)


__all__ = ["FailedShard", "LastAttempt", "LayerCount", "PerAccepted", "RecipeCost", "RoleCost", "RunSummary",
           "StageCost", "StageSummary", "per_accepted"]
