"""BFCL's multi-turn ground truths as executed dialogues, judged by the verifier's execution layer
and by BFCL's own executor and state checker (``bfcl-eval``, installed without its dependencies;
only its multi-turn modules are imported)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from toolfactory.executable.runner import snapshot
from toolfactory.formats import read
from toolfactory.models import Dialogue
from toolfactory.stages.verify.execution import ExecutionLayer
from toolfactory.stages.verify.report import verify_file

pytestmark = pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None, reason="needs bfcl-eval (make test installs it)")
SAMPLE = 3  # entries (each starts one runner process per class to read it, and as many to replay it)


def bfcl_data() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "data"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first entries of BFCL's multi-turn base category, laid out as BFCL ships them."""
    folder = tmp_path_factory.mktemp("bfcl")
    name = "BFCL_v4_multi_turn_base.json"
    (folder / "possible_answer").mkdir()
    for part in ("", "possible_answer/"):
        lines = (bfcl_data() / part / name).read_text().splitlines()[:SAMPLE]
        (folder / part / name).write_text("\n".join(lines) + "\n")
    return folder / name


@pytest.fixture(scope="module")
def dialogues(sample: Path) -> list[Dialogue]:
    found = list(read(sample, "bfcl_multi_turn"))
    assert all(isinstance(d, Dialogue) for d in found)
    return found  # type: ignore[return-value]


def entries(sample: Path) -> dict[str, dict[str, Any]]:
    return {e["id"]: e for e in map(json.loads, sample.read_text().splitlines())}


def bfcl_state(entry: dict[str, Any], dialogue: Dialogue, run: str) -> dict[str, Any]:
    """The instances BFCL's own executor leaves after the dialogue's calls (each as BFCL's call text)."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    texts = [f"{c.name}({', '.join(f'{k}={v!r}' for k, v in json.loads(c.arguments).items())})"
             for m in dialogue.messages for c in m.tool_calls or []]
    _, instances = execute_multi_turn_func_call(texts, entry["initial_config"], entry["involved_classes"], run, entry["id"])
    return instances


def test_each_ground_truth_leaves_the_state_bfcl_s_own_executor_leaves(sample: Path, dialogues: list[Dialogue]) -> None:
    for dialogue in dialogues:
        instances = bfcl_state(entries(sample)[dialogue.id], dialogue, "toolfactory_gt")
        target = dialogue.generation["execution"]["target_state"]
        assert sorted(target) == sorted(instances)
        assert all(target[cls] == snapshot(instance) for cls, instance in instances.items())


def test_the_ground_truth_calls_and_their_real_results_are_the_dialogue(dialogues: list[Dialogue]) -> None:
    first = dialogues[0]  # multi_turn_base_0: cd(folder='document'), mkdir(dir_name='temp'), ...
    calls = [c for m in first.messages for c in m.tool_calls or []]
    assert [c.name for c in calls[:3]] == ["cd", "mkdir", "mv"]
    assert json.loads(first.messages[2].content or "") == {"current_working_directory": "document"}
    sort = next(c for c in calls if c.name == "sort")  # BFCL writes sort('final_report.pdf'): named by the signature
    assert json.loads(sort.arguments) == {"file_name": "final_report.pdf"}
    assert [m.content for m in first.messages if m.role == "user"][0].startswith("Move 'final_report.pdf'")


def test_toolfactory_verify_passes_every_ground_truth_through_the_execution_layer(sample: Path, tmp_path: Path) -> None:
    report = verify_file(sample, "bfcl_multi_turn", tmp_path)
    assert (report["parsed"], report["accepted"]) == (SAMPLE, SAMPLE)


def perturbed(dialogue: Dialogue, drop: str | None = None, change: tuple[str, str, Any] | None = None) -> Dialogue:
    """`dialogue` with the first call of function `drop` removed (with its answer), or the first
    call of `change[0]` given `change[1] = change[2]`; its recorded results stay those of the
    ground truth, so the sources are not held to them: the state decides."""
    copy = dialogue.model_copy(deep=True)
    for spec in copy.generation["execution"]["environments"].values():
        spec["deterministic"] = False
    for i, message in enumerate(copy.messages):
        call = (message.tool_calls or [None])[0]
        if call is not None and call.name == drop:
            del copy.messages[i:i + 2]
            return copy
        if call is not None and change is not None and call.name == change[0]:
            call.arguments = json.dumps({**json.loads(call.arguments), change[1]: change[2]})
            return copy
    raise AssertionError("no such call")


def verdicts(dialogue: Dialogue) -> list[str]:
    return sorted(v.code for v in asyncio.run(ExecutionLayer({}).verdicts(dialogue)))


def test_a_dropped_call_that_bfcl_s_checker_finds_changes_the_state_is_exec_state_mismatch(sample: Path, dialogues: list[Dialogue]) -> None:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import state_checker

    entry = entries(sample)["multi_turn_base_0"]
    ground = bfcl_state(entry, dialogues[0], "toolfactory_ground")
    no_mkdir = perturbed(dialogues[0], drop="mkdir")  # mv then renames the report to 'temp'
    assert not state_checker(bfcl_state(entry, no_mkdir, "toolfactory_no_mkdir"), ground)["valid"]
    # Without the folder, the calls into it answer BFCL's {"error": …} too: errors never recovered.
    assert set(verdicts(no_mkdir)) == {"exec_state_mismatch", "exec_error_unrecovered"}


def test_a_state_that_differs_after_a_turn_but_not_at_the_end_is_caught_as_bfcl_s_checker_catches_it(tmp_path: Path) -> None:
    # multi_turn_base_152 books a flight in turn 1 and cancels it in turn 2: without the booking
    # the final state is the same, but not the state after turn 1, which BFCL checks.
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker, state_checker

    name = "BFCL_v4_multi_turn_base.json"
    (tmp_path / "possible_answer").mkdir()
    for part in ("", "possible_answer/"):
        [line] = [line for line in (bfcl_data() / part / name).read_text().splitlines() if '"multi_turn_base_152"' in line]
        (tmp_path / part / name).write_text(line + "\n")
    [dialogue] = list(read(tmp_path / name, "bfcl_multi_turn"))
    assert isinstance(dialogue, Dialogue) and len(dialogue.generation["execution"]["target_turn_states"]) == 3
    entry = entries(tmp_path / name)["multi_turn_base_152"]
    unbooked = perturbed(dialogue, drop="book_flight")
    turns: list[list[str]] = []
    for message in unbooked.messages:  # one user message per turn in this entry
        if message.role == "user":
            turns.append([])
        turns[-1] += [f"{c.name}({', '.join(f'{k}={v!r}' for k, v in json.loads(c.arguments).items())})"
                      for c in message.tool_calls or []]
    assert len(turns) == len(entry["question"])
    ground = bfcl_state(entry, dialogue, "toolfactory_152")
    assert state_checker(bfcl_state(entry, unbooked, "toolfactory_152_unbooked"), ground)["valid"]  # the end alone: same
    truth = json.loads((tmp_path / "possible_answer" / name).read_text())["ground_truth"]
    checked = multi_turn_checker([[turn] for turn in turns], truth, entry, "multi_turn_base", "toolfactory_152")
    assert checked["error_type"] == "multi_turn:instance_state_mismatch"  # BFCL: not after turn 1
    [verdict] = asyncio.run(ExecutionLayer({}).verdicts(unbooked))
    assert verdict.code == "exec_state_mismatch" and verdict.message.startswith("after user turn 1, TravelAPI"), verdict.message
    # Asked to check from the record: the imported record keeps no state per turn, so only a
    # replay can hold it to the targets per turn, and the layer replays it.
    layer = ExecutionLayer({}, mode="record")
    [verdict] = asyncio.run(layer.verdicts(unbooked))
    assert verdict.code == "exec_state_mismatch" and verdict.message.startswith("after user turn 1, TravelAPI"), verdict.message
    assert layer.tally.live and not layer.tally.from_record
    del unbooked.generation["execution"]["target_turn_states"]  # a record of the final state alone
    assert verdicts(unbooked) == []


def test_a_changed_argument_of_a_read_only_call_changes_no_state_for_either_checker(sample: Path, dialogues: list[Dialogue]) -> None:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import state_checker

    entry = entries(sample)["multi_turn_base_0"]
    ground = bfcl_state(entry, dialogues[0], "toolfactory_ground2")
    other_pattern = perturbed(dialogues[0], change=("grep", "pattern", "revenue"))
    assert state_checker(bfcl_state(entry, other_pattern, "toolfactory_grep"), ground)["valid"]
    assert verdicts(other_pattern) == []
    # Held to its results (BFCL's environments are deterministic), the same record is caught.
    other_pattern.generation["execution"]["environments"]["GorillaFileSystem"]["deterministic"] = True
    assert verdicts(other_pattern) == ["exec_result_mismatch"]


def test_an_entry_without_ground_truth_or_with_an_unknown_class_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "BFCL_v4_multi_turn_base.json"
    question = [[{"role": "user", "content": "List the files."}]]
    path.write_text(json.dumps({"id": "a", "question": question, "initial_config": {}, "involved_classes": ["GorillaFileSystem"]}) + "\n"
                    + json.dumps({"id": "b", "question": question, "initial_config": {}, "involved_classes": ["Shell"],
                                  "ground_truth": [["ls()"]]}) + "\n")
    first, second = read(path, "bfcl_multi_turn")
    assert not isinstance(first, Dialogue) and first.reason == "missing_field" and "ground_truth" in first.message
    assert not isinstance(second, Dialogue) and second.reason == "wrong_type" and "'Shell'" in second.message


def test_a_stateless_class_starts_without_its_initial_config_as_in_bfcl_s_executor(tmp_path: Path) -> None:
    name = "BFCL_v4_multi_turn_base.json"
    pick = "multi_turn_base_35"  # MathAPI with {"precision": ...}, which MathAPI's constructor does not take
    entry = next(e for e in map(json.loads, (bfcl_data() / name).read_text().splitlines()) if e["id"] == pick)
    answer = next(a for a in map(json.loads, (bfcl_data() / "possible_answer" / name).read_text().splitlines()) if a["id"] == pick)
    assert entry["initial_config"].get("MathAPI")
    path = tmp_path / name
    path.write_text(json.dumps({**entry, "ground_truth": answer["ground_truth"]}) + "\n")
    [dialogue] = read(path, "bfcl_multi_turn")
    assert isinstance(dialogue, Dialogue), dialogue
    assert dialogue.generation["execution"]["environments"]["MathAPI"]["initial_state"] == {}
    instances = bfcl_state(entry, dialogue, "toolfactory_stateless")
    assert all(dialogue.generation["execution"]["target_state"][cls] == snapshot(i) for cls, i in instances.items())
    assert verdicts(dialogue) == []
