"""A small run against each provider profile of the simulator: the same pipeline makes accepted
dialogues of every recipe from every family's answer shapes. Settings left `auto` are chosen by
the run's preflight (text calls without a tool parser, the schema in the prompt for a plain-text
server, `max_completion_tokens` and no temperature for a reasoning model), and a re-run sends what
its run chose. Then what ends a run failed: an endpoint that refuses one kind of request again
and again, and a dataset below `run.min_accepted`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import small_run_overrides
from toolfactory.config import StorageConfig
from toolfactory.models import Dialogue
from toolfactory.storage.shards import read_records
from toolfactory.storage import ObjectStore

pytestmark = pytest.mark.e2e

# The modes each profile's preflight chooses for the assistant's calls and the user's JSON.
CHOSEN = {
    "openai": ("native", "json_schema"),
    "vllm-hermes": ("native", "json_schema"),
    "vllm-no-tool-parser": ("text", "json_schema"),
    "plain-text": ("text", "prompt"),
    "reasoning": ("native", "json_schema"),
}


@pytest.fixture
def runtime(prefect_api: str, ray_cluster: None, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-profiles")
    return prefect_api


def generate_state(overrides: list[str]) -> Any:
    from flows.generate import generate as generate_flow

    return generate_flow(config_path=None, overrides=overrides, return_state=True)


def run_overrides(root: Path, **extra: Any) -> list[str]:
    return small_run_overrides(root, **{
        # toolllm keeps about half of its instructions (its searches give up, as real ones do), so
        # it anchors more of the tools than the others: a handful of its instructions, not two.
        "tools.max_tools": 6, "tools.tools_per_shard": 6, "tasks.recipes": "{toolalpaca: 1, toolllm: 3, toolace: 1}",
        # toolllm's tool sets of one tool: its multi-tool sets, whose (tool, API) pairs the
        # simulator draws apart, are measured by benchmarks/recipes.py, too few here to count on.
        "tasks.scenarios": "{single_tool: 1}",
        "llm.simulator.obedience": 0.9, "verify.judges": "[]",  # the judges' own answers are shapes like any other
        **extra,
    })


@pytest.fixture(scope="module")
def profile_runs(prefect_api: str, ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """`run(profile)`: the storage root and summary of the module's run against `profile`, made
    once for the tests that read it (the reasoning run is read again by its re-run's test)."""
    made: dict[str, tuple[Path, dict[str, Any]]] = {}

    def run(profile: str) -> tuple[Path, dict[str, Any]]:
        if profile not in made:
            root = tmp_path_factory.mktemp(profile) / "data"
            with pytest.MonkeyPatch.context() as env:
                env.setenv("OPENAI_API_KEY", "sk-profiles")  # in the environment of the run, as `runtime` sets it
                # everything else `auto`
                made[profile] = root, generate_state(run_overrides(root) + [f"llm.simulator.profile={profile}"]).result()
        return made[profile]

    return run


def manifest_of(root: Path, run_id: str) -> dict[str, Any]:
    return json.loads((root / "runs" / run_id / "manifest.json").read_text())


@pytest.mark.parametrize("profile", list(CHOSEN))
def test_a_run_against_each_profile_accepts_dialogues_of_every_recipe(profile_runs: Any, profile: str) -> None:
    root, summary = profile_runs(profile)
    assert summary["status"] == "completed", summary
    preflight = manifest_of(root, summary["run_id"])["preflight"]
    choices = preflight["choices"]
    assert (choices["llm.roles.assistant.tool_calling"], choices["llm.roles.user.structured_output"]) == CHOSEN[profile]
    limit_field = "max_completion_tokens" if profile == "reasoning" else "max_tokens"
    assert {v for k, v in choices.items() if k.endswith(".max_tokens_parameter")} == {limit_field}
    dropped = {k for k, v in choices.items() if k.endswith(".temperature") and v is None}
    checked = {p["role"] for p in preflight["probes"] if p["capability"] == "chat"}
    assert dropped == ({f"llm.roles.{role}.temperature" for role in checked} if profile == "reasoning" else set())
    store = ObjectStore.open(StorageConfig(root=str(root)))
    accepted = [Dialogue.model_validate(r) for r in read_records(store, f"runs/{summary['run_id']}/curate/part-00000.parquet")]
    assert {d.recipe for d in accepted} == {"toolalpaca", "toolllm", "toolace"}
    # Reasoning and call syntax never leak into the training text.
    texts = [m.content or "" for d in accepted for m in d.messages]
    assert not any("<think>" in t or "<tool_call>" in t or "```" in t for t in texts)


def test_a_rerun_against_a_reasoning_model_sends_what_its_run_chose(profile_runs: Any) -> None:
    root, first = profile_runs("reasoning")
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
