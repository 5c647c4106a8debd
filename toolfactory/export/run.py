"""Export a run's dataset (its ``curate`` shards, see :func:`toolfactory.storage.shards.dataset_parts`) in one
format, split by tool or category.

Streaming, shard by shard: one shard's records are read, each is validated, given its split
(:mod:`toolfactory.export.splits`) and handed to the format's exporter, which writes it out at
once; then the next shard. Memory depends on the size of a shard, not on the number of records.
Output order is shard order, then row order: the same run exports to the same files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import ValidationError

from toolfactory.errors import ConfigError, RunNotFound
from toolfactory.executable.mcp.settings import McpSourceSettings
from toolfactory.executable.settings import PythonEnvironmentSettings
from toolfactory.executable.settings import ExecutableSourceSettings
from toolfactory.export.base import INVALID_RECORD, NOT_IN_SUBSET, Exporter, ExportError, ExportOptions, Skip
from toolfactory.export.card import made_by, provenance_note
from toolfactory.export.output import OutputDir
from toolfactory.export.pairs import rejected_attempts
from toolfactory.export.preference import PreferenceExporter
from toolfactory.export.registry import EXPORTERS, FORMATS
from toolfactory.export.splits import SPLITS, SplitSpec, record_split
from toolfactory.export.stats import ExportStats
from toolfactory.config.verify import VerifyConfig
from toolfactory.stages.verify.export_policy import DEFAULTS, NOTE, RUN_CONFIGURATION, ExportPolicy
from toolfactory.stages.verify.limits import Limits
from toolfactory.formats.base import validation_message
from toolfactory.run.integrity import check_parts
from toolfactory.llm.identity import EndpointIdentity
from toolfactory.run.manifest import load_manifest
from toolfactory.models import Dialogue, Tool
from toolfactory.storage.shards import ShardPaths, dataset_parts, read_metrics, read_records, stage_parts
from toolfactory.storage import ObjectStore
from toolfactory.curation.contamination import CHECKED, CONTAMINATED, SETTINGS, SKIPPED
from toolfactory.stages.verify.referee import JUDGED_ALONE, REFEREE


def exporter_class(fmt: str) -> type[Exporter]:
    try:
        return EXPORTERS[fmt]
    except KeyError:
        raise ExportError(f"unknown export format {fmt!r} (formats: {', '.join(FORMATS)})") from None


def run_tools(store: ObjectStore, run_id: str) -> dict[str, Tool]:
    """The run's tool pool by id (empty for a run that kept none: imported dialogues)."""
    tools: dict[str, Tool] = {}
    for path in stage_parts(store, run_id, "pool"):
        for raw in read_records(store, path):
            tool = Tool.model_validate(raw)
            tools[tool.id] = tool
    return tools


def _refuse_damaged(store: ObjectStore, run_id: str, parts: list[str]) -> None:
    """Stop before writing anything when a part to export is damaged, naming it."""
    damaged = check_parts(store, run_id, parts)
    if damaged:
        more = f" and {len(damaged) - 1} more damaged file(s)" if len(damaged) > 1 else ""
        raise ExportError(f"run {run_id!r} cannot be exported: {damaged[0].line(store)}{more}; {_REPAIR.format(run_id=run_id)}")


_REPAIR = "`toolfactory check-run {run_id}` lists the damaged files and `toolfactory rerun {run_id}` rebuilds them"


def _part_records(store: ObjectStore, run_id: str, path: str) -> list[dict[str, Any]]:
    """A part's records; a part of the right size that still does not read is named."""
    try:
        return read_records(store, path)
    except (pa.ArrowException, UnicodeDecodeError, json.JSONDecodeError) as exc:
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise ExportError(f"run {run_id!r} cannot be exported: {store.uri(path)} does not read ({detail}); "
                          f"{_REPAIR.format(run_id=run_id)}") from None


PROVENANCE_FILE = NOTE  # beside every export's files: who made them, how they were verified (export/card.py)


def run_endpoint(store: ObjectStore, run_id: str) -> EndpointIdentity | None:
    """Who answered the run's requests, from its manifest; None for a run without one (imported data)."""
    try:
        return load_manifest(store, run_id).endpoint()
    except RunNotFound:
        return None


def run_sources(store: ObjectStore, run_id: str) -> dict[str, ExecutableSourceSettings]:
    """The executable sources the run's configuration names, by name (none for a run without a
    manifest: imported data). An entry that no longer validates here (a preset whose package is
    not installed where the export runs) stops the export, naming it."""
    try:
        tools = load_manifest(store, run_id).config.get("tools") or {}
    except RunNotFound:
        return {}
    found: dict[str, ExecutableSourceSettings] = {}
    for field, model in (("environments", PythonEnvironmentSettings), ("mcp", McpSourceSettings)):
        for n, entry in enumerate(tools.get(field) or []):
            try:
                settings = model.model_validate(entry)
            except (ValidationError, ConfigError) as exc:
                detail = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
                raise ExportError(f"run {run_id!r}: tools.{field}[{n}] of its configuration: {detail}") from None
            found[settings.name] = settings
    return found


_VERIFY_POLICY = ("disabled_rules", "max_steps", "keep_error_recovery", "max_depth", "max_record_chars")


def export_policy(store: ObjectStore, run_id: str, stats: ExportStats, exporter: Exporter) -> ExportPolicy:
    """How the run's verify stage judged the exported records (its policies, disabled rules and
    limits, from its manifest; the defaults for a run without one) and the recipe of each record
    as the format's reader will name it: what ``PROVENANCE.md`` carries for ``toolfactory verify``."""
    try:
        raw = load_manifest(store, run_id).config.get("verify") or {}
        settings = RUN_CONFIGURATION
    except RunNotFound:
        raw, settings = {}, DEFAULTS
    try:
        verify = VerifyConfig.model_validate({key: raw[key] for key in _VERIFY_POLICY if key in raw})
    except ValidationError as exc:
        raise ExportError(f"run {run_id!r}: verify settings of its configuration: {validation_message(exc)}") from None
    return ExportPolicy.of_run(stats.recipes.elements(), exporter.read_back, exporter.read_as,
                               max_steps={str(k): v for k, v in verify.max_steps.items()},
                               keep_error_recovery=[str(recipe) for recipe in verify.keep_error_recovery],
                               disabled_rules=verify.disabled_rules, limits=Limits(verify.max_depth, verify.max_record_chars),
                               settings=settings)


def stage_profile(store: ObjectStore, run_id: str, dimensions: tuple[str, ...], stage: str = "verify") -> dict[str, dict[str, int]]:
    """Of the stage's committed shards, the profile counts of `dimensions`, summed (the referee's
    figures, what decontamination checked: what every export of the run states alike)."""
    found: dict[str, dict[str, int]] = {dimension: {} for dimension in dimensions}
    main = re.compile(r".*/part-(\d+)\.parquet")
    for path in stage_parts(store, run_id, stage):
        match = main.fullmatch(path)
        metrics = read_metrics(store, ShardPaths(run_id, stage, int(match[1]))) if match else None
        for dimension in dimensions:
            for value, n in ((metrics or {}).get("profile", {}).get(dimension) or {}).items():
                found[dimension][value] = found[dimension].get(value, 0) + int(n)
    return found


def export_run(
    store: ObjectStore,
    run_id: str,
    fmt: str,
    out_dir: str | Path | OutputDir,
    *,
    splits: SplitSpec = SplitSpec(),
    seed: int = 0,
    options: ExportOptions = ExportOptions(),
) -> dict[str, Any]:
    """Write run `run_id`'s accepted records in format `fmt` under `out_dir` (a local folder, an
    ``s3://`` prefix, or an :class:`OutputDir` for an S3 endpoint of its own), one file per split;
    the summary: counts per split and file, skipped records by reason (with examples), and the
    make-up of the export."""
    cls = exporter_class(fmt)
    shards = dataset_parts(store, run_id)
    if not shards:
        raise ExportError(f"run {run_id!r} has no dataset under {store.uri(f'runs/{run_id}/')} (no curate or verify parts)")
    _refuse_damaged(store, run_id, shards + (stage_parts(store, run_id, "pool") if cls.needs_tools else []))
    out = out_dir if isinstance(out_dir, OutputDir) else OutputDir(out_dir)
    exporter = cls(out, SPLITS, options)
    if cls.needs_tools:
        exporter.tools = run_tools(store, run_id)
    if cls.needs_sources:
        exporter.sources = run_sources(store, run_id)
    if isinstance(exporter, PreferenceExporter):
        exporter.attempts = rejected_attempts(store, run_id)
    stats = ExportStats(splits=SPLITS, run_id=run_id, fmt=fmt, split_spec={**splits.to_dict(), "seed": seed},
                        endpoint=run_endpoint(store, run_id))
    judged = stage_profile(store, run_id, (REFEREE, JUDGED_ALONE))
    stats.referee, stats.judged_alone = judged[REFEREE], judged[JUDGED_ALONE]
    stats.decontamination = {**stage_profile(store, run_id, (CHECKED, SKIPPED, SETTINGS), "select"),
                             **stage_profile(store, run_id, (CONTAMINATED,), "curate")}
    try:
        for path in shards:
            for raw in _part_records(store, run_id, path):
                stats.read += 1
                try:
                    dialogue = Dialogue.model_validate(raw)
                except ValidationError as exc:
                    stats.skip(str(raw.get("id", "")), INVALID_RECORD, validation_message(exc))
                    continue
                if not options.selects(dialogue):
                    stats.skip(dialogue.id, NOT_IN_SUBSET, options.subset or "")
                    continue
                split, units = record_split(dialogue, splits, seed)
                try:
                    exporter.write(split, dialogue)
                except Skip as skip:
                    stats.skip(dialogue.id, skip.reason, skip.detail)
                    continue
                stats.add(split, dialogue, units)
        files = exporter.close(stats)
    except BaseException:
        exporter.abort()
        raise
    policy = export_policy(store, run_id, stats, exporter)
    out.write_bytes(PROVENANCE_FILE, provenance_note(stats, files, policy.to_front_matter()).encode())
    return {"run_id": run_id, "format": fmt, "out": out.url, "shards": len(shards),
            "split": stats.split_spec, **stats.summary(), "files": files, "provenance": PROVENANCE_FILE,
            "made_by": made_by(stats)}
