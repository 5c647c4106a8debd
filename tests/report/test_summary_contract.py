"""The run summary as one typed contract: the stats build it from a stored run, the command line's
`stats` and the report render it, and its JSON object keeps the shape stored runs and scripts read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolfactory.cli import _print_summary
from toolfactory.report.data import DialogueMix, run_stats
from toolfactory.report.page import render_page
from toolfactory.report.sections import sections
from toolfactory.run.record import STAGE_TOTALS, run_record
from toolfactory.run.stats import StatsDB
from toolfactory.run.summary import RunSummary, StageSummary
from toolfactory.stages import STAGE_NAMES

from .helpers import RUN

# The keys of `toolfactory stats --json` and of a run flow's result, as they were before the summary was typed.
RUN_KEYS = ["run_id", "status", "per_accepted", "started_at", "finished_at", "wall_s", "attempts", "last_attempt", "reason",
            "message", "made_by", "simulated", "cost_usd", "cost_by_role", "stages"]
STAGE_KEYS = ["stage", "shards_total", "shards_completed", "shards_failed", "items_in", "items_out", "rejected", "llm_calls",
              "cache_hits", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "cost_usd", "wall_s", "pass_rate",
              "rejections", "layers", "profile", "missing_inputs", "failed_shards"]


def test_a_stored_runs_summary_renders_as_cli_stats_and_as_the_report(stats_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = StatsDB(stats_path).run_summary(RUN, STAGE_NAMES)
    assert isinstance(summary, RunSummary) and summary.status == "failed"

    _print_summary(summary)  # every field the command line reads is one the stats provide
    out = capsys.readouterr().out
    assert out.startswith(f"run {RUN}: failed\n")
    assert "verify funnel: generated 18 -> rules-passed 16 -> model-passed 14 -> accepted 14" in out
    assert "  dialogues shard 1 failed: 2 of 18 records failed on transient LLM errors" in out

    stats = run_stats(summary, {})  # and every field the report reads
    parts = sections(stats, DialogueMix())
    page = render_page(f"toolfactory run {RUN}", {"run": RUN}, parts, None)
    verify = stats.stage("verify")
    assert verify is not None and (verify.items_in, verify.items_out, [layer.name for layer in verify.layers]) == (
        18, 14, ["rules", "model"])
    assert "failed" in page and "call_unknown_function" in page


def test_the_summary_json_keeps_its_keys_and_reads_back(stats_path: Path) -> None:
    summary = StatsDB(stats_path).run_summary(RUN, STAGE_NAMES)
    data = json.loads(json.dumps(summary.to_dict()))
    assert list(data) == RUN_KEYS and "rerun" not in data  # only a run that ended with shards to re-run has one
    assert all(list(stage) == STAGE_KEYS for stage in data["stages"])
    verify = next(stage for stage in data["stages"] if stage["stage"] == "verify")
    assert verify["layers"]["rules"] == {"in": 18, "passed": 16, "pass_rate": 0.8889}
    assert RunSummary.from_dict(data) == summary
    ended = summary.ended("toolfactory rerun r", "finish it")
    assert ended.to_dict()["rerun"] == "toolfactory rerun r" and RunSummary.from_dict(ended.to_dict()) == ended


def test_the_run_record_totals_are_fields_of_a_stage(stats_path: Path) -> None:
    assert set(STAGE_TOTALS) <= set(StageSummary.model_fields)
    record = run_record(StatsDB(stats_path), RUN, STAGE_NAMES)
    assert record is not None
    assert [stage["stage"] for stage in record["stages"]] == list(STAGE_NAMES[: STAGE_NAMES.index("verify") + 1])


def test_a_reader_of_a_field_the_summary_lacks_fails_where_it_reads(stats_path: Path) -> None:
    summary = StatsDB(stats_path).run_summary(RUN, STAGE_NAMES)
    with pytest.raises(AttributeError, match="accepted_records"):
        summary.accepted_records  # type: ignore[attr-defined]  # noqa: B018
