"""Run floors (`run.min_accepted`, `run.min_pass_rate`) and how a failed run is reported."""

from __future__ import annotations

from typing import Any

import pytest
import typer

from toolfactory.cli import _finish
from toolfactory.config import load_config
from toolfactory.errors import ConfigError
from toolfactory.run.floors import below_floors
from toolfactory.run.outcome import failure_message
from toolfactory.run.summary import RunSummary


def summary(**outs: tuple[int, float | None]) -> RunSummary:
    return RunSummary.from_dict(fields(**outs))


def fields(**outs: tuple[int, float | None]) -> dict[str, Any]:
    return {"run_id": "r1", "status": "completed", "reason": None, "stages": [
        {"stage": stage, "shards_total": 1, "shards_failed": 0, "items_in": out, "items_out": out, "pass_rate": rate,
         "llm_calls": 0, "cache_hits": 0, "rejections": {}, "failed_shards": []} for stage, (out, rate) in outs.items()]}


def run_config(*overrides: str) -> Any:
    return load_config(None, list(overrides), environ={}).run


def test_an_empty_dataset_is_below_the_default_floor() -> None:
    assert below_floors(run_config(), summary(verify=(0, 0.0), curate=(0, None))) == [
        "run.min_accepted: the dataset holds 0 accepted dialogue(s), fewer than 1"]
    assert below_floors(run_config(), summary(curate=(1, 1.0))) == []
    assert below_floors(run_config("run.min_accepted=0"), summary(curate=(0, None))) == []


def test_a_stage_below_its_pass_rate_floor() -> None:
    config = run_config("run.min_pass_rate={verify: 0.5, domains: 0.9}")
    assert below_floors(config, summary(verify=(4, 0.4), curate=(4, 1.0))) == [
        "run.min_pass_rate.verify: the verify stage kept 40.0% of its records, below 50.0%"]
    assert below_floors(config, summary(verify=(5, 0.5), curate=(5, 1.0))) == []  # a stage that did not run has no rate


def test_pass_rate_floors_are_fractions_of_known_stages() -> None:
    with pytest.raises(ConfigError, match="run.min_pass_rate"):
        run_config("run.min_pass_rate={verify: 1.5}")
    with pytest.raises(ConfigError, match="run.min_pass_rate.judging"):
        run_config("run.min_pass_rate={judging: 0.5}")


def test_a_run_below_a_floor_is_one_message_without_a_rerun(capsys: pytest.CaptureFixture[str]) -> None:
    failed = summary(curate=(0, None)).model_copy(update={"status": "failed", "reason": "run.min_accepted: the dataset holds 0"})
    assert failure_message(failed, "") == "run r1 failed: run.min_accepted: the dataset holds 0"
    with pytest.raises(typer.Exit) as exit_:
        _finish(failed)
    assert exit_.value.exit_code == 1
    assert capsys.readouterr().err.strip() == "error: run r1 failed: run.min_accepted: the dataset holds 0"


def test_a_stopped_run_says_why_and_how_to_finish(capsys: pytest.CaptureFixture[str]) -> None:
    data = {**fields(tasks=(0, None)), "status": "failed", "reason": "llm.roles.user (model 'm'): refused",
            "rerun": "toolfactory rerun r1 --set storage.root=/data"}
    data["stages"][0]["failed_shards"] = [{"shard": 0, "status": "failed", "error": "EndpointRefused"}]
    stopped = RunSummary.from_dict(data)
    assert failure_message(stopped, stopped.rerun or "").startswith("run r1 failed: llm.roles.user (model 'm'): refused. 1 shard(s)")
    with pytest.raises(typer.Exit):
        _finish(stopped)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "error: run r1 failed: llm.roles.user (model 'm'): refused" and "toolfactory rerun r1" in err[1]
