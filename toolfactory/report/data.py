"""The numbers of a run's report.

Two sources, read once each: the stats database (per-stage funnel, verify layers, rejection
reasons, profiles, LLM use per stage and per role) and the run's accepted dialogues, streamed
shard by shard from ``runs/<run_id>/verify/part-*.parquet`` into counters, so that memory depends
on the size of a shard and of the tool pool, never on the number of records.

Records are read as the JSON objects they are stored as, not as :class:`toolfactory.models.Dialogue`:
a curation stage may add fields (``complexity``, ``cluster``) that the model does not declare, and
the report shows them when they are there.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from toolfactory.errors import TerminalError
from toolfactory.storage.shards import dataset_parts, read_records
from toolfactory.stages import DATASET_STAGE
from toolfactory.stages import STAGE_NAMES
from toolfactory.run.stats import StatsDB
from toolfactory.run.summary import RunSummary, StageSummary
from toolfactory.storage import ObjectStore



class ReportError(TerminalError):
    """A report cannot be built: the run has no stats (unknown run, or another stats file)."""


@dataclass(frozen=True)
class Usage:
    """LLM use: requests the endpoint answered (and their tokens), requests the cache answered."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # of the prompt tokens, those the endpoint's prompt cache served

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def any(self) -> bool:
        return bool(self.calls or self.cache_hits or self.tokens)


@dataclass(frozen=True)
class Layer:
    """A check layer within a stage (verify: rules, then model): records in and passed."""

    name: str
    items_in: int
    passed: int

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.items_in if self.items_in else None


@dataclass(frozen=True)
class StageNumbers:
    """One stage of a run, summed over its shards (from its :class:`~toolfactory.run.summary.StageSummary`)."""

    stage: str
    shards_total: int
    shards_completed: int
    shards_failed: int
    items_in: int
    items_out: int
    rejected: int
    pass_rate: float | None  # accepted over judged (out + rejected)
    rejections: dict[str, int]  # reason -> records, most frequent first
    layers: tuple[Layer, ...]
    profile: dict[str, dict[str, int]]  # dimension -> value -> count (`*_uses`: {distinct, total})
    usage: Usage
    failed: tuple[tuple[int, str, str], ...] = ()  # (shard, status, error) of shards not completed


@dataclass(frozen=True)
class RunStats:
    run_id: str
    status: str | None
    started_at: str | None
    finished_at: str | None
    stages: tuple[StageNumbers, ...]
    usage_by_role: dict[str, Usage]
    # recipe -> (its records in the dataset, LLM requests its records took: dialogues and judges)
    calls_by_recipe: dict[str, tuple[int, int]] = field(default_factory=dict)

    def stage(self, name: str) -> StageNumbers | None:
        return next((s for s in self.stages if s.stage == name), None)

    @property
    def accepted(self) -> int:
        """Records in the run's dataset: the curate stage's output (verify's for older runs)."""
        final = self.stage(DATASET_STAGE) or self.stage("verify")
        return final.items_out if final else 0

    @property
    def usage(self) -> Usage:
        return _sum_usage(s.usage for s in self.stages)

    def profile(self, stage: str, dimension: str) -> dict[str, int]:
        numbers = self.stage(stage)
        return dict(numbers.profile.get(dimension, {})) if numbers else {}


def _sum_usage(items: Iterable[Usage]) -> Usage:
    calls = hits = prompt = completion = cached = 0
    for u in items:
        calls, hits = calls + u.calls, hits + u.cache_hits
        prompt, completion = prompt + u.prompt_tokens, completion + u.completion_tokens
        cached += u.cached_prompt_tokens
    return Usage(calls, hits, prompt, completion, cached)


def load_run_stats(stats_path: str | Path, run_id: str) -> RunStats:
    """The run's numbers from the stats database; :class:`ReportError` if it has none."""
    path = Path(stats_path)
    if not path.is_file():
        raise ReportError(f"no stats database at {path}: a report of run {run_id!r} needs its stats")
    db = StatsDB(path)
    summary = db.run_summary(run_id, STAGE_NAMES)
    if summary.status is None and not summary.stages:
        raise ReportError(f"run {run_id!r} is not in the stats database {path}")
    return run_stats(summary, {
        role: Usage(calls, hits, prompt, completion, cached) for role, calls, hits, prompt, completion, cached in db.usage_by_role(run_id)
    })


def run_stats(summary: RunSummary, usage_by_role: dict[str, Usage]) -> RunStats:
    """The report's numbers of a run from its summary; :class:`ReportError` if the stats do not
    know the run. `usage_by_role` is every attempt's use, completed or not, as the per-stage
    totals count it."""
    if summary.status is None and not summary.stages:
        raise ReportError(f"run {summary.run_id!r} is not in the stats database")
    return RunStats(
        run_id=summary.run_id,
        status=summary.status,
        started_at=summary.started_at,
        finished_at=summary.finished_at,
        stages=tuple(_stage(item) for item in summary.stages),
        usage_by_role=usage_by_role,
        calls_by_recipe={recipe: (v.accepted, v.llm_calls) for recipe, v in summary.per_accepted.by_recipe.items()},
    )


def _stage(item: StageSummary) -> StageNumbers:
    return StageNumbers(
        stage=item.stage,
        shards_total=item.shards_total,
        shards_completed=item.shards_completed,
        shards_failed=item.shards_failed,
        items_in=item.items_in,
        items_out=item.items_out,
        rejected=item.rejected,
        pass_rate=item.pass_rate,
        rejections=dict(item.rejections),
        layers=tuple(Layer(name, v.items_in, v.passed) for name, v in item.layers.items()),
        profile=item.profile,
        usage=Usage(item.llm_calls, item.cache_hits, item.prompt_tokens, item.completion_tokens, item.cached_prompt_tokens),
        failed=tuple((f.shard, f.status, f.error or "") for f in item.failed_shards),
    )


@dataclass
class DialogueMix:
    """What the accepted dialogues are made of, counted record by record."""

    shards: int = 0
    records: int = 0
    llm_calls: int = 0  # the dialogues' own `llm_calls`, summed
    modes: Counter[str] = field(default_factory=Counter)
    recipes: Counter[str] = field(default_factory=Counter)
    scenarios: Counter[str] = field(default_factory=Counter)
    # (target mode, shown mode) of the records whose task asked for a mode
    target_vs_shown: Counter[tuple[str, str]] = field(default_factory=Counter)
    complexity: Counter[float] = field(default_factory=Counter)  # value -> records
    complexity_unreadable: int = 0  # records whose `complexity` is not a number
    clusters: Counter[str] = field(default_factory=Counter)  # cluster -> records in it
    with_cluster: int = 0  # records that name their cluster(s)
    source_tools: set[str] = field(default_factory=set)  # bounded by the pool, not the records
    samples: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (recipe, mode) -> its first record

    def add(self, record: dict[str, Any]) -> None:
        self.records += 1
        self.samples.setdefault((str(record.get("recipe", "toolalpaca")), str(record.get("mode", "single"))), record)
        self.llm_calls += _int(record.get("llm_calls"))
        self.modes[str(record.get("mode", "single"))] += 1
        self.recipes[str(record.get("recipe", "toolalpaca"))] += 1
        self.scenarios[str(record.get("scenario", "single_tool"))] += 1
        if record.get("target_mode") is not None:
            self.target_vs_shown[(str(record["target_mode"]), str(record.get("mode", "single")))] += 1
        curated = record.get("curation") or {}  # the curate stage's scores, else top-level fields
        if curated.get("complexity") is not None or record.get("complexity") is not None:
            value = curated.get("complexity", record.get("complexity"))
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.complexity[round(float(value), 3)] += 1
            else:
                self.complexity_unreadable += 1
        if curated.get("clusters") or record.get("cluster") is not None:
            self.with_cluster += 1
            value = curated.get("clusters") or record["cluster"]
            # a record that uses APIs of several clusters counts once in each of them
            labels = {_cluster_label(v) for v in value} if isinstance(value, (list, tuple)) else {_cluster_label(value)}
            self.clusters.update(labels)
        for tool in record.get("source_tools") or []:
            if isinstance(tool, dict) and tool.get("id"):
                self.source_tools.add(str(tool["id"]))

    @property
    def with_complexity(self) -> int:
        return sum(self.complexity.values()) + self.complexity_unreadable

    @property
    def with_target(self) -> int:
        return sum(self.target_vs_shown.values())


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _cluster_label(value: Any) -> str:
    """A cluster as a label: itself, or the `label`/`name`/`id` of a cluster object."""
    if isinstance(value, dict):
        for key in ("label", "name", "id"):
            if value.get(key) is not None:
                return str(value[key])
    return str(value)


def accepted_shards(store: ObjectStore, run_id: str) -> list[str]:
    """The parts of the run's dataset, in shard order (see :func:`toolfactory.storage.shards.dataset_parts`)."""
    return dataset_parts(store, run_id)


def scan_dialogues(store: ObjectStore, run_id: str) -> DialogueMix:
    """Count the run's accepted dialogues, one shard in memory at a time."""
    mix = DialogueMix()
    for path in accepted_shards(store, run_id):
        for record in read_records(store, path):
            mix.add(record)
        mix.shards += 1
    return mix
