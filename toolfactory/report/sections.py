"""The sections of a run's report: which charts and tables it shows, from the run's numbers.

Each section holds its charts, its tables (the same numbers as text, for readers without images
and for checking), and a note for each chart it leaves out, saying why (a field the records do
not have yet, a stage that did not run). Table cells are plain text; the page escapes them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping

from toolfactory.curation import turn_masks
from toolfactory.curation.contamination import CHECKED, CONTAMINATED, SETTINGS, SKIPPED, settings_text
from toolfactory.executable.counts import (
    CALLS_BY_SOURCE, DIALOGUES_BY_SOURCE, ERRORS_BY_SOURCE, EXECUTED, SESSIONS_REUSED, SESSIONS_STARTED,
)
from toolfactory.stages.tools.executable import WARM_SOURCES
from toolfactory.preflight.choices import describe_choice
from toolfactory.report import charts
from toolfactory.report.charts import TOP_N, TOP_REASONS, Chart, top
from toolfactory.report.context import RunContext
from toolfactory.report.data import DialogueMix, RunStats, Usage
from toolfactory.report.samples import Chat, RejectedExample, chat
from toolfactory.stages import DATASET_STAGE
from toolfactory.stages.verify.referee import ALL, JUDGED_ALONE, REFEREE, by_origin, expected_error, figures


@dataclass(frozen=True)
class Table:
    id: str
    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    charts: tuple[Chart, ...] = ()
    tables: tuple[Table, ...] = ()
    notes: tuple[str, ...] = ()  # charts left out, and why
    chats: tuple[Chat, ...] = ()  # sample dialogues
    links: tuple[tuple[str, str], ...] = ()  # (label, relative href)
    commands: tuple[str, ...] = ()  # shell commands to copy


def count(n: int) -> str:
    return f"{n:,}"


def percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1%}"


def ratio(value: float) -> str:
    return f"{value:,.2f}"


def sections(stats: RunStats, mix: DialogueMix, context: RunContext | None = None,
             rejected: tuple[RejectedExample, ...] = ()) -> list[Section]:
    context = context or RunContext()
    failed = [failed_shards(stats, context)] if any(s.failed for s in stats.stages) or stats.status == "failed" else []
    return [*failed, run_summary(context), funnel(stats), time_and_cost(stats, context), rejections(stats),
            rejected_section(rejected), accepted_mix(mix), executed_tools(stats), judges_against_execution(stats), decontamination(stats),
            *([turn_masks_section(stats)] if stats.stage(DATASET_STAGE) else []), samples(mix), complexity(mix), coverage(stats, mix),
            clusters(mix), llm_use(stats, mix), trend(stats, context), exports(context)]


def failed_shards(stats: RunStats, context: RunContext) -> Section:
    rows = tuple((s.stage, str(shard), status, error) for s in stats.stages for shard, status, error in s.failed)
    table = Table("failed-shards", "Shards that did not complete; a re-run runs them (and what waits on them) "
                  "with the run's own config, paying only for LLM answers not cached yet.",
                  ("stage", "shard", "status", "error"), rows)
    notes = () if rows else ("The run is marked failed but the stats list no failed shard.",)
    command = context.rerun_command or f"toolfactory rerun {stats.run_id}"
    return Section("failed", "Failed shards and how to finish the run", tables=(table,), notes=notes, commands=(command,))


def run_summary(context: RunContext) -> Section:
    title = "Config and models"
    if not context.config:
        return Section("config", title, notes=("The run has no manifest in this storage root: config and models unknown.",))
    settings = Table("config", "The run's settings (from its manifest; secrets are never stored there).",
                     ("setting", "value"), tuple(context.settings))
    priced = {role: f"${p.prompt:g} / ${p.completion:g}" for role, p in context.prices.items()}
    models = Table("models", "The model of each agent role.", ("role", "model", "USD per million prompt / completion tokens"),
                   tuple((role, model, priced.get(role, "-")) for role, model in context.models.items()))
    return Section("config", title, tables=(settings, models, *_preflight(context.preflight)))


def _preflight(preflight: dict[str, Any]) -> tuple[Table, ...]:
    """What preflight found at the endpoint, and the mode it chose for each `auto` setting."""
    probes = [p for p in preflight.get("probes") or [] if isinstance(p, dict)]
    if not probes:
        return ()
    chosen = preflight.get("choices") or {}
    choices = Table("preflight-choices", "What preflight chose for the settings left at auto; the run used these.",
                    ("setting", "chosen"), tuple((str(k), describe_choice(v)) for k, v in sorted(chosen.items())))
    rows = tuple((str(p.get("role", "")), str(p.get("model", "")), str(p.get("capability", "")), str(p.get("mode") or "-"),
                  str(p.get("status", "")), f"{float(p.get('latency_s') or 0):.2f} s{' (cached)' if p.get('cached') else ''}",
                  "" if p.get("status") == "ok" else str(p.get("detail", ""))[:200])
                 for p in probes)
    checks = Table("preflight", f"Preflight at {preflight.get('endpoint', 'the endpoint')}: one small request per "
                   "capability the run uses, before any stage.",
                   ("role", "model", "capability", "mode", "status", "latency", "endpoint's message"), rows)
    return (choices, checks) if chosen else (checks,)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)} min {rest:.0f} s" if minutes else f"{rest:.1f} s"


def time_and_cost(stats: RunStats, context: RunContext) -> Section:
    priced = bool(context.prices)
    header = ("stage", "shards", "busy time", "elapsed", "tokens", *(("cost (USD)",) if priced else ()))
    rows = []
    for s in stats.stages:
        time = context.stage_times.get(s.stage)
        row = [s.stage, count(time.shards) if time else "-", _duration(time.busy_s if time else None),
               _duration(time.elapsed_s if time else None), count(s.usage.tokens)]
        if priced:
            cost = context.cost(s.stage)
            row.append("-" if cost is None else f"{cost:,.4f}")
        rows.append(tuple(row))
    table = Table("time-cost", "Time per stage (busy: the shards' wall times summed; elapsed: first start to last end) "
                  "and the tokens every attempt used.", header, tuple(rows))
    notes = () if priced else ("No price is configured (llm.roles.<role>.usd_per_million_prompt_tokens and "
                               "usd_per_million_completion_tokens): cost is shown in tokens.",)
    tables = (table, _cost_by_role(context)) if priced else (table,)
    return Section("time", "Time and cost per stage", tables=tables, notes=notes)


def _cost_by_role(context: RunContext) -> Table:
    """Tokens and cost of each role over the run, and the run's total (unknown if a role has no price)."""
    rows, costs, prompt, completion = [], [], 0, 0
    for role, (p, c) in context.role_tokens().items():
        cost = context.role_cost(role)
        costs.append(cost if cost is not None or not (p or c) else None)
        prompt, completion = prompt + p, completion + c
        rows.append((role, count(p), count(c), "-" if cost is None else f"{cost:,.4f}"))
    total = "-" if any(c is None for c in costs) else f"{sum(c or 0.0 for c in costs):,.4f}"
    rows.append(("run", count(prompt), count(completion), total))
    return Table("cost-role", "Tokens and cost (USD) per role over every attempt of the run; '-': the role has no price.",
                 ("role", "prompt tokens", "completion tokens", "cost (USD)"), tuple(rows))


def rejected_section(examples: tuple[RejectedExample, ...]) -> Section:
    title = "Rejected examples"
    if not examples:
        return Section("rejected", title, notes=("No rejected record was found for the top rejection reasons.",))
    table = Table("rejected-examples", "One rejected record for each of the most frequent reasons, with the rule's "
                  "message and the path of the fault.", ("stage", "reason", "records", "example record", "message", "path"),
                  tuple((e.stage, e.reason, count(e.records), e.record_id, e.message, e.path or "-") for e in examples))
    return Section("rejected", title, tables=(table,))


def samples(mix: DialogueMix) -> Section:
    title = "Sample dialogues"
    if not mix.samples:
        return Section("samples", title, notes=("The run has no accepted dialogues to show.",))
    chosen = tuple(chat(record) for _, record in sorted(mix.samples.items()))
    return Section("samples", title, chats=chosen)


def trend(stats: RunStats, context: RunContext) -> Section:
    title = "Trend"
    points = context.previous
    rows = tuple((p.run_id + (" (this run)" if p.run_id == stats.run_id else ""), p.status or "-", p.started_at or "-",
                  count(p.accepted), count(p.rejected_in_verify), count(p.tokens)) for p in points)
    table = Table("trend", "This run and the runs before it in the same storage root (at most ten).",
                  ("run", "status", "started", "accepted", "rejected by verify", "tokens"), rows)
    if len(points) < 2:
        return Section("trend", title, tables=(table,), notes=("No earlier run in this storage root: trend chart omitted.",))
    chart = charts.trend([(p.run_id, p.accepted, p.tokens) for p in points])
    return Section("trend", title, charts=(chart,), tables=(table,))


MAX_EXPORT_LINKS = 12  # files of one format linked one by one; past that, their folders


def exports(context: RunContext) -> Section:
    title = "Exports"
    if not context.exports:
        return Section("exports", title, notes=("No export was written for this run (export.formats, or a failed run).",))
    links: list[tuple[str, str]] = []
    for fmt, files in context.exports.items():
        if len(files) <= MAX_EXPORT_LINKS:
            links += [(f"{fmt}: {href.split('/', 3)[-1]}", href) for href in files]
            continue
        folders: dict[str, int] = {}  # a format of one file per record (toolbench): its folders
        for href in files:
            folder = href.rsplit("/", 1)[0] + "/"
            folders[folder] = folders.get(folder, 0) + 1
        links += [(f"{fmt}: {folder.split('/', 3)[-1] or './'} ({count(n)} files)", folder) for folder, n in folders.items()]
    return Section("exports", title, links=tuple(links))


def funnel(stats: RunStats) -> Section:
    rows = tuple(
        (s.stage, f"{s.shards_completed}/{s.shards_total}", count(s.shards_failed), count(s.items_in),
         count(s.items_out), count(s.rejected), percent(s.pass_rate))
        for s in stats.stages
    )
    table = Table("funnel", "Records per stage; the pass rate is accepted over judged (out + rejected).",
                  ("stage", "shards", "failed shards", "in", "out", "rejected", "pass rate"), rows)
    layers = [(f"{s.stage} · {layer.name}", layer) for s in stats.stages for layer in s.layers]
    tables = [table]
    if layers:
        tables.append(Table("layers", "Check layers within a stage: records in and passed.",
                            ("layer", "in", "passed", "pass rate"),
                            tuple((name, count(x.items_in), count(x.passed), percent(x.pass_rate)) for name, x in layers)))
    if not stats.stages:
        return Section("funnel", "Stages", tables=tuple(tables), notes=("No stage of this run has recorded a shard.",))
    bars = [(s.stage, s.items_in, s.items_out, s.pass_rate) for s in stats.stages]
    bars += [(name, layer.items_in, layer.passed, layer.pass_rate) for name, layer in layers]
    return Section("funnel", "Stages", charts=(charts.funnel(bars),), tables=tuple(tables))


def rejections(stats: RunStats) -> Section:
    by_stage = {s.stage: s.rejections for s in stats.stages if s.rejections}
    rows = tuple((stage, reason, count(n)) for stage, reasons in by_stage.items() for reason, n in top(reasons, TOP_REASONS))
    table = Table("rejections", f"Rejection reasons, the {TOP_REASONS} most frequent per stage (a record may have several).",
                  ("stage", "reason", "records"), rows)
    if not by_stage:
        return Section("rejections", "Rejections", tables=(table,), notes=("No stage rejected a record: chart omitted.",))
    return Section("rejections", "Rejections", charts=(charts.rejections(by_stage),), tables=(table,))


def _shares(dimension: str, counts: Mapping[str, int]) -> list[tuple[str, ...]]:
    total = sum(counts.values())
    return [(dimension, value, count(n), percent(n / total if total else None)) for value, n in top(counts, TOP_N)]


def accepted_mix(mix: DialogueMix) -> Section:
    title = "Accepted dialogues"
    if not mix.records:
        return Section("mix", title, notes=("The run has no accepted dialogues: mode and recipe charts omitted.",))
    rows = _shares("mode", mix.modes) + _shares("recipe", mix.recipes) + _shares("scenario", mix.scenarios)
    tables = [Table("mix", f"{count(mix.records)} accepted dialogues in {mix.shards} shards.",
                    ("dimension", "value", "records", "share"), tuple(rows))]
    shown = [charts.mix({"mode": mix.modes, "recipe": mix.recipes}, "mix.png", "Modes and recipes of accepted dialogues")]
    notes = []
    if mix.target_vs_shown:
        shown.append(charts.target_vs_shown(mix.target_vs_shown))
        tables.append(Table("target-vs-shown", f"{count(mix.with_target)} dialogues whose task asked for a mode.",
                            ("target mode", "shown mode", "records"),
                            tuple((t, s, count(n)) for (t, s), n in sorted(mix.target_vs_shown.items()))))
    else:
        notes.append("No accepted dialogue records the mode its task asked for (target_mode): "
                     "target vs shown chart omitted.")
    return Section("mix", title, charts=tuple(shown), tables=tuple(tables), notes=tuple(notes))


def executed_tools(stats: RunStats) -> Section:
    """Per executable source: the dialogues that ran its tools for real, their calls and error
    answers, how many of those dialogues are in the dataset, what vetting found of its tools, and
    how its sessions began (a process started, or a warm one reset)."""
    title = "Executed tools"
    made = {dimension: stats.profile("dialogues", dimension) for dimension in (DIALOGUES_BY_SOURCE, CALLS_BY_SOURCE, ERRORS_BY_SOURCE)}
    final = DATASET_STAGE if stats.stage(DATASET_STAGE) else "verify"
    kept = stats.profile(final, DIALOGUES_BY_SOURCE)
    sources = made[DIALOGUES_BY_SOURCE]
    if not sources:
        return Section("executed", title, notes=("No dialogue of this run called a tool from an executable source "
                                                 "(tools.environments, tools.mcp): every tool response was played by an LLM.",))
    started: Counter[str] = Counter()
    reused: Counter[str] = Counter()
    for stage in ("tools", "tasks", "dialogues", "verify"):  # listing and vetting, exploration and blueprints too
        started.update(stats.profile(stage, SESSIONS_STARTED))
        reused.update(stats.profile(stage, SESSIONS_REUSED))
    rows = tuple((source, count(n), count(made[CALLS_BY_SOURCE].get(source, 0)), count(made[ERRORS_BY_SOURCE].get(source, 0)),
                  count(kept.get(source, 0)), percent(kept.get(source, 0) / stats.accepted if stats.accepted else None),
                  count(started.get(source, 0)), count(reused.get(source, 0)))
                 for source, n in sorted(sources.items()))
    table = Table("executed", "Dialogues whose calls ran on the real tool of an executable source (no LLM played it), "
                  "per source; error answers are results the assistant saw and could recover from; sessions (of the "
                  "source's listing and vetting, exploration and blueprints, the dialogues and the verifier's replays) "
                  "began with a process started for them or a warm one reset.",
                  ("source", "dialogues", "calls", "error answers", "in the dataset", "share of the dataset",
                   "processes started", "sessions reused"), rows)
    notes = []
    executed = stats.profile(final, EXECUTED).get("any", 0)
    if stats.accepted:
        notes.append(f"{count(executed)} of {count(stats.accepted)} accepted dialogues ({percent(executed / stats.accepted)}) "
                     "ran at least one real tool.")
    if sum(started.values()):
        notes.append(f"{count(sum(started.values()) + sum(reused.values()))} sessions from {count(sum(started.values()))} "
                     f"process starts: {sum(reused.values()) / sum(started.values()):.1f} reused per start.")
    tables = [table]
    vetted = stats.profile("tools", "vetted_functions")
    if vetted:
        by_source: dict[str, Counter[str]] = {}
        for key, n in vetted.items():
            source, _, status = key.partition(": ")
            by_source.setdefault(source, Counter())[status] += n
        warm_found = {key.partition(": ")[0]: key.partition(": ")[2] for key in stats.profile("tools", WARM_SOURCES)}
        classes = sorted({status for counted in by_source.values() for status in counted})
        tables.append(Table("vetting", "What vetting found of each source's functions (toolfactory tools vet): a run admits "
                            "those that work and those that refused every probe as bad input; and whether a reset process "
                            "is as fresh as a new one (its sessions are then warm).",
                            ("source", *classes, "sessions"),
                            tuple((source, *(count(by_source[source].get(c, 0)) for c in classes), warm_found.get(source, "-"))
                                  for source in sorted(by_source))))
    return Section("executed", title, tables=tuple(tables), notes=tuple(notes))


def judges_against_execution(stats: RunStats) -> Section:
    """The referee: how the LLM judges' verdicts agreed with execution's on the dialogues whose
    calls really ran (and labelled corruptions of them), per judge model and aspect, and the
    judges' expected error on the records they decided alone."""
    title = "Judges against execution"
    counts = stats.profile("verify", REFEREE)
    if not counts:
        return Section("referee", title, notes=(
            "No dialogue of this run was refereed: the judges are measured against execution only where calls "
            "ran on an executable source (tools.environments, tools.mcp) and judges are on.",))
    rows = tuple((f.model, "every aspect" if f.aspect == ALL else f.aspect, count(f.records), percent(f.agreement),
                  count(f.false_accepts), count(f.false_rejects)) for f in figures(counts))
    table = Table("referee", "The judges' verdicts on refereed dialogues against execution's (a corruption fails by "
                  "construction); these votes decide no record. A false accept passes what execution failed.",
                  ("judge model", "aspect", "records", "agreement", "false accepts", "false rejects"), rows)
    origins = Table("referee-origins", "Refereed records by where they came from.", ("origin", "records"),
                    tuple((origin, count(n)) for origin, n in sorted(by_origin(counts).items())))
    alone = stats.profile("verify", JUDGED_ALONE)
    decided = sum(alone.values())
    notes = []
    for f in figures(counts):
        error = expected_error(f, decided) if f.aspect == ALL else None
        if error is not None and decided:
            notes.append(f"The judges ({f.model}) alone decided {count(decided)} record(s) with nothing executed; at "
                         f"the agreement measured here, about {error:,.1f} of those decisions are wrong "
                         "(an estimate: refereed records are executed ones).")
    return Section("referee", title, tables=(table, origins), notes=tuple(notes))


def decontamination(stats: RunStats) -> Section:
    """What the dataset was checked against (sets, items, thresholds; recorded by the select
    stage) and the dialogues rejected for overlapping each set (curate)."""
    title = "Decontamination"
    items, skipped = stats.profile("select", CHECKED), stats.profile("select", SKIPPED)
    if stats.stage("select") is None:
        return Section("decontamination", title, notes=(
            "No dialogue reached the select stage, so none was checked against an evaluation set.",))
    if not items and not skipped:
        return Section("decontamination", title, notes=(
            "The dataset was not checked against any evaluation set (curate.decontaminate.enabled is off).",))
    rejected = stats.stage(DATASET_STAGE).rejections if stats.stage(DATASET_STAGE) else {}
    tests: dict[str, list[str]] = {}
    for label, n in stats.profile(DATASET_STAGE, CONTAMINATED).items():
        name, _, test = label.partition(": ")
        tests.setdefault(name, []).append(f"{test} {count(n)}")
    checked_records = stats.stage("select").items_in if stats.stage("select") else 0
    rows = tuple((name, count(n), count(rejected.get(f"contaminated_{name}", 0)), ", ".join(tests.get(name, [])) or "-")
                 for name, n in items.items())
    table = Table("decontamination", f"{count(checked_records)} dialogues checked against each set's test items; "
                  "a dialogue is rejected as contaminated_<set> when a user turn overlaps an item.",
                  ("set", "items", "dialogues rejected", "caught by"), rows)
    notes = [f"{label.partition(': ')[0]} was not checked: {label.partition(': ')[2]}." for label in skipped]
    notes.append("Thresholds: " + settings_text(stats.profile("select", SETTINGS)) + ".")
    return Section("decontamination", title, tables=(table,), notes=tuple(notes))


def turn_masks_section(stats: RunStats) -> Section:
    """The dataset's assistant turns kept for context but not to be learned, by reason (the curate
    stage's profile, :mod:`toolfactory.curation.turn_masks`)."""
    title = "Turn masks"
    turns = stats.profile(DATASET_STAGE, turn_masks.TURNS)
    if not turns:
        return Section("turn-masks", title, notes=("The dataset stage recorded no turn masks (a run curated before they "
                                                   "were counted).",))
    total = sum(turns.values())
    masked = turns.get(turn_masks.MASKED, 0)
    rows = tuple((reason, count(n), percent(n / total if total else None))
                 for reason, n in sorted(stats.profile(DATASET_STAGE, turn_masks.PROFILE).items(), key=lambda kv: (-kv[1], kv[0])))
    table = Table("turn-masks", f"{count(masked)} of {count(total)} assistant turns of the dataset are masked: kept as "
                  "context, not to be learned (OpenAI export: weight 0; HF export: train false).",
                  ("reason", "turns", "of all assistant turns"), rows)
    return Section("turn-masks", title, tables=(table,))


def complexity(mix: DialogueMix) -> Section:
    title = "Complexity"
    notes = []
    if mix.complexity_unreadable:
        notes.append(f"{count(mix.complexity_unreadable)} dialogues have a complexity that is not a number: left out.")
    if not mix.complexity:
        notes.append("The accepted dialogues have no complexity field (a curation stage adds it): histogram omitted.")
        return Section("complexity", title, notes=tuple(notes))
    values = mix.complexity
    n = sum(values.values())
    mean = sum(v * k for v, k in values.items()) / n
    table = Table("complexity", f"Complexity of {count(n)} of {count(mix.records)} accepted dialogues.",
                  ("records", "min", "mean", "max"), ((count(n), ratio(min(values)), ratio(mean), ratio(max(values))),))
    chart = charts.histogram(values, "complexity.png", "Complexity of accepted dialogues", "complexity")
    return Section("complexity", title, charts=(chart,), tables=(table,), notes=tuple(notes))


def _distinct(stats: RunStats, dimension: str) -> int | None:
    uses = stats.profile("tasks", dimension)
    return int(uses["distinct"]) if "distinct" in uses else None


def coverage(stats: RunStats, mix: DialogueMix) -> Section:
    title = "Domains and coverage"
    shown: list[Chart] = []
    notes: list[str] = []
    domains = stats.profile("pool", "tools_by_domain")
    if domains:
        shown.append(charts.bars(domains, "domains.png", "Pool tools by top-level domain",
                                 f"{count(sum(domains.values()))} tools in {count(len(domains))} domains"))
    else:
        notes.append("The pool stage recorded no tools_by_domain profile: domain chart omitted.")
    pool_tools = stats.profile("tasks", "coverage").get("pool_tools") or sum(stats.profile("pool", "tools_by_source").values())
    pool_apis = sum(stats.profile("pool", "functions_by_source").values())
    tool_uses, api_uses = _distinct(stats, "tool_uses"), _distinct(stats, "api_uses")
    groups: dict[str, list[tuple[str, int]]] = {}
    if pool_tools:
        groups["tools"] = [("in the pool", pool_tools)]
        if tool_uses is not None:
            groups["tools"].append(("offered by tasks", tool_uses))
        if mix.records:
            groups["tools"].append(("in accepted dialogues", len(mix.source_tools)))
    if pool_apis and api_uses is not None:
        groups["APIs"] = [("in the pool", pool_apis), ("offered by tasks", api_uses)]
    rows = tuple((name, label, count(n), percent(n / series[0][1]))
                 for name, series in groups.items() for label, n in series)
    table = Table("coverage", "Distinct tools and APIs, and their share of the pool.", ("kind", "where", "distinct", "of the pool"), rows)
    if groups and any(len(series) > 1 for series in groups.values()):
        shown.append(charts.coverage(groups))
    else:
        notes.append("No pool size or no use of pool tools was recorded (tasks profile coverage, tool_uses): "
                     "coverage chart omitted.")
    domain_rows = tuple((domain, count(n)) for domain, n in top(domains, TOP_N))
    tables = (Table("domains", "Pool tools by top-level domain.", ("domain", "tools"), domain_rows), table)
    return Section("coverage", title, charts=tuple(shown), tables=tables, notes=tuple(notes))


def clusters(mix: DialogueMix) -> Section:
    title = "Clusters"
    if not mix.clusters:
        return Section("clusters", title, notes=("The accepted dialogues have no cluster field (a curation stage adds it): "
                                                 "cluster coverage chart omitted.",))
    n, k = mix.with_cluster, len(mix.clusters)
    chart = charts.bars(mix.clusters, "clusters.png", "Accepted dialogues per cluster", f"{count(k)} clusters, {count(n)} dialogues")
    table = Table("clusters", f"{count(k)} clusters hold {count(n)} of {count(mix.records)} accepted dialogues "
                  "(a dialogue counts once in each of its clusters).",
                  ("cluster", "records", "share"), tuple((c, count(x), percent(x / n)) for c, x in top(mix.clusters, TOP_N)))
    return Section("clusters", title, charts=(chart,), tables=(table,))


USAGE_HEADER = ("calls", "cache hits", "prompt tokens", "of which cached", "completion tokens", "calls per accepted",
                "tokens per accepted")


def _usage_rows(named: Mapping[str, Usage], accepted: int) -> tuple[tuple[str, ...], ...]:
    total = Usage(*(sum(getattr(u, f) for u in named.values())
                    for f in ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "cached_prompt_tokens")))
    return tuple(
        (name, count(u.calls), count(u.cache_hits), count(u.prompt_tokens), count(u.cached_prompt_tokens),
         count(u.completion_tokens),
         ratio(u.calls / accepted) if accepted else "-", ratio(u.tokens / accepted) if accepted else "-")
        for name, u in [*named.items(), ("total", total)]
    )


def _recipe_table(stats: RunStats) -> tuple[Table, ...]:
    """Requests per accepted dialogue of each recipe: what a kept record of that recipe costs."""
    if not stats.calls_by_recipe:
        return ()
    rows = tuple((recipe, count(kept), count(calls), ratio(calls / kept) if kept else "-")
                 for recipe, (kept, calls) in sorted(stats.calls_by_recipe.items()))
    return (Table("llm-recipes", "LLM requests the records of each recipe took in the dialogues and verify stages "
                  "(rejected records included), over the recipe's accepted records.",
                  ("recipe", "accepted", "requests", "requests per accepted"), rows),)


def llm_use(stats: RunStats, mix: DialogueMix) -> Section:
    title = "LLM use"
    by_stage = {s.stage: s.usage for s in stats.stages}
    accepted = stats.accepted
    own = f"; generating a dialogue took {ratio(mix.llm_calls / mix.records)} calls (its llm_calls)" if mix.records else ""
    tables = (
        Table("llm-stages", f"Every attempt's use, failed attempts included, over {count(accepted)} accepted records{own}.",
              ("stage", *USAGE_HEADER), _usage_rows(by_stage, accepted)),
        Table("llm-roles", "The same, per agent role.", ("role", *USAGE_HEADER), _usage_rows(stats.usage_by_role, accepted)),
        *_recipe_table(stats),
    )
    if not stats.usage.any:
        return Section("llm", title, tables=tables, notes=("The run recorded no LLM use: charts omitted.",))
    per = "per accepted record" if accepted else "in total (no accepted records)"
    divisor = max(accepted, 1)

    def rows(named: Mapping[str, Usage]) -> list[tuple[str, float, float, float, float]]:
        return [(name, u.calls / divisor, u.cache_hits / divisor, u.prompt_tokens / divisor, u.completion_tokens / divisor)
                for name, u in named.items() if u.any]

    shown = [charts.llm_use(rows(by_stage), "llm_stages.png", "LLM use per stage", per)]
    notes: tuple[str, ...] = ()
    if stats.usage_by_role:
        shown.append(charts.llm_use(rows(stats.usage_by_role), "llm_roles.png", "LLM use per role", per))
    else:
        notes = ("No per-role LLM use was recorded: role chart omitted.",)
    return Section("llm", title, charts=tuple(shown), tables=tables, notes=notes)


__all__ = ["Section", "Table", "sections"]
