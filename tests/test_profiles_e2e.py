"""Preflight's choices through a whole run and its re-run, and what ends a run failed. A run
against a reasoning model records the modes its preflight chose (`max_completion_tokens`, no
temperature) in its manifest, its shards send them, and a re-run sends what its run chose. Then
an endpoint that refuses one kind of request again and again, and a dataset below
`run.min_accepted`. Each profile's choices and dialogues at the stage level: tests/test_profiles.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import small_run_overrides
from test_profiles import assert_chosen, assert_clean_dialogues_of_every_recipe, profile_overrides
from toolfactory.config import StorageConfig
from toolfactory.models import Dialogue
from toolfactory.storage.shards import read_records
from toolfactory.storage import ObjectStore

pytestmark = pytest.mark.e2e


@pytest.fixture
def runtime(prefect_api: str, ray_cluster: None, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-profiles")
    return prefect_api


def generate_state(overrides: list[str]) -> Any:
    from flows.generate import generate as generate_flow

    return generate_flow(config_path=None, overrides=overrides, return_state=True)


@pytest.fixture(scope="module")
def reasoning_run(prefect_api: str, ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The storage root and summary of a run against the reasoning profile, everything else
    `auto`: read by its own test and again by its re-run's."""
    root = tmp_path_factory.mktemp("reasoning") / "data"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_API_KEY", "sk-profiles")  # in the environment of the run, as `runtime` sets it
        return root, generate_state(profile_overrides(root, "reasoning")).result()


def manifest_of(root: Path, run_id: str) -> dict[str, Any]:
    return json.loads((root / "runs" / run_id / "manifest.json").read_text())


def test_a_run_against_a_reasoning_model_records_and_sends_what_its_preflight_chose(reasoning_run: Any) -> None:
    root, summary = reasoning_run
    assert summary["status"] == "completed", summary
    assert_chosen(manifest_of(root, summary["run_id"])["preflight"], "reasoning")
    store = ObjectStore.open(StorageConfig(root=str(root)))
    accepted = [Dialogue.model_validate(r) for r in read_records(store, f"runs/{summary['run_id']}/curate/part-00000.parquet")]
    assert_clean_dialogues_of_every_recipe(accepted)


def test_a_rerun_against_a_reasoning_model_sends_what_its_run_chose(reasoning_run: Any) -> None:
    root, first = reasoning_run
    assert first["status"] == "completed", first
    run_id = first["run_id"]
    (root / "runs" / run_id / "dialogues" / "part-00000.parquet").unlink()
    from flows.rerun import rerun

    # Its preflight sends the recorded parameters (the configured ones would be refused), and so
    # does the shard: every answer comes from the cache, keyed by the requests the run sent.
    second = rerun(run_id=run_id, overrides=[f"storage.root={root}"])
    assert second["status"] == "completed", second
    before = {s["stage"]: s for s in first["stages"]}["dialogues"]
    after = {s["stage"]: s for s in second["stages"]}["dialogues"]
    assert after["cache_hits"] > before["cache_hits"] and after["llm_calls"] == before["llm_calls"]  # none paid again


def test_a_400_storm_ends_the_run_failed_with_one_message(runtime: str, tmp_path: Path) -> None:
    root = tmp_path / "data"
    # A constrained decoder without `minItems`: preflight's schema passes, the tasks' schemas do not.
    state = generate_state(small_run_overrides(root, **{
        "llm.simulator.refused_schema_keywords": "minItems", "llm.max_repeated_refusals": 1, "tools.max_tools": 4,
    }))
    assert state.is_failed()
    from flows.execute import summary_of

    summary = summary_of(state)
    reason = summary["reason"]
    assert reason.startswith("llm.roles.user (model 'sim-small'): the endpoint refused 2 requests of the same shape")
    assert "response_format json_schema" in reason and "not supported by xgrammar: 'minItems'" in reason
    assert summary["status"] == "failed" and reason in state.message
    assert [s["stage"] for s in summary["stages"]] == ["tools", "pool", "tasks"]  # later stages never started
    with duckdb.connect(str(root / "stats.duckdb"), read_only=True) as con:
        assert con.execute("SELECT status, reason FROM runs").fetchall() == [("failed", reason)]
        # Not retried by the task (orchestration.task_retries is 2): the same request, the same answer.
        assert con.execute("SELECT status, attempts FROM shards WHERE stage = 'tasks'").fetchall() == [("failed", 1)]
    assert not (root / "runs" / summary["run_id"] / "export").exists()


def test_a_run_below_min_accepted_ends_failed_and_is_not_exported(runtime: str, tmp_path: Path) -> None:
    root = tmp_path / "data"
    state = generate_state(small_run_overrides(root, **{"run.min_accepted": 1000, "tools.max_tools": 4, "verify.judges": "[]"}))
    assert state.is_failed()
    from flows.execute import summary_of

    summary = summary_of(state)
    accepted = next(s for s in summary["stages"] if s["stage"] == "curate")["items_out"]
    assert 0 < accepted < 1000 and all(s["shards_failed"] == 0 for s in summary["stages"])
    assert summary["reason"] == f"run.min_accepted: the dataset holds {accepted} accepted dialogue(s), fewer than 1000"
    assert state.message == f"run {summary['run_id']} failed: {summary['reason']}" and "rerun" not in summary
    with duckdb.connect(str(root / "stats.duckdb"), read_only=True) as con:
        assert con.execute("SELECT status, reason FROM runs").fetchall() == [("failed", summary["reason"])]
    assert not (root / "runs" / summary["run_id"] / "export").exists()
    assert (root / "runs" / summary["run_id"] / "curate" / "part-00000.parquet").exists()  # kept, for `export`
