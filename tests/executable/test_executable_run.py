"""A whole run whose only tools are a Python environment (BFCL's file system): real Prefect,
a local Ray, the simulator over HTTP; the dialogues' tool messages are the real results. Its
tasks come from verified blueprints, and the verifiable-task export carries their target states."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import small_run_overrides

from toolfactory.config import load_config
from toolfactory.models import Dialogue, Task
from toolfactory.storage.shards import dataset_parts, read_records
from toolfactory.storage import ObjectStore

pytestmark = pytest.mark.e2e
FILES = {"root": {"alex": {"type": "directory", "contents": {
    "notes.txt": {"type": "file", "content": "meeting at noon"},
    "reports": {"type": "directory", "contents": {"q1.txt": {"type": "file", "content": "revenue up"}}},
}}}}


def test_a_run_over_a_python_environment_executes_every_call(prefect_api: str, ray_cluster: None, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.execute import summary_of
    from flows.generate import generate

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    source = {"name": "files", "preset": "GorillaFileSystem", "initial_state": FILES,
              "allow": ["ls", "cat", "pwd", "mkdir", "touch", "wc"]}
    root = tmp_path / "data"
    overrides = small_run_overrides(root, **{
        "tools.builtin_catalog": False, "tools.environments": json.dumps([source]),
        "tasks.blueprints": "{enabled: true, multi_turn: 0.0}", "export.formats": "[openai, tasks]",
        # The designer and the user follow their prompts: a blueprint's request says what its calls need.
        "llm.simulator.obedience": 1.0,
        # Without exploration, as this run was measured: with it, blueprints that read the files
        # (`cat`, `wc` of `notes.txt`) are kept beside those that only create, and the simulated
        # assistant cannot tell two file names of one request apart (tests/test_exploration.py
        # covers exploration).
        "tasks.explore": "false",
    })
    summary: dict[str, Any] = summary_of(generate(config_path=None, overrides=overrides, return_state=True))
    assert summary["status"] == "completed"
    run_id = summary["run_id"]

    store = ObjectStore.open(load_config(None, [f"storage.root={root}"], environ={}).storage)
    tasks = {t.id: t for t in (Task.model_validate(r) for r in read_records(store, f"runs/{run_id}/tasks/part-00000.parquet"))}
    assert tasks and all(t.blueprint is not None for t in tasks.values())  # every task of the source is a verified blueprint
    made = [Dialogue.model_validate(r) for r in read_records(store, f"runs/{run_id}/dialogues/part-00000.parquet")]
    executed = [d for d in made if d.generation.get("execution")]
    assert executed and len(executed) == len([d for d in made if any(m.tool_calls for m in d.messages)])
    for dialogue in executed:  # the state the verifier holds the dialogue to is its blueprint's
        blueprint = tasks[dialogue.task_id].blueprint
        assert blueprint is not None and dialogue.generation["execution"]["target_state"] == blueprint.target_state
    for dialogue in executed:
        calls = [c for m in dialogue.messages if m.tool_calls for c in m.tool_calls]
        answers = {m.tool_call_id: m.content for m in dialogue.messages if m.role == "tool"}
        assert [c["name"] for c in dialogue.generation["execution"]["calls"]] == [c.name for c in calls]
        # What ran is recorded with the calls: a replay on another release can tell drift apart.
        assert dialogue.generation["execution"]["versions"]["files"].startswith("bfcl_eval ")
        for call in calls:  # what BFCL's file system answers, never an LLM's invention
            if call.name == "cat" and json.loads(call.arguments).get("file_name") == "notes.txt":
                assert json.loads(answers[call.id] or "") == {"file_content": "meeting at noon"}
            if call.name == "pwd":
                assert json.loads(answers[call.id] or "") == {"current_working_directory": "/alex"}
        state = dialogue.generation["execution"]["states"]["files"]
        assert state["root"]["name"] == "alex" and "notes.txt" in state["root"]["contents"]
    with duckdb.connect(str(root / "stats.duckdb"), read_only=True) as con:
        tool_calls = con.execute("SELECT coalesce(sum(calls), 0) FROM llm_usage WHERE run_id = ? AND role = 'tool'", [run_id]).fetchone()
        replayed = con.execute("SELECT sum(items_in), sum(passed) FROM layer_metrics WHERE run_id = ? AND stage = 'verify' "
                               "AND layer = 'execution'", [run_id]).fetchone()
        exec_rejections = con.execute("SELECT count(*) FROM rejections WHERE run_id = ? AND stage = 'verify' "
                                      "AND reason LIKE 'exec_%'", [run_id]).fetchone()
    assert tool_calls == (0,)  # no LLM played the tool
    # The verifier replayed them: every recorded result was reproduced in fresh processes, and
    # each replay reached its blueprint's target state.
    assert replayed is not None and replayed[0] and exec_rejections == (0,)

    # The judges were measured against execution on those dialogues, and their votes decided none.
    from toolfactory.stages.verify.referee import ACCEPTED, CORRUPTIONS, REFEREE, by_origin

    verify = next(s for s in summary["stages"] if s["stage"] == "verify")
    refereed = by_origin(verify["profile"][REFEREE])
    assert refereed.get(ACCEPTED) and sum(refereed.get(kind, 0) for kind in CORRUPTIONS) == refereed[ACCEPTED]

    # What an operator reads of the same run: `toolfactory stats` and the report count, per source,
    # the dialogues that ran real tools, their calls, and how many of them the dataset kept.
    from typer.testing import CliRunner

    from toolfactory.cli import app
    from toolfactory.report.data import load_run_stats
    from toolfactory.report.sections import executed_tools

    kept = [Dialogue.model_validate(r) for path in dataset_parts(store, run_id) for r in read_records(store, path)]
    in_dataset = sum(bool(d.generation.get("execution")) for d in kept)
    calls = sum(len(d.generation["execution"]["calls"]) for d in executed)
    shown = CliRunner().invoke(app, ["stats", run_id, "--set", f"storage.root={root}"])
    assert shown.exit_code == 0, shown.output
    assert f"executed tools: files {len(executed)} dialogues, {calls} calls" in shown.output
    assert f"{in_dataset} in the dataset" in shown.output
    assert "judges against execution: sim-small agreed on " in shown.output
    (row,) = executed_tools(load_run_stats(root / "stats.duckdb", run_id)).tables[0].rows
    assert row[:3] == ("files", str(len(executed)), str(calls)) and row[4] == str(in_dataset)

    # The verifiable-task export: one row per dataset record that ran, whose target state is
    # its blueprint's, with the environment to replay it on.
    exported = [json.loads(line) for path in store.list(f"runs/{run_id}/export/tasks") if path.endswith(".jsonl")
                for line in store.read_bytes(path).decode().splitlines() if line.strip()]
    by_id = {d.id: d for d in kept}
    assert exported and len(exported) == in_dataset
    for row_ in exported:
        task = tasks[by_id[row_["id"]].task_id]
        assert task.blueprint is not None and row_["target_state"] == task.blueprint.target_state
        assert [e["name"] for e in row_["environments"]] == ["files"] and row_["initial_state"]["files"] == FILES
