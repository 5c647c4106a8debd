"""A run that reaches its LLM budget stops, says so everywhere, and a re-run with a larger budget
finishes it without a duplicate record; its cost is in the stats. The run and its last re-run are
the command line's entry point (exit codes and messages, `toolfactory_here`), against real Prefect
and a real Ray cluster; the re-run in between, whose point is the spent budget, is the flow."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable

import pytest

from conftest import small_run_overrides
from toolfactory.config import load_config
from toolfactory.storage.shards import read_records, read_rejected
from toolfactory.stages import STAGE_NAMES
from toolfactory.run.stats import StatsDB
from toolfactory.storage import ObjectStore

pytestmark = pytest.mark.e2e
ROLES = ("user", "assistant", "tool", "judge", "designer")
RUN_ID = "budget-run"


def sets(overrides: list[str]) -> list[str]:
    return [arg for override in overrides for arg in ("--set", override)]


def test_a_run_stopped_by_its_budget_is_finished_by_a_rerun_with_a_larger_one(
    prefect_api: str, toolfactory_here: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    root = tmp_path / "data"
    prices = {f"llm.roles.{role}.usd_per_million_prompt_tokens": 2 for role in ROLES}
    prices.update({f"llm.roles.{role}.usd_per_million_completion_tokens": 8 for role in ROLES})
    overrides = small_run_overrides(root, **{"llm.budget.tokens": 3000, "tools.max_tools": 4, "llm.max_concurrency": 4, **prices})

    first = toolfactory_here("run", "--run-id", RUN_ID, *sets(overrides))
    assert first.returncode == 3, first.stdout[-3000:] + first.stderr[-3000:]
    assert f"run {RUN_ID}: budget_exhausted" in first.stdout
    assert "llm.budget.tokens=3,000" in first.stderr
    assert f"toolfactory rerun {RUN_ID} --set storage.root={root} --set llm.budget.tokens=6000" in first.stderr

    stats = StatsDB(root / "stats.duckdb")
    stopped = stats.run_summary(RUN_ID, STAGE_NAMES).to_dict()
    assert stopped["status"] == "budget_exhausted" and "budget is spent" in stopped["message"]
    failed = [f for s in stopped["stages"] for f in s["failed_shards"]]
    assert any("BudgetExhausted" in (f["error"] or "") for f in failed)
    # Work not done is not rejected as if it were bad: nothing is rejected for the budget.
    assert not any("budget" in reason for s in stopped["stages"] for reason in s["rejections"])
    requests, tokens, usd = stats.run_spend(RUN_ID)
    assert requests > 0 and tokens >= 3000 and usd > 0
    assert stopped["cost_usd"] == pytest.approx(usd, rel=1e-6)  # the run's cost: the sum of its attempts'
    assert sum(u["cost_usd"] or 0 for u in stopped["cost_by_role"].values()) == pytest.approx(usd, rel=1e-6)

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey, FlowRunFilter, FlowRunFilterName

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[f"generate-{RUN_ID}"])))
        artifacts = [a for a in client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["toolfactory-stages"])))
                     if RUN_ID in str(a.description)]
    assert artifacts and all("cost (USD)" in str(a.data) for a in artifacts)  # the stages table shows cost
    flow_run = max(runs, key=lambda run: run.created or 0)  # the API may hold earlier runs of the same id
    assert flow_run.state is not None and flow_run.state.is_failed()
    assert "budget is spent" in (flow_run.state.message or "")

    # A re-run may not reset what the run has spent: the same budget stops it again at once.
    from flows.execute import summary_of
    from flows.rerun import rerun

    again = summary_of(rerun(run_id=RUN_ID, overrides=[f"storage.root={root}"], return_state=True))
    assert again["status"] == "budget_exhausted", again
    assert stats.run_spend(RUN_ID)[1] == tokens

    second = toolfactory_here("rerun", RUN_ID, "--set", f"storage.root={root}", "--set", "llm.budget.tokens=10000000")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    finished = stats.run_summary(RUN_ID, STAGE_NAMES).to_dict()
    assert finished["status"] == "completed" and not finished["message"]
    assert finished["cost_usd"] > stopped["cost_usd"]
    assert "cost: $" in second.stdout  # the stats table shows the run's cost

    store = ObjectStore.open(load_config(None, [f"storage.root={root}"], environ={}).storage)
    for stage in ("tasks", "dialogues", "verify", "curate"):
        parts = [p for p in store.list(f"runs/{RUN_ID}/{stage}/") if p.endswith(".parquet") and "/rejected/" not in p]
        ids = [r["id"] for p in parts for r in read_records(store, p)]
        rejected = [r["id"] for p in store.list(f"runs/{RUN_ID}/{stage}/rejected/") for r in read_rejected(store, p)]
        assert ids and len(set(ids)) == len(ids), stage
        assert not set(ids) & set(rejected), stage
