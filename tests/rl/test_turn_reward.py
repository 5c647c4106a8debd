"""The reward holds a rollout to the state after every user turn, as BFCL's checker does, not only
to the final state.

The wrong trajectory here answers one user turn a call short and makes that call at the start of
the next turn: the ground truth's calls, in the ground truth's order, so every result is the same
and the final state is the target; only the state after that turn differs. Run by each RL
library's own loop on BFCL's real classes, it must score 0 with ``exec_state_mismatch`` pointing
at that turn's state, and the ground truth 1. Held to the final state alone (a task without
``target_turn_states``), the same trajectory scores 1: the check that catches it is the per-turn
one."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from toolfactory.models import Dialogue
from toolfactory.rl.replay_policy import ReplayPolicy, plan_of, serve
from toolfactory.rl.tasks import Task, read_tasks, write_tasks

from .conftest import Plan
from .extras import needs_extra

TURN_PATH = "generation.execution.target_turn_states"
KEY = "TOOLFACTORY_RL_TEST_KEY"


@dataclass(frozen=True)
class Late:
    """A trajectory that moves the last call of user turn `turn` to the start of the next one."""

    task: Task
    plan: Plan
    turn: int


def late_plans(task: Task) -> Iterator[tuple[int, Plan]]:
    """`task`'s ground truth with the last call of one user turn made at the start of the next."""
    plan = [[(n, dict(a)) for n, a in turn] for turn in plan_of(task.ground_truth, len(task.user_turns))]
    for t in range(len(plan) - 1):
        if plan[t]:
            moved = [list(calls) for calls in plan]
            moved[t + 1].insert(0, moved[t].pop())
            yield t, moved


def executed_states(entry: dict[str, Any], plan: Plan) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The final state and the state after each user turn that `plan`'s calls leave, run by
    toolfactory's BFCL reader outside any RL library (the oracle the reward is checked against)."""
    from toolfactory.formats.bfcl_multi_turn import execute

    executed = asyncio.run(execute(entry, [list(turn) for turn in plan])).generation["execution"]
    return executed["target_state"], executed["target_turn_states"]


@pytest.fixture(scope="module")
def late(bfcl_records: list[tuple[dict[str, Any], Dialogue]], bfcl_tasks: list[Task]) -> list[Late]:
    """Per BFCL task, the first late trajectory whose state after its turn differs from the ground truth's."""
    found = []
    for entry, dialogue in bfcl_records:
        task = next(t for t in bfcl_tasks if t.id == dialogue.id)
        for turn, plan in late_plans(task):
            final, per_turn = executed_states(entry, plan)
            assert final == task.target_state, (task.id, turn)  # the same calls in the same order
            if per_turn[turn] != task.target_turn_states[turn]:  # type: ignore[index]
                found.append(Late(task, plan, turn))
                break
    assert len(found) >= 2, "BFCL's first entries give no late trajectory that changes a turn's state"
    return found


def test_a_bfcl_task_carries_the_state_after_each_user_turn(bfcl_records: list[tuple[dict[str, Any], Dialogue]],
                                                            bfcl_tasks: list[Task], tmp_path: Path) -> None:
    for (_, dialogue), task in zip(bfcl_records, bfcl_tasks):
        assert task.target_turn_states == dialogue.generation["execution"]["target_turn_states"]
        assert len(task.target_turn_states) == len(task.user_turns) and task.target_turn_states[-1] == task.target_state
    assert read_tasks(write_tasks(bfcl_tasks, tmp_path / "tasks.jsonl")) == bfcl_tasks


def test_a_row_without_turn_states_still_loads_and_a_wrong_one_names_the_field(bfcl_tasks: list[Task]) -> None:
    row = bfcl_tasks[0].to_json()
    old = {k: v for k, v in row.items() if k != "target_turn_states"}
    assert Task.from_json(old).target_turn_states is None and Task.from_json(old).to_json() == old
    with pytest.raises(ValueError, match="'target_turn_states' has 1 entries, but the prompt has"):
        Task.from_json({**row, "target_turn_states": row["target_turn_states"][:1]})
    with pytest.raises(ValueError, match="'target_turn_states' must be a list"):
        Task.from_json({**row, "target_turn_states": {"GorillaFileSystem": {}}})


def test_skyrl_scores_a_turn_answered_late_zero_and_the_ground_truth_one(late: list[Late]) -> None:
    needs_extra("skyrl_gym", "skyrl-gym")
    from openai import OpenAI

    from toolfactory.rl.skyrl_env import dataset_row, rollout

    replay = ReplayPolicy(text_calls=True)
    with serve(replay) as url:
        client = OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60)
        for case in late:
            task = case.task
            replay.add(task.user_turns[0], plan_of(task.ground_truth, len(task.user_turns)))
            truth = rollout(dataset_row(task), client, "replay")
            assert (truth.reward, truth.codes, truth.paths) == (1.0, [], []), task.id
            replay.add(task.user_turns[0], case.plan)
            found = rollout(dataset_row(task), client, "replay")
            assert (found.reward, found.codes) == (0.0, ["exec_state_mismatch"]), task.id
            assert [p.rsplit(".", 1)[0] for p in found.paths] == [f"{TURN_PATH}.{case.turn}"], (task.id, found.paths)
            # held to its final state alone, the same trajectory passes
            alone = dataclasses.replace(task, target_turn_states=None)
            replay.add(task.user_turns[0], case.plan)
            assert rollout(dataset_row(alone), client, "replay").reward == 1.0, task.id


def test_verifiers_scores_a_turn_answered_late_zero_and_the_ground_truth_one(
        late: list[Late], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    needs_extra("verifiers", "verifiers")
    import verifiers as vf
    from verifiers.types import ClientConfig

    monkeypatch.setenv(KEY, "unused")
    tasks = [case.task for case in late]
    env = vf.load_environment("toolfactory.rl.verifiers_env", tasks=write_tasks(tasks, tmp_path / "tasks.jsonl"))
    replay = ReplayPolicy()

    def evaluate(client: Any) -> dict[str, dict[str, Any]]:
        results = env.evaluate_sync(client, "replay", num_examples=-1, rollouts_per_example=1, max_concurrent=2,
                                    state_columns=["toolfactory_codes", "toolfactory_paths"])
        return {output["info"]["task_id"]: output for output in results["outputs"]}

    with serve(replay) as url:
        client = ClientConfig(api_base_url=url, api_key_var=KEY, max_retries=0)
        for task in tasks:
            replay.add(task.user_turns[0], plan_of(task.ground_truth, len(task.user_turns)))
        truths = evaluate(client)
        assert {i: (o["reward"], o["toolfactory_codes"]) for i, o in truths.items()} == {t.id: (1.0, []) for t in tasks}
        for case in late:
            replay.add(case.task.user_turns[0], case.plan)
        outputs = evaluate(client)
    for case in late:
        output = outputs[case.task.id]
        assert (output["reward"], output["toolfactory_codes"]) == (0.0, ["exec_state_mismatch"]), case.task.id
        assert [p.rsplit(".", 1)[0] for p in output["toolfactory_paths"]] == [f"{TURN_PATH}.{case.turn}"], case.task.id


def test_a_run_s_tasks_export_is_held_to_each_turn_s_state(tasks_export: Path) -> None:
    needs_extra("skyrl_gym", "skyrl-gym")
    from openai import OpenAI

    from toolfactory.rl.skyrl_env import dataset_row, rollout

    task = next(t for t in read_tasks(tasks_export) if t.id == "files-3-turns")
    assert task.target_turn_states is not None and len(task.target_turn_states) == len(task.user_turns) == 3
    # the summary written a turn late: after the first turn, summary.txt is still empty
    turn, plan = next(late_plans(task))
    assert (turn, plan[1][0][0]) == (0, "echo")
    replay = ReplayPolicy(text_calls=True)
    with serve(replay) as url:
        client = OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60)
        replay.add(task.user_turns[0], plan)
        found = rollout(dataset_row(task), client, "replay")
    assert (found.reward, found.codes, found.paths) == (0.0, ["exec_state_mismatch"], [f"{TURN_PATH}.0.files"])


def test_the_reward_refuses_calls_whose_turn_the_trajectory_does_not_show(bfcl_tasks: list[Task]) -> None:
    from toolfactory.rl.reward import Trajectory, dialogue_of

    task = bfcl_tasks[0]
    trajectory = Trajectory(calls=[{"turn": 1, "source": "GorillaFileSystem", "name": "pwd", "arguments": "{}"}])
    trajectory.user(task.user_turns[0])
    trajectory.assistant(None, [("call_0", "pwd", "{}")])
    with pytest.raises(ValueError, match="pwd ran in user turn 2, but the trajectory holds 1 user messages before it"):
        dialogue_of(task, trajectory)
    assert dialogue_of(task, Trajectory()).generation["execution"]["target_turn_states"] == task.target_turn_states
