"""skyrl-gym (0.4) makes the environment from its registry and runs it through the protocol of
SkyRL's agent loop (``init``, then ``step`` on each reply until ``done``, then ``close``); the
policy is a replay of given calls over HTTP, every call runs on BFCL's real classes, and the
final step's reward is the execution verdict."""

from __future__ import annotations

import importlib

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolfactory.models import Dialogue
from toolfactory.rl.replay_policy import ReplayPolicy, plan_of, serve
from toolfactory.rl.tasks import Task, read_tasks

from .conftest import final_state, mutants
from .extras import needs_extra

needs_extra("skyrl_gym", "skyrl-gym", module_level=True)
skyrl_gym = importlib.import_module("skyrl_gym")


@pytest.fixture(params=[True, False], ids=["hermes-text", "tool-calls"])
def policy(request: pytest.FixtureRequest) -> Iterator[tuple[ReplayPolicy, Any]]:
    """The replay policy writing its calls in its text, or as structured ``tool_calls``."""
    from openai import OpenAI

    found = ReplayPolicy(text_calls=request.param)
    with serve(found) as url:
        yield found, OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60)


def test_the_environment_is_registered_and_made_by_skyrl_gym_s_own_make(bfcl_tasks: list[Task]) -> None:
    from toolfactory.rl.skyrl_env import ENV_ID, TasksTextEnv, dataset_row

    row = dataset_row(bfcl_tasks[0])
    env = skyrl_gym.make(row["env_class"], env_config={}, extras={"task": row["task"], "max_turns": 5})
    try:
        assert row["env_class"] == ENV_ID and isinstance(env, TasksTextEnv)
        prompt, info = env.init(row["prompt"])
        assert prompt[-1] == {"role": "user", "content": bfcl_tasks[0].user_turns[0]}
        # a reply with a call runs it for real and answers with the tool's response
        out = env.step('<tool_call>\n{"name": "pwd", "arguments": {}}\n</tool_call>')
        assert not out["done"] and out["reward"] == 0.0
        assert "<tool_response>" in out["observations"][0]["content"] and "current_working_directory" in out["observations"][0]["content"]
        out = env.step('<tool_call>{"name": "no_such_function", "arguments": {}}</tool_call>')
        assert "no function named 'no_such_function'" in out["observations"][0]["content"]
    finally:
        env.close()


def test_ground_truths_score_one_and_mutants_score_zero_where_the_state_differs(
        bfcl_records: list[tuple[dict[str, Any], Dialogue]], bfcl_tasks: list[Task],
        policy: tuple[ReplayPolicy, Any]) -> None:
    from toolfactory.rl.skyrl_env import dataset_row, rollout

    replay, client = policy
    for task in bfcl_tasks:
        replay.add(task.user_turns[0], plan_of(task.ground_truth, len(task.user_turns)))
        found = rollout(dataset_row(task), client, "replay")
        assert (found.reward, found.codes, found.calls) == (1.0, [], len(task.ground_truth)), task.id
    differing = 0
    for entry, dialogue in bfcl_records:
        task = next(t for t in bfcl_tasks if t.id == dialogue.id)
        for kind, plan in mutants(task).items():
            replay.add(task.user_turns[0], plan)
            found = rollout(dataset_row(task), client, "replay")
            if final_state(entry, plan) != dialogue.generation["execution"]["target_state"]:
                differing += 1
                assert found.reward == 0.0 and "exec_state_mismatch" in found.codes, (kind, task.id)
    assert differing >= len(bfcl_tasks)


def test_a_run_s_tasks_export_runs_in_skyrl_s_loop(tasks_export: Path) -> None:
    from openai import OpenAI

    from toolfactory.rl.skyrl_env import dataset_row, rollout

    tasks = read_tasks(tasks_export)
    replay = ReplayPolicy(text_calls=True)
    with serve(replay) as url:
        client = OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60)
        for task in tasks:
            replay.add(task.user_turns[0], plan_of(task.ground_truth, len(task.user_turns)))
            assert rollout(dataset_row(task), client, "replay").reward == 1.0, task.id
        task = next(t for t in tasks if t.id == "files-3-turns")
        # `mv` to another destination: notes.txt ends up elsewhere than the target state has it
        changed = [{**c, "arguments": {**c["arguments"], "destination": "attic"}} if c["name"] == "mv" else c for c in task.ground_truth]
        replay.add(task.user_turns[0], plan_of(changed, len(task.user_turns)))
        found = rollout(dataset_row(task), client, "replay")
        assert found.reward == 0.0 and found.codes
