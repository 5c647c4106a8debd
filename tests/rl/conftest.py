"""Verifiable tasks for the RL environments' tests: BFCL's multi-turn ground truths over its file
system (and the other classes its first entries use), their mutants with a call dropped or an
argument changed, and the ``tasks`` export of a small run whose calls ran on BFCL's file system.

The policy is :mod:`toolfactory.rl.replay_policy` over real HTTP: it plays the calls it is given.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import _ci
from toolfactory.models import Dialogue
from toolfactory.rl.tasks import Task, task_of_record

SAMPLE = 4
CATEGORY = "BFCL_v4_multi_turn_base.json"


def _bfcl_entries() -> list[dict[str, Any]]:
    spec = importlib.util.find_spec("bfcl_eval")
    assert spec is not None and spec.submodule_search_locations
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    answers = {a["id"]: a["ground_truth"] for a in map(json.loads, (data / "possible_answer" / CATEGORY).read_text().splitlines()[:SAMPLE])}
    return [{**e, "ground_truth": answers[e["id"]]} for e in map(json.loads, (data / CATEGORY).read_text().splitlines()[:SAMPLE])]


@pytest.fixture(scope="session")
def bfcl_records() -> list[tuple[dict[str, Any], Dialogue]]:
    """The first BFCL multi-turn base entries with their ground truths executed (records)."""
    if importlib.util.find_spec("bfcl_eval") is None:
        if _ci():
            pytest.fail("needs bfcl-eval (make test installs it)")
        pytest.skip("needs bfcl-eval (make test installs it)")
    from toolfactory.formats.bfcl_multi_turn import execute, ground_truth_calls

    async def run() -> list[tuple[dict[str, Any], Dialogue]]:
        return [(entry, await execute(entry, ground_truth_calls(entry))) for entry in _bfcl_entries()]

    return asyncio.run(run())


@pytest.fixture(scope="session")
def bfcl_tasks(bfcl_records: list[tuple[dict[str, Any], Dialogue]]) -> list[Task]:
    return [task_of_record(dialogue) for _, dialogue in bfcl_records]


def final_state(entry: dict[str, Any], plan: list[list[tuple[str, dict[str, Any]]]]) -> dict[str, Any]:
    """The state `plan`'s calls leave on `entry`'s environments, run by toolfactory's BFCL reader
    outside any RL library (the oracle a reward is checked against)."""
    from toolfactory.formats.bfcl_multi_turn import execute

    turns = [list(turn) for turn in plan] + [[] for _ in range(len(entry["question"]) - len(plan))]
    dialogue = asyncio.run(execute(entry, turns))
    return dialogue.generation["execution"]["target_state"]


Plan = list[list[tuple[str, dict[str, Any]]]]


def mutants(task: Task) -> dict[str, Plan]:
    """`task`'s ground truth with its first state-changing-looking call dropped, its last call
    dropped, and the first argument of its first call with arguments changed."""
    from toolfactory.rl.replay_policy import plan_of

    plan = [[(n, dict(a)) for n, a in turn] for turn in plan_of(task.ground_truth, len(task.user_turns))]
    where = [(t, i) for t, calls in enumerate(plan) for i in range(len(calls))]
    out: dict[str, Plan] = {"drop_first": dropped(plan, *where[0]), "drop_last": dropped(plan, *where[-1])}
    with_args = [(t, i) for t, i in where if plan[t][i][1]]
    if with_args:
        t, i = with_args[0]
        key = sorted(plan[t][i][1])[0]
        value = plan[t][i][1][key]
        out["change_first"] = changed(plan, t, i, key, f"{value}_x" if isinstance(value, str) else "x")
    return out


def dropped(plan: list[list[tuple[str, dict[str, Any]]]], turn: int, index: int) -> list[list[tuple[str, dict[str, Any]]]]:
    return [[c for i, c in enumerate(calls) if (t, i) != (turn, index)] for t, calls in enumerate(plan)]


def changed(plan: list[list[tuple[str, dict[str, Any]]]], turn: int, index: int, key: str, value: Any) -> list[list[tuple[str, dict[str, Any]]]]:
    return [[(n, {**a, key: value}) if (t, i) == (turn, index) else (n, a) for i, (n, a) in enumerate(calls)]
            for t, calls in enumerate(plan)]


@pytest.fixture(scope="session")
def tasks_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``tasks`` export of a small run: dialogues whose calls ran on BFCL's file system."""
    from export.executed_runs import FILES_STATE, FILES_TURNS, config, executed_dialogue, source_tools, write_executed_run
    from export.helpers import RUN, corpus, open_store

    from toolfactory.export import export_run

    folder = tmp_path_factory.mktemp("rl-run")
    files = {"name": "files", "preset": "GorillaFileSystem", "initial_state": FILES_STATE, "deterministic": True}
    cfg = config([files])
    tools = source_tools(cfg)
    made = [executed_dialogue(cfg, [tools["files"]], FILES_TURNS, "files-3-turns"),
            executed_dialogue(cfg, [tools["files"]], [("Create a folder called drafts.", [("mkdir", {"dir_name": "drafts"})])], "files-drafts")]
    store = open_store(folder / "store")
    write_executed_run(store, cfg, [*made, *corpus(2)], list(tools.values()))
    export_run(open_store(folder / "store"), RUN, "tasks", folder / "tasks")
    from toolfactory.rl.tasks import read_tasks

    assert sorted(t.id for t in read_tasks(folder / "tasks")) == ["files-3-turns", "files-drafts"]
    return folder / "tasks"
