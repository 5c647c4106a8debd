"""What the run report says about a run beyond its own stage numbers: the config and models it
ran with (from its manifest), whether its LLM was the offline simulator, its time and token cost
per stage, the exports written next to it, the runs before it in the same storage root, and for
a failed run the command that finishes it.

Read once when the report is built; every part is optional, since a run may have no manifest
(stats of imported data), no exports (a failed run) and no predecessors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from toolfactory.errors import RunNotFound
from toolfactory.llm.identity import EndpointIdentity
from toolfactory.run.manifest import load_manifest
from toolfactory.run.outcome import rerun_command
from toolfactory.stages import DATASET_STAGE
from toolfactory.run.stats import StatsDB, iso_time
from toolfactory.storage import ObjectStore

# Settings shown in the config summary: (label, path in the manifest's config snapshot).
SETTINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("LLM provider", ("llm", "provider")),
    ("LLM endpoint", ("llm", "base_url")),
    ("embedding model", ("llm", "embedding_model")),
    ("recipes", ("tasks", "recipes")),
    ("modes", ("tasks", "modes")),
    ("instructions per tool", ("tasks", "instructions_per_tool")),
    ("solution search", ("dialogues", "search")),
    ("judge votes", ("verify", "judge_votes")),
    ("disabled rules", ("verify", "disabled_rules")),
    ("export formats", ("export", "formats")),
    ("storage root", ("storage", "root")),
    ("seed", ("run", "seed")),
)


@dataclass(frozen=True)
class StageTime:
    """Shards of a stage and their time: busy (the sum of shard wall times) and elapsed (from the
    first shard's start to the last one's end, which is shorter when shards ran in parallel)."""

    shards: int
    busy_s: float
    elapsed_s: float | None


@dataclass(frozen=True)
class RunPoint:
    """One run of the same storage root, for the trend table."""

    run_id: str
    status: str | None
    started_at: str | None
    accepted: int
    rejected_in_verify: int
    tokens: int


@dataclass(frozen=True)
class Price:
    """USD per million tokens of one role, as configured."""

    prompt: float
    completion: float
    cached: float | None = None  # cached prompt tokens (None: billed as prompt tokens)

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0) -> float:
        cached = min(cached_prompt_tokens, prompt_tokens)
        cached_price = self.prompt if self.cached is None else self.cached
        return ((prompt_tokens - cached) * self.prompt + cached * cached_price + completion_tokens * self.completion) / 1e6


@dataclass
class RunContext:
    config: dict[str, Any] = field(default_factory=dict)  # the manifest's config snapshot ({} without one)
    preflight: dict[str, Any] = field(default_factory=dict)  # the manifest's preflight: endpoint, probes, choices
    settings: list[tuple[str, str]] = field(default_factory=list)
    models: dict[str, str] = field(default_factory=dict)  # role -> model
    prices: dict[str, Price] = field(default_factory=dict)  # roles with a configured price
    stage_times: dict[str, StageTime] = field(default_factory=dict)
    stage_role_tokens: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)  # (stage, role) -> (prompt, completion)
    stage_role_cached: dict[tuple[str, str], int] = field(default_factory=dict)  # (stage, role) -> cached prompt tokens
    exports: dict[str, list[str]] = field(default_factory=dict)  # format -> files, relative to the report folder
    previous: list[RunPoint] = field(default_factory=list)  # earlier runs of the root, oldest first, this one last
    rerun_command: str | None = None
    endpoint: EndpointIdentity | None = None  # who answered, as the endpoint said (None: no manifest)

    @property
    def provider(self) -> str | None:
        llm = self.config.get("llm")
        return str(llm.get("provider")) if isinstance(llm, dict) and llm.get("provider") else None

    @property
    def simulated(self) -> bool:
        return self.endpoint is not None and self.endpoint.simulated

    def role_tokens(self) -> dict[str, tuple[int, int]]:
        """(prompt, completion) tokens of each role over the run's stages."""
        out: dict[str, tuple[int, int]] = {}
        for (_, role), (p, c) in sorted(self.stage_role_tokens.items()):
            before = out.get(role, (0, 0))
            out[role] = (before[0] + p, before[1] + c)
        return out

    def role_cost(self, role: str) -> float | None:
        """The role's cost in USD over the run, or None when it has no price."""
        price = self.prices.get(role)
        if price is None:
            return None
        p, c = self.role_tokens().get(role, (0, 0))
        return price.cost(p, c, self.role_cached().get(role, 0))

    def role_cached(self) -> dict[str, int]:
        """Prompt tokens of each role the endpoint served from its prompt cache."""
        out: dict[str, int] = {}
        for (_, role), cached in self.stage_role_cached.items():
            out[role] = out.get(role, 0) + cached
        return out

    def cost(self, stage: str) -> float | None:
        """The stage's cost in USD, or None when a role it used has no price."""
        used = {role: tokens for (s, role), tokens in self.stage_role_tokens.items() if s == stage and any(tokens)}
        if not used or any(role not in self.prices for role in used):
            return None
        return sum(self.prices[r].cost(p, c, self.stage_role_cached.get((stage, r), 0)) for r, (p, c) in used.items())


def _get(config: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = config
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in value.items()) or "(none)"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "(none)"
    return str(value)


def _seconds(start: str | None, end: str | None) -> float | None:
    try:
        return (datetime.fromisoformat(str(end)) - datetime.fromisoformat(str(start))).total_seconds()
    except (TypeError, ValueError):
        return None


def _from_stats(stats_path: str | Path, run_id: str, storage: str, context: RunContext) -> None:
    db = StatsDB(Path(stats_path))
    # Queries of the report's own; the connection waits out the flow's writes.
    with db.reading() as con:
        times = con.execute(
            """SELECT stage, count(*), sum(coalesce(wall_s, 0)), min(started_at), max(finished_at)
               FROM shards WHERE run_id = ? GROUP BY stage""", [run_id]).fetchall()
        tokens = con.execute(
            """SELECT stage, role, sum(prompt_tokens), sum(completion_tokens), sum(coalesce(cached_prompt_tokens, 0))
               FROM llm_usage WHERE run_id = ? GROUP BY stage, role""", [run_id]).fetchall()
        runs = con.execute(
            "SELECT run_id, status, started_at FROM runs WHERE storage = ? OR run_id = ? ORDER BY started_at, run_id",
            [storage, run_id]).fetchall()
        # A run's stage totals as its run record states them (the cache may hold no shard of it),
        # else as its shards sum up (a run recorded before runs kept a record).
        metrics = con.execute(
            """WITH listed AS (SELECT run_id FROM runs WHERE storage = ? OR run_id = ?)
               SELECT run_id, stage, items_out, rejected, coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)
               FROM run_stages WHERE run_id IN (SELECT run_id FROM listed)
               UNION ALL
               SELECT run_id, stage, items_out, rejected, prompt_tokens + completion_tokens FROM stage_metrics
               WHERE run_id IN (SELECT run_id FROM listed) AND run_id NOT IN (SELECT run_id FROM run_stages)""",
            [storage, run_id]).fetchall()
    context.stage_times = {str(s): StageTime(int(n), float(busy or 0), _seconds(start, end)) for s, n, busy, start, end in times}
    context.stage_role_tokens = {(str(s), str(r)): (int(p or 0), int(c or 0)) for s, r, p, c, _ in tokens}
    context.stage_role_cached = {(str(s), str(r)): int(cached or 0) for s, r, _, _, cached in tokens if cached}
    by_run: dict[str, dict[str, tuple[int, int, int]]] = {}
    for rid, stage, out, rejected, used in metrics:
        by_run.setdefault(str(rid), {})[str(stage)] = (int(out or 0), int(rejected or 0), int(used or 0))
    points = []
    for rid, status, started in runs:
        stages = by_run.get(str(rid), {})
        final = stages.get(DATASET_STAGE) or stages.get("verify") or (0, 0, 0)
        points.append(RunPoint(str(rid), status, iso_time(started), final[0], stages.get("verify", (0, 0, 0))[1],
                               sum(t for _, _, t in stages.values())))
    # the trend ends with this run: later runs of the root are not shown in its report
    index = next((i for i, p in enumerate(points) if p.run_id == run_id), len(points) - 1)
    context.previous = points[max(0, index - 9): index + 1]


def _exports(store: ObjectStore, run_id: str) -> dict[str, list[str]]:
    prefix = f"runs/{run_id}/export/"
    found: dict[str, list[str]] = {}
    for path in store.list(prefix):
        relative = path[len(prefix):]
        fmt, _, rest = relative.partition("/")
        if rest and not any(part.startswith(".") for part in rest.split("/")):
            found.setdefault(fmt, []).append(f"../export/{relative}")
    return {fmt: sorted(files) for fmt, files in sorted(found.items())}


def load_context(store: ObjectStore, stats_path: str | Path, run_id: str, failed: bool) -> RunContext:
    """Everything :mod:`toolfactory.report.sections` shows beside the stage numbers."""
    context = RunContext()
    try:
        manifest = load_manifest(store, run_id)
        context.config, context.preflight = manifest.config, manifest.preflight
        context.endpoint = manifest.endpoint()
    except RunNotFound:
        pass
    config = context.config
    context.settings = [(label, _text(value)) for label, path in SETTINGS if (value := _get(config, path)) not in (None, "")]
    if context.endpoint is not None:
        context.settings.insert(0, ("made by", context.endpoint.label))
    roles = _get(config, ("llm", "roles")) or {}
    context.models = {role: str(spec.get("model")) for role, spec in sorted(roles.items()) if isinstance(spec, dict)}
    for role, spec in roles.items():
        prompt, completion = spec.get("usd_per_million_prompt_tokens"), spec.get("usd_per_million_completion_tokens")
        cached = spec.get("usd_per_million_cached_prompt_tokens")
        if prompt is not None or completion is not None:
            context.prices[role] = Price(float(prompt or 0), float(completion or 0), None if cached is None else float(cached))
    _from_stats(stats_path, run_id, store.url, context)
    context.exports = _exports(store, run_id)
    if failed:
        storage = _get(config, ("storage",)) or {}
        context.rerun_command = rerun_command(run_id, store, storage.get("endpoint_url"), storage.get("region"))
    return context
