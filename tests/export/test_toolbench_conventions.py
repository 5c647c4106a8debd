"""The ToolBench export read the way ToolBench's own scripts read answer folders: files found by
the method in their name (``preprocess_toolllama_data.py``), the query id taken from the name
before the first ``_`` (ToolEval's ``convert_to_answer_format.py``), the system prompt holding
the sentence the preprocessing asserts on, each call followed by its response, and the
top-level keys of a released answer file. The conventions are re-implemented here from
ToolBench's documented scripts, so the test does not trust the exporter's own helpers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolfactory.export import SPLITS, export_run
from toolfactory.models import Dialogue, Message
from toolfactory.storage import ObjectStore

from .helpers import RUN, open_store, write_run

METHODS = ("DFS_woFilter_w2", "CoT@1")  # the --method choices of preprocess_toolllama_data.py
ASSERTED = "with a function call to actually excute your step."  # process_system_message's assert


def preprocess_finds(folder: Path, method: str) -> list[dict[str, Any]]:
    """What ToolBench's preprocessing loads from `folder` for `method` (os.listdir, `method in name`)."""
    found = []
    for name in sorted(p.name for p in folder.iterdir()):
        if method not in name:
            continue
        answer = json.loads((folder / name).read_text())["answer_generation"]
        if answer["valid_data"]:
            found.append(answer)
    return found


def tooleval_query_ids(folder: Path, method: str) -> list[str]:
    """The query ids ToolEval's converter takes from the names of `folder`'s answers."""
    return [p.name.split("_")[0] for p in sorted(folder.iterdir()) if p.name.endswith(".json") and method in p.name]


def exported(tmp_path: Path) -> list[Path]:
    return [p for s in SPLITS if (tmp_path / "answer" / s).is_dir() for p in sorted((tmp_path / "answer" / s).iterdir())]


def test_every_answer_file_is_found_by_toolbench_preprocessing(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    summary = export_run(run_store, RUN, "toolbench", tmp_path)
    found = 0
    for split in SPLITS:
        folder = tmp_path / "answer" / split
        if not folder.is_dir():
            continue
        for method in METHODS:
            for answer in preprocess_finds(folder, method):
                found += 1
                for prefix in answer["train_messages"]:
                    assert all(ASSERTED in m["content"] for m in prefix if m["role"] == "system")
    assert found == summary["exported"] == len(exported(tmp_path)) == len(dialogues)


def test_tooleval_takes_one_distinct_query_id_per_record(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    export_run(run_store, RUN, "toolbench", tmp_path)
    ids = [q for s in SPLITS if (tmp_path / "answer" / s).is_dir() for m in METHODS for q in tooleval_query_ids(tmp_path / "answer" / s, m)]
    assert len(ids) == len(set(ids)) == len(dialogues)
    plain = {d.id for d in dialogues if "_" not in d.id}  # an id with "_" would be cut short: it is hashed
    assert plain and plain <= set(ids)


def test_a_search_record_is_named_with_dfs_and_a_simulated_one_with_cot(tmp_path: Path, dialogues: list[Dialogue]) -> None:
    searched = dialogues[0].model_copy(update={"id": "searched", "generation": {"search": {"method": "dfsdt", "finish_type": "give_answer"}}})
    simulated = dialogues[1].model_copy(update={"id": "sim_with_underscore"})
    store = open_store(tmp_path / "store")
    write_run(store, [searched, simulated])
    export_run(store, RUN, "toolbench", tmp_path / "out")
    names = sorted(p.name for p in exported(tmp_path / "out"))
    assert "searched_DFS_woFilter_w2.json" in names
    cot = [n for n in names if n.endswith("_CoT@1.json")]
    assert len(cot) == 1 and "_" not in cot[0].removesuffix("_CoT@1.json")


def test_answer_files_have_toolbench_top_level_keys_and_tooleval_can_walk_them(run_store: ObjectStore, tmp_path: Path) -> None:
    export_run(run_store, RUN, "toolbench", tmp_path)
    for path in exported(tmp_path):
        data = json.loads(path.read_text())
        assert {"win", "forward_args", "compare_candidates", "answer_generation"} <= set(data)
        assert data["win"] is (data["answer_generation"]["finish_type"] == "give_answer")
        conversation = data["answer_generation"]["train_messages"][-1]
        assert [m["role"] for m in conversation[:2]] == ["system", "user"]
        # convert_to_answer_format.process_valid_data: a call's response is the next message
        for index, message in enumerate(conversation):
            call = message.get("function_call")
            if call and call["name"] != "Finish":
                assert conversation[index + 1]["role"] == "function" and conversation[index + 1]["name"] == call["name"]
        candidate = data["compare_candidates"][0]
        assert [n["description"] for n in candidate if n["node_type"] == "Action"] == [
            m["function_call"]["name"] for m in conversation if m.get("function_call")]


def test_a_record_with_its_search_tree_exports_the_tree(tmp_path: Path, dialogues: list[Dialogue]) -> None:
    nodes = [{"id": 1, "parent": 0, "depth": 1, "kind": "call", "calls": ["a"], "sample": 0},
             {"id": 2, "parent": 1, "depth": 2, "kind": "give_up", "calls": ["Finish"], "sample": 0},
             {"id": 3, "parent": 1, "depth": 2, "kind": "give_answer", "calls": ["Finish"], "sample": 1}]
    with_tree = dialogues[0].model_copy(update={"id": "withtree", "generation": {"search": {"method": "dfsdt", "tree": nodes}}})
    without = dialogues[1].model_copy(update={"id": "notree"})
    store = open_store(tmp_path / "store")
    write_run(store, [with_tree, without])
    export_run(store, RUN, "toolbench", tmp_path / "out")
    files = {p.name.split("_")[0]: json.loads(p.read_text()) for p in exported(tmp_path / "out")}
    tree = files["withtree"]["tree"]
    assert tree["size"] == 3 and tree["max_length"] == 2
    first = tree["tree"]["children"]
    assert len(first) == 1 and [c["finished"] for c in first[0]["children"]] == [False, True]
    assert "tree" not in files["notree"]


@pytest.mark.parametrize("kind", ["give_up", "invalid_finish", "rejected_call", "rejected_answer", "depth_cut"])
def test_a_branch_that_ended_without_an_answer_is_a_pruned_leaf_of_the_exported_tree(tmp_path: Path, dialogues: list[Dialogue], kind: str) -> None:
    nodes = [{"id": 1, "parent": 0, "depth": 1, "kind": "call", "calls": ["a"], "sample": 0},
             {"id": 2, "parent": 1, "depth": 2, "kind": kind, "calls": ["a"], "sample": 0},
             {"id": 3, "parent": 1, "depth": 2, "kind": "give_answer", "calls": ["Finish"], "sample": 1}]
    with_tree = dialogues[0].model_copy(update={"id": "withtree", "generation": {"search": {"method": "dfsdt", "tree": nodes}}})
    store = open_store(tmp_path / "store")
    write_run(store, [with_tree])
    export_run(store, RUN, "toolbench", tmp_path / "out")
    (path,) = exported(tmp_path / "out")
    ended, answered = json.loads(path.read_text())["tree"]["tree"]["children"][0]["children"]
    assert (ended["is_terminal"], ended["pruned"], ended["finished"]) == (True, True, False)
    assert (answered["is_terminal"], answered["pruned"], answered["finished"]) == (True, False, True)
    assert ended["kind"] == kind


def test_a_record_with_another_system_prompt_gets_toolbench_s(tmp_path: Path, dialogues: list[Dialogue]) -> None:
    dialogue = dialogues[0]
    own = dialogue.model_copy(update={"id": "own", "messages": [Message(role="system", content="Be brief."), *[m for m in dialogue.messages if m.role != "system"]]})
    store = open_store(tmp_path / "store")
    write_run(store, [own])
    export_run(store, RUN, "toolbench", tmp_path / "out")
    (path,) = exported(tmp_path / "out")
    system = json.loads(path.read_text())["answer_generation"]["train_messages"][-1][0]
    assert system["role"] == "system" and ASSERTED in system["content"] and "Be brief." not in system["content"]
