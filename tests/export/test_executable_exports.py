"""Exports that keep the environment: BFCL's multi-turn entries for dialogues over BFCL's own
environments, judged by BFCL's own multi-turn machinery, and verifiable tasks that replay to
their target state in a fresh session of their source; the dataset card says what ran."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolfactory.config import ToolsConfig
from toolfactory.executable.registry import environments
from toolfactory.executable.runner import snapshot
from toolfactory.export import ExportOptions, export_run
from toolfactory.models import Dialogue

from .executed_runs import (
    FILES_STATE,
    FILES_TURNS,
    config,
    executed_dialogue,
    source_tools,
    write_executed_run,
)
from .helpers import RUN, corpus, open_store, read_jsonl

HERE = Path(__file__).parent
MULTI_TURN_FILE = "BFCL_v4_multi_turn_base.json"
SECRET = "s3cr3t-token-value"
FILES = {"name": "files", "preset": "GorillaFileSystem", "initial_state": FILES_STATE, "deterministic": True}
COUNTER = {"name": "counter", "class_path": "toolenvs:Counter", "initial_state": {"start": 10, "label": "stock"},
           "allow": ["add", "divide"], "deterministic": True}
TIME = {"name": "time", "command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
        "env": {"TIME_SERVICE_TOKEN": SECRET}, "deterministic": True}


@pytest.fixture(scope="module")
def on_path() -> Iterator[None]:
    """The test environments (tests/executable/toolenvs.py) importable here and in the runners."""
    folder = str(HERE.parent / "executable")
    sys.path.insert(0, folder)
    yield
    sys.path.remove(folder)


def files_run(tmp_path: Path) -> tuple[Path, dict[str, Dialogue]]:
    """A run of two dialogues over BFCL's file system (the second one turn shorter), and one whose
    search abandoned calls that still ran in its session."""
    cfg = config([FILES])
    tools = source_tools(cfg)
    made = [
        executed_dialogue(cfg, [tools["files"]], FILES_TURNS, "files-3-turns"),
        executed_dialogue(cfg, [tools["files"]], FILES_TURNS[:2], "files-2-turns"),
        executed_dialogue(cfg, [tools["files"]], FILES_TURNS[1:], "files-backtracked", unseen=[("mkdir", {"dir_name": "tmp"})]),
    ]
    store = open_store(tmp_path / "store")
    write_executed_run(store, cfg, made, list(tools.values()))
    return tmp_path / "store", {d.id: d for d in made}


def bfcl_entries(out: Path) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, str]]:
    """The multi-turn entries of every split, their possible answers by id and record ids by id."""
    questions: list[dict[str, Any]] = []
    answers: dict[str, dict[str, Any]] = {}
    records: dict[str, str] = {}
    for split in ("train", "validation", "test"):
        if (out / split / MULTI_TURN_FILE).exists():
            questions += read_jsonl(out / split / MULTI_TURN_FILE)
            answers.update({a["id"]: a for a in read_jsonl(out / split / "possible_answer" / MULTI_TURN_FILE)})
        if (out / split / "record_ids.jsonl").exists():
            records.update({r["id"]: r["record_id"] for r in read_jsonl(out / split / "record_ids.jsonl")})
    return questions, answers, records


def test_dialogues_over_bfcl_s_environments_export_as_multi_turn_entries_that_bfcl_s_checker_accepts(tmp_path: Path) -> None:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (
        multi_turn_checker,
    )
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import (
        execute_multi_turn_func_call,
    )

    store, made = files_run(tmp_path)
    summary = export_run(open_store(store), RUN, "bfcl", tmp_path / "out")
    questions, answers, records = bfcl_entries(tmp_path / "out")
    assert sorted(records[q["id"]] for q in questions) == ["files-2-turns", "files-3-turns"]
    assert summary["skipped"] == {"execution_not_replayable": 1}
    for n, entry in enumerate(questions):
        dialogue = made[records[entry["id"]]]
        truth = answers[entry["id"]]["ground_truth"]
        assert entry["id"].startswith("multi_turn_base_") and entry["involved_classes"] == ["GorillaFileSystem"]
        assert entry["initial_config"] == {"GorillaFileSystem": FILES_STATE}
        assert [turn[0]["content"] for turn in entry["question"]] == [m.content for m in dialogue.messages if m.role == "user"]
        assert len(truth) == len(entry["question"])
        # BFCL's executor, given our ground truth turn by turn on one instance, leaves the state the dialogue recorded.
        instances: dict[str, Any] = {}
        for turn in truth:
            _, instances = execute_multi_turn_func_call(turn, entry["initial_config"], entry["involved_classes"],
                                                        f"export_replay_{n}", entry["id"])
        assert snapshot(instances["GorillaFileSystem"]) == dialogue.generation["execution"]["states"]["files"]
        # BFCL's checker takes our ground truth as a model's answer; it refuses one with a call left out.
        answer = [[turn] for turn in truth]
        assert multi_turn_checker(answer, truth, entry, "multi_turn_base", f"export_gold_{n}") == {"valid": True}
        dropped = [[turn[:-1]] if turn == truth[0] else [turn] for turn in truth]
        assert not multi_turn_checker(dropped, truth, entry, "multi_turn_base", f"export_dropped_{n}")["valid"]


def test_the_multi_turn_entry_writes_calls_in_bfcl_s_syntax_and_names_the_functions_not_offered(tmp_path: Path) -> None:
    cfg = config([{**FILES, "allow": ["mkdir", "cd", "touch", "echo", "ls", "mv"]}])
    tools = source_tools(cfg)
    store = open_store(tmp_path / "store")
    write_executed_run(store, cfg, [executed_dialogue(cfg, [tools["files"]], FILES_TURNS, "r")], list(tools.values()))
    export_run(store, RUN, "bfcl", tmp_path / "out")
    [entry], answers, _ = bfcl_entries(tmp_path / "out")
    assert answers[entry["id"]]["ground_truth"][0] == [
        "mkdir(dir_name='reports')", "cd(folder='reports')", "touch(file_name='summary.txt')",
        "echo(content='Q3 is done', file_name='summary.txt')"]
    assert entry["path"] == [f"GorillaFileSystem.{name}" for name in ("mkdir", "cd", "touch", "echo", "ls", "mv")]
    assert {"rm", "cat", "grep"} <= set(entry["excluded_function"]) and "mkdir" not in entry["excluded_function"]
    assert [f["name"] for f in entry["function"]] == [f.name for f in tools["files"].functions]


def tasks_run(tmp_path: Path) -> tuple[Path, dict[str, Dialogue]]:
    cfg = config([FILES, COUNTER], [TIME])
    tools = source_tools(cfg)
    made = [
        executed_dialogue(cfg, [tools["files"]], FILES_TURNS, "files"),
        executed_dialogue(cfg, [tools["counter"], tools["time"]], [
            ("Add 5 to the stock, then halve it by zero, sorry, add 2.", [
                ("add", {"amount": 5}), ("divide", {"by": 0}), ("add", {"amount": 2, "note": "restock"})]),
            ("What time is 09:30 in Tokyo when it is 09:30 in London?", [
                ("convert_time", {"source_timezone": "Europe/London", "time": "09:30", "target_timezone": "Asia/Tokyo"})]),
        ], "counter-and-time"),
        executed_dialogue(cfg, [tools["counter"]], [("Add 1.", [("add", {"amount": 1})])], "backtracked",
                          unseen=[("add", {"amount": 100})]),
    ]
    store = open_store(tmp_path / "store")
    write_executed_run(store, cfg, [*made, *corpus(2)], list(tools.values()))
    return tmp_path / "store", {d.id: d for d in made}


def test_verifiable_tasks_replay_to_their_target_state_in_a_fresh_session_of_their_source(tmp_path: Path, on_path: None) -> None:
    store, made = tasks_run(tmp_path)
    summary = export_run(open_store(store), RUN, "tasks", tmp_path / "out")
    tasks = [t for split in ("train", "validation", "test") for t in read_jsonl(tmp_path / "out" / f"{split}.jsonl")]
    assert sorted(t["id"] for t in tasks) == ["counter-and-time", "files"]
    assert summary["skipped"] == {"execution_not_replayable": 1, "not_executed": 2}
    for task in tasks:
        dialogue = made[task["id"]]
        assert task["prompt"] == [{"role": "user", "content": m.content} for m in dialogue.messages if m.role == "user"]
        assert task["tools"] == [f.openai_tool() for f in dialogue.tools]
        # The exported configuration alone, with the initial state put back, makes the sources again.
        tools = ToolsConfig.model_validate({
            "environments": [{**e["config"], "initial_state": task["initial_state"][e["name"]]} for e in task["environments"] if e["kind"] == "python"],
            "mcp": [e["config"] for e in task["environments"] if e["kind"] == "mcp"],
        })
        assert replay(tools, task["ground_truth"]) == task["target_state"] == dialogue.generation["execution"]["states"]
    counter = next(t for t in tasks if t["id"] == "counter-and-time")
    assert [(c["turn"], c["name"], c["is_error"]) for c in counter["ground_truth"]] == [
        (0, "add", False), (0, "divide", True), (0, "add", False), (1, "convert_time", False)]
    assert counter["target_state"]["counter"] == {"value": 17, "label": "stock", "history": [5, 2]}
    # held to its result on replay, as the sources declare
    assert {(c["name"], c["deterministic"]) for c in counter["ground_truth"]} >= {("add", True), ("convert_time", True)}
    assert {e["name"]: e["kind"] for e in counter["environments"]} == {"counter": "python", "time": "mcp"}


def test_a_source_offered_but_never_called_is_left_out_of_the_target_state(tmp_path: Path, on_path: None) -> None:
    cfg = config([FILES, COUNTER])
    tools = source_tools(cfg)
    offered = executed_dialogue(cfg, [tools["counter"], tools["files"]], [("Add 1.", [("add", {"amount": 1})])], "offered")
    store = open_store(tmp_path / "store")
    write_executed_run(store, cfg, [offered], list(tools.values()))
    export_run(store, RUN, "tasks", tmp_path / "out")
    [task] = [t for split in ("train", "validation", "test") for t in read_jsonl(tmp_path / "out" / f"{split}.jsonl")]
    assert sorted(e["name"] for e in task["environments"]) == ["counter", "files"]  # offered: configured again
    assert task["target_state"] == offered.generation["execution"]["states"]
    assert list(task["target_state"]) == ["counter"]  # never called: no state to reach


def replay(tools: ToolsConfig, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The state each source is left in by `calls`, run in order on fresh sessions."""
    async def run() -> dict[str, Any]:
        built = environments(tools)
        states = {}
        for name in sorted({c["source"] for c in calls}):
            async with built[name].session() as session:
                for call in (c for c in calls if c["source"] == name):
                    result = await session.call(call["name"], call["arguments"])
                    assert result.is_error == call["is_error"]
                states[name] = await session.state()
        return states

    return asyncio.run(run())


def test_no_export_file_holds_an_mcp_server_s_environment_values(tmp_path: Path, on_path: None) -> None:
    store, _ = tasks_run(tmp_path)
    for fmt in ("tasks", "bfcl", "hf"):
        export_run(open_store(store), RUN, fmt, tmp_path / fmt)
    written = [p for p in tmp_path.glob("*/**/*") if p.is_file() and not p.is_relative_to(tmp_path / "store")]
    assert written and not [p for p in written if SECRET.encode() in p.read_bytes()]
    tasks = [t for p in (tmp_path / "tasks").glob("*.jsonl") for t in read_jsonl(p)]
    [time] = [e for t in tasks for e in t["environments"] if e["kind"] == "mcp"]
    assert time["env_names"] == ["TIME_SERVICE_TOKEN"] and "env" not in time["config"]


def test_the_dataset_card_and_the_provenance_note_say_which_records_ran_on_which_source(tmp_path: Path, on_path: None) -> None:
    store, _ = tasks_run(tmp_path)
    summary = export_run(open_store(store), RUN, "hf", tmp_path / "out")
    assert summary["execution"] == {"executed": 3, "LLM-played": 2}
    assert summary["executed_sources"] == {"counter": {"records": 2, "calls": 5}, "files": {"records": 1, "calls": 7},
                                           "time": {"records": 1, "calls": 1}}
    card = (tmp_path / "out" / "README.md").read_text()
    assert "| executed | 3 |" in card and "| LLM-played | 2 |" in card
    assert "| counter | 2 | 5 |" in card and "| files | 1 | 7 |" in card and "| time | 1 | 1 |" in card
    note = (tmp_path / "out" / "PROVENANCE.md").read_text()
    assert "execution:\n  executed: 3\n  LLM-played: 2\n" in note and "| files | 1 | 7 |" in note


def test_tasks_skip_a_record_that_calls_a_tool_an_llm_plays(tmp_path: Path, on_path: None) -> None:
    cfg = config([COUNTER])
    tools = source_tools(cfg)
    [played] = corpus(1)
    dialogue = executed_dialogue(cfg, [tools["counter"]], [("Add 1.", [("add", {"amount": 1})])], "mixed")
    mixed = dialogue.model_copy(update={
        "tools": [*dialogue.tools, *played.tools], "source_tools": [*dialogue.source_tools, *played.source_tools],
        "messages": [*dialogue.messages, *[m for m in played.messages if m.role != "system"]]})
    store = open_store(tmp_path / "store")
    write_executed_run(store, cfg, [mixed], list(tools.values()))
    summary = export_run(store, RUN, "tasks", tmp_path / "out", options=ExportOptions())
    assert summary["exported"] == 0 and summary["skipped"] == {"played_calls": 1}
    assert [e["id"] for e in summary["skipped_examples"]] == ["mixed"]


def test_a_record_whose_source_the_run_does_not_configure_is_no_task(tmp_path: Path, on_path: None) -> None:
    cfg = config([COUNTER])
    tools = source_tools(cfg)
    store = open_store(tmp_path / "store")
    dialogue = executed_dialogue(cfg, [tools["counter"]], [("Add 1.", [("add", {"amount": 1})])], "unconfigured")
    write_executed_run(store, config(), [dialogue], list(tools.values()))
    summary = export_run(store, RUN, "tasks", tmp_path / "out")
    assert summary["exported"] == 0 and summary["skipped"] == {"source_not_configured": 1}
