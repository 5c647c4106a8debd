"""The `toolfactory` command line.

    toolfactory check [--config FILE] [--set section.field=value ...]
    toolfactory run [--config FILE] [--set section.field=value ...] [--run-id ID]
    toolfactory rerun RUN_ID [--config FILE] [--set ...] [--checksums]
    toolfactory stats [RUN_ID] [--json] [--config FILE]
    toolfactory check-run RUN_ID [--checksums] [--config FILE] [--set ...]
    toolfactory tools import PATH --format F [--out FILE]
    toolfactory tools import [PATH] --format mcp [--command CMD | --url URL] [--name N] [--env K=V] [--header-from-env H=VAR] [--out FILE]
    toolfactory verify PATH --format F [--out DIR] [--policy RECIPE|none] [--paths released|all] [--workers N] [--max-depth N] [--disable CODE]
    toolfactory eval PATH --format F [--against PATH] [--votes 4] [--out DIR]
    toolfactory simulator serve [--port P] [--latency-ms X] [--rate-429 R] ...

Exit status: 0 when every shard completed, 1 when some shard failed (re-run them with
`toolfactory rerun RUN_ID`), the endpoint refused a kind of request again and again, the run is
below its floors (`run.min_accepted`, `run.min_pass_rate`) or on an unexpected error, 2 for
invalid config, arguments or paths, and for an endpoint that cannot serve what the config asks
(preflight, which `check` runs alone), 3 when the run stopped at its `llm.budget` (re-run it
with a larger one). `check-run` exits 1 when it finds a damaged file (`rerun` rebuilds it).
Errors are one line on stderr; `--debug` shows the traceback.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from toolfactory.errors import ConfigError, PreflightFailed, TerminalError
from toolfactory.formats import FORMATS, named

if TYPE_CHECKING:
    from toolfactory.config import Config
    from toolfactory.run.summary import PerAccepted, RunSummary, StageSummary

# Help as click writes it, not through rich: paragraphs wrapped to the terminal, flags shown as
# flags (rich's panels give every option a type, `--json <bool>`, and keep the line breaks of a
# command's docstring in the list of commands, mid-sentence).
_PLAIN = {"add_completion": False, "rich_markup_mode": None}
app = typer.Typer(**_PLAIN, no_args_is_help=True, help="Synthesize and verify tool-use training data.")
simulator_app = typer.Typer(**_PLAIN, help="The offline OpenAI-compatible LLM simulator.")
app.add_typer(simulator_app, name="simulator")
tools_app = typer.Typer(**_PLAIN, help="Tool sources.")
app.add_typer(tools_app, name="tools")

ConfigOption = typer.Option(None, "--config", "-c", metavar="FILE", help="YAML config (default: the built-in quickstart defaults).")
SetOption = typer.Option(None, "--set", "-s", metavar="FIELD=VALUE", help="Override a field: section.field=value (repeatable).")


# File names that say nothing of the program they start (`node …/dist/index.js`).
_GENERIC_STEMS = {"index", "main", "server", "cli", "app", "__main__", "run", "start", "bin"}
_GENERIC_FOLDERS = {"dist", "build", "lib", "src", "bin", "out", "cjs", "esm"}


def _program_name(word: str) -> str:
    """A source's default name from the program its command starts: the stem of a script or
    command; for a generic script (`index.js`, `__main__.py`) the name in the nearest package
    manifest above it (package.json's `name` without its scope, pyproject's project name), else
    the nearest folder that is no build folder."""
    import re

    path = Path(word)
    if path.stem not in _GENERIC_STEMS or len(path.parts) < 2:
        return path.stem
    for folder in list(path.parents)[:6]:
        for manifest, pattern in (("package.json", r'"name"\s*:\s*"([^"]+)"'), ("pyproject.toml", r'(?m)^name\s*=\s*"([^"]+)"')):
            try:
                found = re.search(pattern, (folder / manifest).read_text(encoding="utf-8", errors="replace"))
            except OSError:
                continue
            if found:
                return found[1].rsplit("/", 1)[-1]
    return next((folder.name for folder in path.parents if folder.name and folder.name not in _GENERIC_FOLDERS), path.stem)


def _error(what: object) -> None:
    """`error: …` on stderr, on one line whatever the message holds (a library's own text may
    spread over several, with indentation)."""
    typer.echo("error: " + " ".join(str(what).split()), err=True)


def _config(path: Optional[str], overrides: Optional[list[str]]) -> Config:
    # Imported here: the configuration loads every section and an HTTP client, which `verify` does not need.
    from toolfactory.config import load_config

    try:
        return load_config(path, overrides or ())
    except ConfigError as exc:
        _error(exc)
        raise typer.Exit(2) from None


def _check_out(out: str) -> None:
    """Exit 2 naming `--out` when a local `--out` cannot be a folder this process writes in: made
    if missing, and tried with a real write (a read-only or full file system, or /proc, pass a
    look at the permission bits), before any work whose result it would lose."""
    import tempfile

    if out.startswith("s3://"):
        return  # checked by its first request, with the S3 settings
    folder = Path(out).expanduser().absolute()
    try:
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"--out: {folder} is a file, not a folder")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--out: cannot create the folder {folder}: {exc.strerror or exc}") from None
        try:
            with tempfile.TemporaryFile(dir=folder) as probe:
                probe.write(b"toolfactory")
                probe.flush()
                os.fsync(probe.fileno())  # a full disk may refuse only the data, not the name
        except OSError as exc:
            raise ConfigError(f"--out: cannot write in {folder}: {exc.strerror or exc}") from None
    except ConfigError as exc:
        _error(exc)
        raise typer.Exit(2) from None


def _print_summary(summary: RunSummary) -> None:
    from toolfactory.run.summary import LastAttempt

    typer.echo(f"run {summary.run_id}: {summary.status}" + (f" ({summary.reason})" if summary.reason else ""))
    if summary.made_by:
        typer.echo(f"made by: {summary.made_by}")
    last = summary.last_attempt or LastAttempt()
    if (summary.attempts or 1) > 1:
        typer.echo(f"executed {summary.attempts} times: first started {summary.started_at or '-'}, "
                   f"last started {last.started_at or '-'}" + (f" ({last.wall_s:.0f} s)" if last.wall_s is not None else ""))
    header = (f"{'stage':<10} {'shards':>7} {'failed':>6} {'in':>6} {'out':>6} {'pass':>7} {'llm calls':>9} {'cache hits':>10} "
              f"{'tokens':>9} {'cost $':>9}  top rejections")
    typer.echo(header)
    for s in summary.stages:
        rate = "-" if s.pass_rate is None else f"{s.pass_rate:.1%}"
        top = ", ".join(f"{k}={v}" for k, v in list(s.rejections.items())[:3]) or "-"
        cost = "-" if s.cost_usd is None else f"{s.cost_usd:.4f}"
        typer.echo(
            f"{s.stage:<10} {s.shards_total:>7} {s.shards_failed:>6} {s.items_in:>6} {s.items_out:>6} "
            f"{rate:>7} {s.llm_calls:>9} {s.cache_hits:>10} {s.tokens:>9} {cost:>9}  {top}"
        )
    _print_per_accepted(summary.per_accepted)
    _print_executed(summary.stages)
    _print_referee(summary.stages)
    roles = summary.cost_by_role
    if roles:
        total = "-" if summary.cost_usd is None else f"${summary.cost_usd:.4f}"
        per_role = ", ".join(f"{role} {u.tokens} tokens "
                             f"{'-' if u.cost_usd is None else '$' + format(u.cost_usd, '.4f')}" for role, u in roles.items())
        typer.echo(f"cost: {total} ({per_role}){'' if summary.cost_usd is not None else '; - : no price configured'}")
    for s in summary.stages:
        if s.layers:
            funnel = " -> ".join(f"{layer}-passed {c.passed}" for layer, c in s.layers.items())
            typer.echo(f"{s.stage} funnel: generated {s.items_in} -> {funnel} -> accepted {s.items_out}")
    from toolfactory.stages.verify.referee import REFEREE

    for s in summary.stages:
        for dimension, counts in s.profile.items():
            if dimension == REFEREE:  # its own line above
                continue
            shown = ", ".join(f"{value}={n}" for value, n in list(counts.items())[:8])
            more = f", … ({len(counts) - 8} more)" if len(counts) > 8 else ""
            typer.echo(f"{s.stage} {dimension}: {shown}{more}")
    for s in summary.stages:
        for failure in s.failed_shards:
            typer.echo(f"  {s.stage} shard {failure.shard} {failure.status}: {failure.error}")


def _print_per_accepted(cost: PerAccepted) -> None:
    """What one dataset record cost in LLM calls and tokens, per stage and per recipe."""
    if not cost.accepted or cost.llm_calls is None:
        return
    stages = ", ".join(f"{stage} {v.llm_calls}" for stage, v in cost.by_stage.items())
    typer.echo(f"llm calls per accepted dialogue: {cost.llm_calls} ({cost.tokens} tokens) = {stages}")
    recipes = ", ".join(f"{recipe} {v.llm_calls_per_accepted if v.llm_calls_per_accepted is not None else '-'} "
                        f"({v.accepted} accepted)" for recipe, v in cost.by_recipe.items())
    if recipes:
        typer.echo(f"llm requests per accepted dialogue by recipe (dialogues + verify): {recipes}")


def _print_executed(stages: tuple[StageSummary, ...]) -> None:
    """Per executable source: the dialogues that ran it, its calls and error answers, and how
    many of those dialogues the dataset kept (nothing when no source ran)."""
    from toolfactory.executable.counts import (
        CALLS_BY_SOURCE, DIALOGUES_BY_SOURCE, ERRORS_BY_SOURCE, EXECUTED, SESSIONS_REUSED, SESSIONS_STARTED,
    )
    from toolfactory.stages import DATASET_STAGE

    profiles = {s.stage: s.profile for s in stages}
    made = profiles.get("dialogues", {})
    kept = profiles.get(DATASET_STAGE, {}).get(DIALOGUES_BY_SOURCE, {})
    sources = made.get(DIALOGUES_BY_SOURCE, {})
    if not sources:
        return
    shown = "; ".join(f"{source} {n} dialogues, {made.get(CALLS_BY_SOURCE, {}).get(source, 0)} calls "
                      f"({made.get(ERRORS_BY_SOURCE, {}).get(source, 0)} errors), {kept.get(source, 0)} in the dataset"
                      for source, n in sorted(sources.items()))
    typer.echo(f"executed tools: {shown}")
    accepted = next((s.items_out for s in stages if s.stage == DATASET_STAGE), 0)
    executed = profiles.get(DATASET_STAGE, {}).get(EXECUTED, {}).get("any", 0)
    # Every stage's sessions: the tools stage's listing and vetting, the tasks stage's exploration
    # and blueprints, the dialogues and the verifier's replays.
    started = sum(sum(profile.get(SESSIONS_STARTED, {}).values()) for profile in profiles.values())
    reused = sum(sum(profile.get(SESSIONS_REUSED, {}).values()) for profile in profiles.values())
    if accepted:
        line = f"executed share: {executed} of {accepted} accepted dialogues ran a real tool ({100 * executed / accepted:.0f}%)"
        if started:
            line += f"; {started + reused} sessions from {started} process starts"
        typer.echo(line)


def _print_referee(stages: tuple[StageSummary, ...]) -> None:
    """Per judge model: how its verdicts agreed with execution's on the refereed dialogues."""
    from toolfactory.stages.verify.referee import ALL, REFEREE, figures

    counts = next((s.profile.get(REFEREE, {}) for s in stages if s.stage == "verify"), {})
    for f in figures(counts):
        if f.aspect == ALL and f.agreement is not None:
            typer.echo(f"judges against execution: {f.model} agreed on {f.agreement:.1%} of {f.records} refereed dialogues "
                       f"({f.false_accepts} false accepts, {f.false_rejects} false rejects)")


def _finish(summary: RunSummary) -> None:
    _print_summary(summary)
    if summary.status == "budget_exhausted":
        typer.echo(summary.message or "the run's LLM budget is spent", err=True)
        raise typer.Exit(3)
    if summary.status != "completed":
        if summary.reason:
            typer.echo(f"error: run {summary.run_id} failed: {summary.reason}", err=True)
        if summary.rerun or not summary.reason:
            command = summary.rerun or f"toolfactory rerun {summary.run_id}"
            typer.echo(f"some shards did not complete; finish the run with: {command}", err=True)
        raise typer.Exit(1)


def _bad_input(exc: ConfigError | TerminalError) -> typer.Exit:
    """Exit 2 with one message (after the preflight table, when preflight found the problem)."""
    if isinstance(exc, PreflightFailed) and exc.table:
        typer.echo(exc.table)
    _error(exc)
    return typer.Exit(2)


def _stopped_by_full_disk(exc: Exception, run_id: str, config: Config) -> Exception:
    """A run stopped by a full disk: one line with the command that finishes it once there is
    room (exit 1); any other error is left to `main`."""
    from toolfactory.run.outcome import rerun_command
    from toolfactory.storage import ObjectStore, disk_full

    if not disk_full(exc):
        return exc
    store = ObjectStore.open(config.storage)
    command = rerun_command(run_id, store, config.storage.endpoint_url, config.storage.region)
    typer.echo(f"error: run {run_id} stopped: no space left on the disk of {store.url} or of {config.stats_path()}; "
               f"free some, then finish the run with: {command}", err=True)
    return typer.Exit(1)


@app.command(short_help="Check that the endpoint serves every request a run sends.")
def check(
    config: Optional[str] = ConfigOption,
    overrides: Optional[list[str]] = SetOption,
) -> None:
    """Send one small request of each kind a run would send, per role, and print what works.

    Exit 2, with one message naming the config field to change, when the endpoint cannot serve
    the run. Modes left `auto` are chosen as a run would choose them. With executable sources and
    judges configured, the judges also vote on a shipped referee set (BFCL dialogues whose verdict
    execution gives) and their agreement is printed."""
    import asyncio

    resolved = _config(config, overrides)
    from flows.runtime import llm_endpoint
    from toolfactory.llm import resolve_endpoint
    from toolfactory.preflight import check_endpoint

    from toolfactory.preflight.referee import check_judges, wanted

    with llm_endpoint(resolved) as base_url:
        endpoint = resolve_endpoint(resolved.llm, base_url)
        report = asyncio.run(check_endpoint(resolved, endpoint))
        typer.echo(report.table())
        for line in report.choice_lines():
            typer.echo(f"auto: {line}")
        if report.problems:
            typer.echo(f"error: {report.problems[0]}", err=True)
            raise typer.Exit(2)
        if wanted(resolved):  # the judge role against execution's verdicts on a shipped set
            for line in asyncio.run(check_judges(resolved, endpoint)).lines():
                typer.echo(line)
    typer.echo("ok: the endpoint serves every request the run will send")


@app.command(short_help="Generate a dataset: every stage, from domains to curate.")
def run(
    config: Optional[str] = ConfigOption,
    overrides: Optional[list[str]] = SetOption,
    run_id: Optional[str] = typer.Option(None, metavar="ID", help="Run id (default: generated)."),
) -> None:
    """Generate a dataset: domains → tools → pool → tasks → dialogues → verify → measure → select → curate,
    then its exports and report."""
    resolved = _config(config, overrides)
    from toolfactory.curation.contamination import check_sets
    from toolfactory.stages.tools.sources import check_files, read_sources
    from toolfactory.storage import check_root

    try:
        # Before Prefect or Ray start (or are even imported), a typo or an unreadable file costs
        # nothing; the run reads them again.
        check_root(resolved.storage)
        check_files(resolved.tools)
        read_sources(resolved.tools)
        skipped = check_sets(resolved.curate.decontaminate)
        if resolved.llm.provider == "simulator":
            from toolfactory.llm.simulator_process import check_simulator_settings

            check_simulator_settings(resolved.llm.simulator, "llm.simulator", resolved.orchestration.simulator_start_timeout_s)
    except ConfigError as exc:
        _error(exc)
        raise typer.Exit(2) from None
    for line in skipped:
        typer.echo(f"warning: {line}", err=True)
    from flows.display import shared_display
    from flows.execute import run_summary_of
    from flows.generate import generate
    from flows.runtime import prefect_api
    from toolfactory.run.planning import new_run_id

    run_id = run_id or resolved.run.run_id or new_run_id(resolved)
    typer.echo(f"run {run_id}: storage {resolved.storage.root}, stats {resolved.stats_path()}")
    try:
        # One display for the whole run, opened before Prefect logs anything, so that every log line goes above it.
        with shared_display(), prefect_api(resolved.orchestration.prefect_start_timeout_s):
            summary = run_summary_of(generate(config_path=config, overrides=overrides or [], run_id=run_id, return_state=True))
    except (ConfigError, TerminalError) as exc:
        raise _bad_input(exc) from None
    except Exception as exc:
        raise _stopped_by_full_disk(exc, run_id, resolved) from None
    _finish(summary)


@app.command(short_help="Finish a run: its failed, blocked or missing shards.")
def rerun(
    run_id: str = typer.Argument(..., metavar="RUN_ID", help="The run to finish."),
    config: Optional[str] = ConfigOption,
    overrides: Optional[list[str]] = SetOption,
    checksums: bool = typer.Option(False, "--checksums", help="Also compare every committed file's checksum (reads them all)."),
) -> None:
    """Run the failed, blocked or missing shards of a run, with the run's own config; a damaged
    committed shard (see `check-run`) is built again, with every shard that read it.

    `--set` may change how the run is carried out (endpoint URL, key source, concurrency, rate
    limits, budget, retries, storage, transient tolerance, embedding backend); it is recorded in
    the run's manifest. Any
    other setting is refused. `--config` only locates the storage."""
    locator = _config(config, overrides)
    from toolfactory.run.manifest import load_manifest
    from toolfactory.run.operational import check_operational
    from toolfactory.storage import ObjectStore, check_root

    try:
        # Before Prefect starts (or is even imported), a typo costs nothing.
        check_operational(overrides or ())
        check_root(locator.storage)
        load_manifest(ObjectStore.open(locator.storage), run_id)
        from flows.display import shared_display
        from flows.execute import run_summary_of
        from flows.rerun import rerun as rerun_flow
        from flows.runtime import prefect_api

        with shared_display(), prefect_api(locator.orchestration.prefect_start_timeout_s):
            summary = run_summary_of(rerun_flow(run_id=run_id, config_path=config, overrides=overrides or [],
                                                checksums=checksums, return_state=True))
    except (ConfigError, TerminalError) as exc:
        raise _bad_input(exc) from None
    except Exception as exc:
        raise _stopped_by_full_disk(exc, run_id, locator) from None
    _finish(summary)


@app.command(short_help="Pass rates, shard status and LLM usage of a run.")
def stats(
    run_id: Optional[str] = typer.Argument(None, metavar="RUN_ID", help="Run id (default: the latest run)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON object instead of a table."),
    config: Optional[str] = ConfigOption,
    overrides: Optional[list[str]] = SetOption,
) -> None:
    """Per-stage pass rates, shard status and LLM usage of a run.

    Read from the storage root, through a local cache (`stats.path`) brought up to date first."""
    from toolfactory.stages import STAGE_NAMES
    from toolfactory.run.stats import StatsDB
    from toolfactory.run.stats_sync import sync_stats
    from toolfactory.storage import ObjectStore

    resolved = _config(config, overrides)
    db = StatsDB(resolved.stats_path())
    store = ObjectStore.open(resolved.storage)
    synced = sync_stats(store, db, run_id)
    if synced.run_id is None:
        typer.echo(f"error: no run recorded in {store.url} (stats cache {db.path}): set storage.root to the runs' storage", err=True)
        raise typer.Exit(2)
    summary = db.run_summary(synced.run_id, STAGE_NAMES) if db.path.is_file() else None
    if summary is None or summary.status is None:
        typer.echo(f"error: run {synced.run_id!r} is not recorded in {store.url} (stats cache {db.path})", err=True)
        raise typer.Exit(2)
    _print_problems(synced.problems)
    damaged = _damaged_files(store, synced.run_id)
    if as_json:
        problems = [{"path": p.path, "reason": p.reason, "detail": p.detail} for p in synced.problems]
        printed = {**summary.to_dict(), "problems": problems, "damaged": damaged}
        typer.echo(json.dumps(printed, indent=2, default=str))
    else:
        _print_summary(summary)
        if summary.message:
            typer.echo(summary.message)
    for line in damaged:
        typer.echo(f"warning: damaged: {line}", err=True)
    if damaged:
        from toolfactory.run.outcome import damage_advice

        advice = damage_advice(synced.run_id, store, resolved.storage.endpoint_url, resolved.storage.region)
        typer.echo(f"warning: run {synced.run_id} has {len(damaged)} damaged file(s) since its commit: {advice}", err=True)


def _damaged_files(store: Any, run_id: str) -> list[str]:
    """The run's committed files that are no longer what was committed (sizes: one listing), one
    line each; nothing is changed (see toolfactory.run.integrity)."""
    from toolfactory.errors import RunNotFound
    from toolfactory.run.integrity import check_run as check_files
    from toolfactory.run.manifest import load_manifest

    try:
        plan = load_manifest(store, run_id).shard_plan()
    except RunNotFound:
        return []
    return [damage.line(store) for damage in check_files(store, run_id, plan).damaged]


def _print_problems(problems: Any) -> None:
    """Files of the storage root the stats had to skip: one line each, on stderr."""
    for problem in problems:
        typer.echo(f"warning: {problem.path} skipped: {problem.reason} ({problem.detail}); "
                   "its numbers are missing from the stats", err=True)


@app.command("check-run", short_help="Check that a run's committed files are whole.")
def check_run(
    run_id: str = typer.Argument(..., metavar="RUN_ID", help="The run whose committed files to check."),
    checksums: bool = typer.Option(False, "--checksums", help="Compare every file's checksum too (reads them all)."),
    config: Optional[str] = ConfigOption,
    overrides: Optional[list[str]] = SetOption,
) -> None:
    """Check, without changing anything, that a run's committed files are whole: exit 1 naming
    each missing, truncated or (with --checksums) changed file, 0 when every one is intact."""
    resolved = _config(config, overrides)
    from toolfactory.run.integrity import check_run as check_files, pool_advice, shards_to_rebuild
    from toolfactory.run.manifest import load_manifest
    from toolfactory.run.outcome import rerun_command
    from toolfactory.storage import ObjectStore

    store = ObjectStore.open(resolved.storage)
    plan = load_manifest(store, run_id).shard_plan()
    found = check_files(store, run_id, plan, checksums)
    what = "sizes and checksums" if checksums else "sizes"
    if found.ok:
        typer.echo(f"run {run_id}: {found.checked} committed files intact ({what} as recorded at commit)")
        return
    for damage in found.damaged:
        typer.echo(f"damaged: {damage.line(store)}")
    endpoint, region = resolved.storage.endpoint_url, resolved.storage.region
    rebuild = shards_to_rebuild(found, plan, run_id)
    if rebuild:
        flag = " --checksums" if checksums else ""
        typer.echo(f"{len(rebuild)} shard(s) to build again, with those that read a damaged one: "
                   f"{rerun_command(run_id, store, endpoint, region)}{flag}")
    for damage in found.beyond:
        advice = pool_advice(store, damage.path, endpoint, region) if damage.path.startswith("pool/") else \
            "stored when the run was planned, no re-run can write it again: start a new run"
        typer.echo(f"{store.uri(damage.path)}: {advice}")
    typer.echo(f"error: run {run_id}: {len(found.damaged)} damaged file(s) of {found.checked} checked ({what})", err=True)
    raise typer.Exit(1)


@tools_app.command("import", short_help="Convert and check the tools of a file or an MCP server.")
def tools_import(
    path: Optional[str] = typer.Argument(None, metavar="PATH", help="A tool file (for mcp: a YAML or JSON file holding one tools.mcp entry)."),
    fmt: str = typer.Option(..., "--format", "-f", metavar="FORMAT", help="openapi, openai, toolbench, toolalpaca, catalog or mcp."),
    out: Optional[str] = typer.Option(None, "--out", "-o", metavar="FILE", help="Write the accepted tools here, as a catalog JSON file."),
    command: Optional[str] = typer.Option(None, "--command", metavar="COMMAND", help="mcp: the command that starts the server over stdio."),
    url: Optional[str] = typer.Option(None, "--url", metavar="URL", help="mcp: the endpoint of a server over streamable HTTP."),
    name: Optional[str] = typer.Option(None, "--name", metavar="NAME", help="mcp: the source's name (default: derived from the command or URL)."),
    env: Optional[list[str]] = typer.Option(None, "--env", metavar="KEY=VALUE", help="mcp: KEY=VALUE for the server; VALUE may hold ${VAR} (repeatable)."),
    header_from_env: Optional[list[str]] = typer.Option(None, "--header-from-env", metavar="HEADER=VAR", help="mcp: HEADER=VAR, the header's value read from $VAR (repeatable)."),
) -> None:
    """Convert and check the tools of a file, or of an MCP server, as the tools stage does; report every rejection."""
    from toolfactory.config import SourceFile, ToolsConfig
    from toolfactory.stages.tools.sources import read_sources
    from toolfactory.stages.tools.stage import import_items

    if fmt == "introductions":
        typer.echo("error: introductions are documented by the LLM; name the file in tools.files of a run", err=True)
        raise typer.Exit(2)
    if fmt == "mcp":
        label, result = _import_mcp(path, command, url, name, env or [], header_from_env or [])
    else:
        if path is None or command or url or name or env or header_from_env:
            typer.echo("error: give a tool file; --command, --url, --name, --env and --header-from-env are for --format mcp", err=True)
            raise typer.Exit(2)
        try:
            source = SourceFile(path=path, format=fmt)  # type: ignore[arg-type]
            items = read_sources(ToolsConfig(builtin_catalog=False, builtin_introductions=False, files=[source]))
        except (ConfigError, ValueError) as exc:
            _error(str(exc).splitlines()[0] if isinstance(exc, ValueError) else exc)
            raise typer.Exit(2) from None
        label, result = path, import_items(items)
    from toolfactory.definitions.convert import LEFT_OUT

    functions = sum(len(tool.functions) for tool in result.records)  # type: ignore[attr-defined]
    typer.echo(f"{label}: {len(result.records)} tools ({functions} functions) imported, {len(result.rejected)} rejected")
    for rejected in result.rejected:
        typer.echo(f"  rejected {rejected.id}: {', '.join(rejected.reasons)}: {rejected.detail}")
    for tool in result.records:
        for line in tool.provenance.get(LEFT_OUT, ()):  # type: ignore[attr-defined]
            typer.echo(f"  left out of {tool.name}: {line}")  # type: ignore[attr-defined]
    if not result.records and fmt != "mcp":
        # A tool file none of whose tools can be used is bad input: an empty catalog would only
        # move the failure to the run that reads it. (A server's tools are its own to fix.)
        first = result.rejected[0] if result.rejected else None
        _error(f"{label}: no tool imported" + (f": {first.detail or ', '.join(first.reasons)}" if first else " (it holds none)"))
        raise typer.Exit(2)
    if out:
        catalog = {"version": 1, "tools": [tool.model_dump(mode="json", exclude_none=True) for tool in result.records]}
        Path(out).write_text(json.dumps(catalog, indent=1, ensure_ascii=False))
        typer.echo(f"wrote {out} (use it as a source with format: catalog)")


@tools_app.command("vet", short_help="Call every tool of the run's executable sources and say what works here.")
def tools_vet(
    config: Optional[str] = ConfigOption,
    overrides: Optional[list[str]] = SetOption,
    source: Optional[list[str]] = typer.Option(None, "--source", metavar="NAME", help="Vet only this source (repeatable; default: every executable source)."),
    out: Optional[str] = typer.Option(None, "--out", "-o", metavar="FILE", help="Write the sources' cards here as JSON."),
    attempts: int = typer.Option(3, "--attempts", min=1, max=20, help="Argument sets tried per tool and round before it counts as failing."),
    timeout: float = typer.Option(300.0, "--timeout", min=1.0, metavar="SECONDS", help="Wall time one source's vetting may take."),
) -> None:
    """Start each executable source as a dialogue would, call each of its tools with arguments
    that fit its parameters, and report which tools work here, need the network or credentials,
    or error on every probe; whether they answer the same twice and change the state."""
    import asyncio

    from toolfactory.executable.registry import environments
    from toolfactory.executable.vetting import WORKS, vet

    resolved = _config(config, overrides)
    found = environments(resolved.tools)
    unknown = [name for name in source or [] if name not in found]
    if unknown:
        _error(f"--source: no executable source {unknown[0]!r} in tools.mcp or tools.environments"
               + (f" (there are: {', '.join(sorted(found))})" if found else " (the configuration names none)"))
        raise typer.Exit(2)
    chosen = [found[name] for name in (source or sorted(found))]
    if not chosen:
        _error("the configuration names no executable source (tools.mcp, tools.environments)")
        raise typer.Exit(2)
    cards = []
    for environment in chosen:
        card = asyncio.run(vet(environment, attempts, timeout))
        cards.append(card.to_dict())
        if card.failure:
            typer.echo(f"{card.source}: not vetted: {card.failure}")
            continue
        works = card.working()
        typer.echo(f"{card.source}: {len(works)} of {len(card.tools)} tools work here, {len(card.admitted())} admitted; "
                   f"start {card.start_seconds:.2f} s, "
                   f"median call {(card.call_seconds or 0) * 1000:.0f} ms, memory {card.memory_mb or 0:.0f} MB")
        if card.error_convention:
            typer.echo(f"  unflagged errors: {card.error_convention.describe()}")
        for tool in card.tools:
            traits = [tool.status + (" (refused the probes: admitted)" if tool.admitted and tool.status != WORKS
                                     else " (refused the probes)" if tool.refused else "")]
            if tool.status == WORKS:
                traits.append("deterministic" if tool.deterministic else "not deterministic")
            if tool.changes_state is not None:
                traits.append("changes state" if tool.changes_state else "read-only")
            if tool.hint_honest is False:
                traits.append("says read-only but changed the state")
            typer.echo(f"  {tool.name}: {', '.join(traits)} ({tool.probes} probe{'s' if tool.probes != 1 else ''})"
                       + ("" if tool.status == WORKS else f": {tool.answer[:100]}"))
    if out:
        Path(out).write_text(json.dumps({"version": 1, "sources": cards}, indent=1, ensure_ascii=False, default=str))
        typer.echo(f"wrote {out}")
    if any(card["failure"] for card in cards):
        raise typer.Exit(1)


def _import_mcp(
    path: str | None, command: str | None, url: str | None, name: str | None, env: list[str], headers: list[str]
) -> tuple[str, Any]:
    """The tools of one MCP server, checked as the tools stage checks them."""
    import asyncio
    import re
    import shlex

    import yaml
    from pydantic import ValidationError

    from toolfactory.config import yaml_problem
    from toolfactory.executable.mcp import McpEnvironment, McpSourceSettings
    from toolfactory.executable.session import ExecutionFailed
    from toolfactory.stages.base import StageOutput
    from toolfactory.definitions.validity import definition_problems

    def pairs(values: list[str], option: str) -> dict[str, str]:
        found: dict[str, str] = {}
        for value in values:
            key, sep, rest = value.partition("=")
            if not sep or not key:
                raise ConfigError(f"{option} {value!r}: expected NAME=VALUE")
            found[key] = rest
        return found

    try:
        if path is not None:
            if command or url or env or headers:
                raise ConfigError("give either a file holding one tools.mcp entry or --command/--url, not both")
            try:
                fields = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
            except OSError as exc:
                raise ConfigError(f"{path}: {exc.strerror or exc}") from None
            except UnicodeDecodeError:
                raise ConfigError(f"{path}: not UTF-8 text: expected a YAML or JSON file holding one tools.mcp entry") from None
            except yaml.YAMLError as exc:
                raise ConfigError(f"{path} is not valid YAML: {yaml_problem(exc)}") from None
            if not isinstance(fields, dict):
                raise ConfigError(f"{path}: expected a mapping holding one tools.mcp entry")
            if name:
                fields["name"] = name
        else:
            if (command is None) == (url is None):
                raise ConfigError("--format mcp needs a file holding one tools.mcp entry, or exactly one of --command and --url")
            argv = shlex.split(command) if command else []
            # `mcp-server-time --local-timezone UTC` → mcp-server-time; after a launcher, its first
            # word: `uvx mcp-server-time` → mcp-server-time, `npx -y @scope/server-memory` → server-memory.
            words = argv
            if argv and re.match(r"^(python[0-9.]*|node|uvx|uv|npx|bunx|deno|pipx)$", Path(argv[0]).name):
                words = [word for word in argv[1:] if not word.startswith("-")] or argv
            default = _program_name(words[0]) if argv else re.sub(r"^https?://", "", url or "").split("/")[0]
            fields = {"name": name or re.sub(r"[^A-Za-z0-9_.-]+", "-", default).strip("-.")[:64] or "mcp"}
            if argv:
                fields.update(command=argv[0], args=argv[1:], env=pairs(env, "--env"))
            else:
                fields.update(url=url, headers_from_env=pairs(headers, "--header-from-env"))
        settings = McpSourceSettings.model_validate(fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "entry"
        typer.echo(f"error: {path or 'tools.mcp'}: {where}: {error['msg']}", err=True)
        raise typer.Exit(2) from None
    except ConfigError as exc:
        _error(exc)
        raise typer.Exit(2) from None
    try:
        tools = asyncio.run(McpEnvironment(settings).list_tools())
    except ExecutionFailed as exc:
        _error(exc)
        raise typer.Exit(1) from None
    result = StageOutput(items_in=len(tools))
    for tool in tools:
        problems = definition_problems(tool)
        if problems:
            detail = "; ".join(message for _, message in problems)
            result.reject("tools", tool.id, sorted({code for code, _ in problems}), tool.model_dump(), detail)
        else:
            result.records.append(tool)
    return f"MCP source {settings.name}", result


@app.command(short_help="Check an existing dataset and write a report.")
def verify(
    path: str = typer.Argument(..., metavar="PATH", help="A dataset file or folder to check (a folder: its files of the format)."),
    fmt: str = typer.Option(..., "--format", "-f", metavar="FORMAT", help=f"{named(FORMATS)}."),
    out: str = typer.Option("verify-report", "--out", "-o", metavar="DIR", help="Folder for report.json, report.md, rejected.jsonl."),
    disable: Optional[list[str]] = typer.Option(None, "--disable", metavar="CODE", help="A rule code to skip (repeatable)."),
    policy: Optional[str] = typer.Option(None, "--policy", metavar="RECIPE", help="A recipe's filters for every record: toolalpaca, toolllm or "
                                         "toolace; none: validity only. Default: an export's own, each record's recipe's (its PROVENANCE.md), "
                                         "else none."),
    max_depth: Optional[int] = typer.Option(None, "--max-depth", min=1, max=200, metavar="N", help="Deeper records are rejected as "
                                            "record_too_deep (at most 200; default: an export's, else 64)."),
    max_record_chars: Optional[int] = typer.Option(None, "--max-record-chars", min=1, metavar="N", help="Larger records are "
                                                   "record_too_large (default: an export's, else 2000000)."),
    workers: int = typer.Option(0, "--workers", min=0, metavar="N", help="Processes that check a JSONL file (openai, sharegpt, xlam); 0: all cores."),
    paths: Optional[str] = typer.Option(None, "--paths", metavar="released|all", help="toolbench: 'released' (the winning path, default) or 'all' (every path of the search tree)."),
    live: bool = typer.Option(False, "--live", help="Replay the calls that ran on executable sources for real (BFCL environments "
                              "the records name, the run's MCP servers and environments from --config); fails naming a source that "
                              "cannot start. Default: check them from the record, running nothing."),
    config: Optional[str] = typer.Option(None, "--config", "-c", metavar="FILE", help="The run's YAML config: its tools.mcp and "
                                         "tools.environments are the sources --live replays on (and, from the record, "
                                         "their error conventions and deterministic tools)."),
    overrides: Optional[list[str]] = SetOption,
) -> None:
    """Check an existing dataset with the rule layer and write a report: validity, and the policy
    of --policy, or of each record's recipe in an export of the factory (its PROVENANCE.md says
    how the run verified each record). Records whose calls ran on executable sources are checked
    by the execution layer: from the record by default (nothing runs, so a dataset whose servers
    are gone can be checked), replayed for real with --live."""
    from toolfactory.stages.verify.execution import SourceUnavailable
    from toolfactory.stages.verify.export_policy import ExportPolicy, find
    from toolfactory.stages.verify.limits import DEFAULT, Limits
    from toolfactory.stages.verify.report import policy_line, policy_named, verify_file

    _check_out(out)
    tools = _config(config, overrides).tools if config or overrides else None
    try:
        if policy is not None:
            chosen: Any = policy_named(policy)
            source = f"--policy {policy}"
        else:
            chosen, source = find(path, fmt)
        base = chosen.limits if isinstance(chosen, ExportPolicy) else DEFAULT
        limits = Limits(base.max_depth if max_depth is None else max_depth, base.max_chars if max_record_chars is None else max_record_chars)
        report = verify_file(path, fmt, out, frozenset(disable or ()), chosen, limits, paths, workers or os.cpu_count() or 1,
                             policy_source=source or None, execution="live" if live else "record", tools=tools)
    except SourceUnavailable as exc:
        hint = "" if tools is not None else " (a run's MCP servers and environments come from its configuration: --config FILE)"
        _error(TerminalError(f"{exc}{hint}"))
        raise typer.Exit(2) from None
    except (ConfigError, TerminalError) as exc:
        _error(exc)
        raise typer.Exit(2) from None
    typer.echo(
        f"{path}: {report['records']} records, {report['parsed']} parsed, {report['accepted']} accepted, "
        f"{report['rejected']} rejected (pass rate {report['pass_rate']:.1%}); report in {out}/report.md"
    )
    typer.echo(f"policy: {policy_line(report)}")
    for name, counts in report["execution"]["sources"].items():
        typer.echo(f"executed calls of {name}: {counts['live']} records replayed live, {counts['from_record']} checked "
                   f"from the record, {counts['drifted']} drifted")
    for code, count in list(report["rules"].items())[:5]:
        typer.echo(f"  {code}: {count}")


@app.command("eval", short_help="ToolEval: pass rate and win rate of solution paths.")
def evaluate(
    path: str = typer.Argument(..., metavar="PATH", help="A file of solution paths."),
    fmt: str = typer.Option(..., "--format", "-f", metavar="FORMAT", help="toolfactory, openai, toolbench, xlam or toolalpaca."),
    against: Optional[str] = typer.Option(None, metavar="PATH", help="Paths to compare with, for the win rate."),
    against_format: Optional[str] = typer.Option(None, metavar="FORMAT", help="Format of --against (default: --format)."),
    votes: int = typer.Option(4, metavar="N", help="Judge votes per decision, at least 4 (ToolEval A.5)."),
    out: str = typer.Option("eval-report", "--out", "-o", metavar="DIR", help="Folder for eval.json."),
    config: Optional[str] = ConfigOption,
    overrides: Optional[list[str]] = SetOption,
) -> None:
    """ToolEval: pass rate of solution paths and, with --against, win rate (judge: the `judge` role)."""
    from toolfactory.evaluation.run import evaluate as run_eval
    from toolfactory.evaluation.run import read_paths, write_report
    from toolfactory.evaluation.tooleval import check_votes

    try:
        check_votes(votes)
    except ValueError as exc:
        _error(exc)
        raise typer.Exit(2) from None
    resolved = _config(config, overrides)
    _check_out(out)
    try:
        paths, errors = read_paths(path, fmt)
        others = read_paths(against, against_format or fmt)[0] if against else None
    except (ConfigError, TerminalError) as exc:
        _error(exc)
        raise typer.Exit(2) from None

    report = _with_gateway(resolved, lambda gateway: run_eval(paths, gateway, votes, others))
    report["format_errors"] = len(errors)
    target = write_report(report, out)
    typer.echo(f"pass rate {report['pass']['pass_rate']} over {report['pass']['paths']} paths ({len(errors)} unreadable)")
    if "win" in report:
        win = report["win"]
        typer.echo(f"win rate {win['win_rate']} over {win['pairs']} pairs ({win['by_pass_label']} decided by pass labels, "
                   f"{win['not_compared']} not compared: a path unsure; {win['unpaired']} unpaired)")
    typer.echo(f"report: {target}")


@app.command(short_help="Write a run's dataset in a trainer's format, split.")
def export(
    run_id: str = typer.Argument(..., metavar="RUN_ID", help="The run whose accepted dialogues to export."),
    fmt: str = typer.Option(..., "--format", "-f", metavar="FORMAT", help="openai, sharegpt, toolbench, toolalpaca, xlam, bfcl, hf, tasks, "
                       "trl_preference or llamafactory_ranking (pairs: export.preference in the config)."),
    out: str = typer.Option(..., "--out", "-o", metavar="DIR", help="Output folder (local or s3://)."),
    by: str = typer.Option("tool", "--by", metavar="tool|category", help="Split by unseen tools (tool) or unseen categories (category)."),
    train: float = typer.Option(0.8, "--train", metavar="SHARE", help="Share of the records in the train split."),
    validation: float = typer.Option(0.1, "--validation", metavar="SHARE", help="Share of the records in the validation split."),
    test: float = typer.Option(0.1, "--test", metavar="SHARE", help="Share of the records in the test split."),
    include_reasoning: bool = typer.Option(False, "--include-reasoning", help="Keep the assistant's thinking."),
    call_format: str = typer.Option("openai", "--call-format", metavar="FORMAT", help="openai: native tool_calls; json, python, react, xml: "
                                    "calls as text with the tools in the system prompt (openai format); mixed: one per record."),
    tool_format: str = typer.Option("json", "--tool-format", metavar="FORMAT", help="With a text call format: json, yaml, xml, markdown, natural or mixed."),
    subset: Optional[str] = typer.Option(None, "--subset", metavar="KIND=LEVEL", help="Only a curation subset: complexity=easy|medium|hard or diversity=low|medium|high."),
    out_endpoint_url: Optional[str] = typer.Option(None, "--out-endpoint-url", metavar="URL", help="S3 endpoint of an s3:// --out (default: storage.endpoint_url)."),
    out_region: Optional[str] = typer.Option(None, "--out-region", metavar="REGION", help="S3 region of an s3:// --out (default: storage.region)."),
    config: Optional[str] = ConfigOption,
    overrides: Optional[list[str]] = SetOption,
) -> None:
    """Write a run's accepted dialogues in a trainer's format, split train / validation / test."""
    from toolfactory.export import ExportOptions, OutputDir, SplitSpec, export_run
    from toolfactory.storage import ObjectStore

    resolved = _config(config, overrides)
    _check_out(out)
    try:
        splits = SplitSpec(train=train, validation=validation, test=test, by=by)  # type: ignore[arg-type]
        # An s3:// destination is most often the run's own S3 (MinIO, a region): its settings apply.
        out_dir: str | OutputDir = out if not out.startswith("s3://") else OutputDir(
            out, endpoint_url=out_endpoint_url or resolved.storage.endpoint_url,
            region=out_region or resolved.storage.region, storage=resolved.storage)
        summary = export_run(ObjectStore.open(resolved.storage), run_id, fmt, out_dir, splits=splits,
                             seed=resolved.run.seed or 0,
                             options=ExportOptions(include_reasoning=include_reasoning, call_format=call_format,
                                                   tool_format=tool_format, subset=subset,
                                                   preference=resolved.export.preference))
    except (ConfigError, TerminalError, ValueError) as exc:
        _error(exc)
        raise typer.Exit(2) from None
    counts = ", ".join(f"{split} {n}" for split, n in summary["splits"].items())
    typer.echo(f"{summary['exported']} of {summary['records']} records exported as {fmt} to {out} ({counts})")
    for reason, count in summary["skipped"].items():
        typer.echo(f"  skipped {count}: {reason}")


@app.command(short_help="(Re)build a run's HTML report.")
def report(
    run_id: Optional[str] = typer.Argument(None, metavar="RUN_ID", help="Run id (default: the latest run)."),
    config: Optional[str] = ConfigOption,
    overrides: Optional[list[str]] = SetOption,
) -> None:
    """(Re)build a run's HTML report with its charts, next to the run's shards."""
    from toolfactory.report import build_report
    from toolfactory.run.stats import StatsDB
    from toolfactory.run.stats_sync import sync_stats
    from toolfactory.storage import ObjectStore

    resolved = _config(config, overrides)
    db = StatsDB(resolved.stats_path())
    store = ObjectStore.open(resolved.storage)
    if run_id is None:
        run_id = sync_stats(store, db).run_id
    if run_id is None:
        typer.echo(f"error: no run recorded in {store.url} (stats cache {db.path})", err=True)
        raise typer.Exit(2)
    try:
        built = build_report(store, str(db.path), run_id)  # brings the stats up to date first
    except TerminalError as exc:
        _error(exc)
        raise typer.Exit(2) from None
    _print_problems(built["problems"])
    typer.echo(f"report: {built['uri']}")


@app.command(short_help="API retriever data and its NDCG (ToolLLM §3.1).")
def retriever(
    run_id: str = typer.Argument(..., metavar="RUN_ID", help="The run whose instructions and APIs to use."),
    out: str = typer.Option("retriever", "--out", "-o", metavar="DIR", help="Folder for corpus.tsv, queries, qrels and the report."),
    all_tasks: bool = typer.Option(False, "--all-tasks", help="Use every task, not only those whose dialogue was accepted."),
    embeddings: bool = typer.Option(True, "--embeddings/--no-embeddings", help="Also evaluate embedding retrieval."),
    config: Optional[str] = ConfigOption,
    overrides: Optional[list[str]] = SetOption,
) -> None:
    """API retriever data in ToolBench's layout, with BM25 and embedding NDCG@1/@5 (ToolLLM §3.1)."""
    from toolfactory.retrieval import retriever_export
    from toolfactory.storage import ObjectStore

    resolved = _config(config, overrides)
    _check_out(out)
    store = ObjectStore.open(resolved.storage)
    report = _with_gateway(resolved, lambda gateway: retriever_export(
        store, run_id, out, gateway=gateway if embeddings else None, seed=resolved.run.seed or 0,
        embedding_model=resolved.llm.embedding_model, all_tasks=all_tasks,
    ))
    typer.echo(f"retriever data and report in {out}/ ({json.dumps(report.get('stats', {}))})")


def _with_gateway(resolved: Any, work: Any) -> Any:
    """Run `work(gateway)` against the configured endpoint (the simulator is started if it is the
    provider), with the run's request cache."""
    import asyncio

    from flows.runtime import llm_endpoint
    from toolfactory.llm import LLMGateway, RequestCache, resolve_endpoint
    from toolfactory.storage import ObjectStore

    async def go(base_url: str | None) -> Any:
        cache = RequestCache(ObjectStore.open(resolved.storage))
        async with LLMGateway(resolve_endpoint(resolved.llm, base_url), resolved.llm, cache) as gateway:
            return await work(gateway)

    with llm_endpoint(resolved) as base_url:
        return asyncio.run(go(base_url))


@simulator_app.command(
    "serve", context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
)
def simulator_serve(ctx: typer.Context) -> None:
    """Serve the simulator over HTTP (flags: see `toolfactory simulator serve --help`).

    `--config FILE` and `--set llm.simulator.…=…` start it with a run config's `llm.simulator`
    settings (as `run` would, environment variables included), so a simulator served apart — the
    compose stack's — behaves like the one a run starts; flags given after them win. The simulator
    is a program of its own: this command becomes it (exec), as a run starts it as a process."""
    from toolfactory.llm.simulator_process import child_env, simulator_command

    rest, config_path, overrides = _config_arguments(list(ctx.args))
    settings = _config(config_path, overrides).llm.simulator if config_path is not None or overrides else {}
    command = simulator_command(settings, "llm.simulator", rest, prog="toolfactory simulator",
                                epilog="--config FILE and --set llm.simulator.FIELD=VALUE start it with a run config's "
                                       "llm.simulator settings (environment variables included), as `run` would; "
                                       "flags given after them win.")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(command[0], command, child_env())


def _config_arguments(args: list[str]) -> tuple[list[str], str | None, list[str]]:
    """(the other arguments, `--config`'s value, `--set`'s values) of a pass-through command line."""
    rest: list[str] = []
    config_path, overrides = None, []
    items = iter(args)
    for arg in items:
        name, eq, value = arg.partition("=")
        if name in ("--config", "-c", "--set", "-s"):
            value = value if eq else next(items, "")
            if name in ("--config", "-c"):
                config_path = value
            else:
                overrides.append(value)
        else:
            rest.append(arg)
    return rest, config_path, overrides


def _click_errors() -> tuple[type[Exception], tuple[type[Exception], ...]]:
    """Click's base class of the errors it reports to the user, and the error that stands for
    "no command given: show the help" (from the copy of click that typer uses)."""
    try:
        from typer._click import exceptions
    except ImportError:  # typer before it shipped its own copy of click
        from click import exceptions  # type: ignore[no-redef]
    no_command = getattr(exceptions, "NoArgsIsHelpError", None)
    return exceptions.ClickException, (no_command,) if no_command is not None else ()


def main() -> None:
    """Every error is one line on stderr: exit 2 for bad input (config, arguments, paths), 1 for
    anything else; `--debug`, anywhere on the line, shows the traceback instead."""
    debug = "--debug" in sys.argv[1:]
    if debug:
        sys.argv.remove("--debug")
    # SIGTERM (an orchestrator stopping us) unwinds like Ctrl-C: servers, simulator and Ray stop.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    usage_errors, help_errors = _click_errors()
    try:
        # Not standalone: click would print a usage error as a usage block and a boxed message.
        code = app(prog_name="toolfactory", standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except help_errors as exc:  # no command given: the help, as standalone click shows it
        exc.show()
        sys.exit(exc.exit_code)
    except usage_errors as exc:
        context = getattr(exc, "ctx", None)
        hint = f" (see `{context.command_path} --help`)" if context is not None else ""
        _error(exc.format_message().rstrip(".") + hint)
        sys.exit(exc.exit_code)
    except typer.Abort:
        _error("aborted")
        sys.exit(1)
    except Exception as exc:
        if debug:
            raise
        from toolfactory.storage import disk_full

        if disk_full(exc):  # a full disk is the operator's to fix, not a fault to trace
            from toolfactory.run.outcome import full_disk_line

            _error(f"{full_disk_line(exc)}: free some, then run the command again")
            sys.exit(1)
        bad_input = isinstance(exc, (ConfigError, TerminalError, FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError))
        _error(f"{type(exc).__name__}: {exc}" + ("" if bad_input else " (run again with --debug for the traceback)"))
        sys.exit(2 if bad_input else 1)
    finally:
        # Free what still holds Arrow's threads while Arrow is alive: freed during interpreter
        # shutdown instead, they can abort a finished command ("terminate called without an
        # active exception", apache/arrow#34314; seen once at the end of an `export`).
        gc.collect()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
