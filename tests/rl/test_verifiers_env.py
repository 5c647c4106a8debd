"""verifiers (0.2) loads the tasks with its own loader and runs them with its own evaluation
loop; the policy is a replay of given calls over HTTP, every call runs on BFCL's real classes,
and the rubric's reward is the execution verdict."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolfactory.models import Dialogue
from toolfactory.rl.replay_policy import ReplayPolicy, plan_of, serve
from toolfactory.rl.tasks import Task, write_tasks

from .conftest import final_state, mutants
from .extras import needs_extra

needs_extra("verifiers", "verifiers", module_level=True)
vf = importlib.import_module("verifiers")
KEY = "TOOLFACTORY_RL_TEST_KEY"


@pytest.fixture()
def policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ReplayPolicy, Any]]:
    from verifiers.types import ClientConfig

    monkeypatch.setenv(KEY, "unused")
    found = ReplayPolicy()
    with serve(found) as url:
        yield found, ClientConfig(api_base_url=url, api_key_var=KEY, max_retries=0)


def evaluate(env: Any, client: Any) -> dict[str, dict[str, Any]]:
    """verifiers' own evaluation loop over every task; the outputs by task id."""
    results = env.evaluate_sync(client, "replay", num_examples=-1, rollouts_per_example=1, max_concurrent=2,
                                state_columns=["toolfactory_codes"])
    out = {}
    for output in results["outputs"]:
        info = output["info"]
        out[info["task_id"]] = output
    return out


def test_the_loader_makes_one_row_per_task_with_its_tools(bfcl_tasks: list[Task], tmp_path: Path) -> None:
    env = vf.load_environment("toolfactory.rl.verifiers_env", tasks=write_tasks(bfcl_tasks, tmp_path / "tasks.jsonl"))
    rows = env.get_eval_dataset()
    assert len(rows) == len(bfcl_tasks)
    info = json.loads(rows[0]["info"])
    assert info["task_id"] == bfcl_tasks[0].id
    assert [d["name"] for d in info["tool_defs"]] == [t["function"]["name"] for t in bfcl_tasks[0].tools]


def test_ground_truths_score_one_and_mutants_score_zero_where_the_state_differs(
        bfcl_records: list[tuple[dict[str, Any], Dialogue]], bfcl_tasks: list[Task], tmp_path: Path,
        policy: tuple[ReplayPolicy, Any]) -> None:
    replay, client = policy
    env = vf.load_environment("toolfactory.rl.verifiers_env", tasks=write_tasks(bfcl_tasks, tmp_path / "tasks.jsonl"))
    for task in bfcl_tasks:
        replay.add(task.user_turns[0], plan_of(task.ground_truth, len(task.user_turns)))
    truths = evaluate(env, client)
    assert {i: o["reward"] for i, o in truths.items()} == {t.id: 1.0 for t in bfcl_tasks}
    assert all(o["toolfactory_codes"] == [] for o in truths.values())
    # every ground-truth call went to the real classes and came back as a tool message
    for task in bfcl_tasks:
        assert sum(m["role"] == "tool" for m in truths[task.id]["completion"]) == len(task.ground_truth)
    differing = 0
    for kind in ("drop_first", "drop_last", "change_first"):
        plans = {t.id: mutants(t).get(kind) for t in bfcl_tasks}
        for task in bfcl_tasks:
            if plans[task.id] is not None:
                replay.add(task.user_turns[0], plans[task.id])
        outputs = evaluate(env, client)
        rewards = {i: o["reward"] for i, o in outputs.items()}
        for entry, dialogue in bfcl_records:
            plan = plans[dialogue.id]
            if plan is None:
                continue
            if final_state(entry, plan) != dialogue.generation["execution"]["target_state"]:
                differing += 1
                assert rewards[dialogue.id] == 0.0, (kind, dialogue.id)
                assert "exec_state_mismatch" in outputs[dialogue.id]["toolfactory_codes"]
    assert differing >= len(bfcl_tasks)  # the mutants are no no-ops


def test_a_run_s_tasks_export_loads_and_its_ground_truth_scores_one(tasks_export: Path, policy: tuple[ReplayPolicy, Any]) -> None:
    from toolfactory.rl.tasks import read_tasks

    replay, client = policy
    tasks = read_tasks(tasks_export)
    for task in tasks:
        replay.add(task.user_turns[0], plan_of(task.ground_truth, len(task.user_turns)))
    env = vf.load_environment("toolfactory.rl.verifiers_env", tasks=tasks_export)
    outputs = evaluate(env, client)
    assert {i: o["reward"] for i, o in outputs.items()} == {t.id: 1.0 for t in tasks}
    # the folder's ground truth with the move left out leaves notes.txt where it was: 0
    task = next(t for t in tasks if t.id == "files-3-turns")
    replay.add(task.user_turns[0], plan_of([c for c in task.ground_truth if c["name"] != "mv"], len(task.user_turns)))
    assert evaluate(env, client)[task.id]["reward"] == 0.0
