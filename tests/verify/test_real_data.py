"""The rules on the papers' released data: ToolBench's DFSDT answers (ToolLLM) and ToolAlpaca's
golden evaluation calls. What is asserted is what is true of that data (see the comments)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolfactory.models import Dialogue, Message, ToolCall
from toolfactory.definitions.convert import convert
from toolfactory.stages.verify.rules import check

from toolfactory.formats.toolbench import from_train_messages, from_tree, load


@pytest.fixture(scope="module")
def toolbench(shared_data: Path) -> list[tuple[str, dict[str, Any], list[Any]]]:
    return load(shared_data)


def calls_of(d: Dialogue) -> list[tuple[str, str]]:
    return [(c.name, c.arguments) for m in d.messages for c in m.tool_calls or []]


def test_the_released_winning_paths_pass_every_rule(toolbench) -> None:  # type: ignore[no-untyped-def]
    converted = 0
    for name, answer, tools in toolbench:
        d = from_train_messages(answer, tools, name)
        if not answer["answer_generation"]["valid_data"]:
            assert d is None  # no training messages are released for an invalid answer
            continue
        converted += 1
        assert [(v.code, v.path, v.message) for v in check(d)] == []
        # The winning path is also a give_answer leaf of the DFSDT tree, call for call.
        tree_answers = [t for t, kind in from_tree(answer, tools, name) if kind == "give_answer"]
        assert calls_of(d) in [calls_of(t) for t in tree_answers]
    assert converted == 4


def test_search_not_finished_follows_the_path_not_finish_type(toolbench) -> None:  # type: ignore[no-untyped-def]
    kinds: dict[str | None, int] = {}
    for name, answer, tools in toolbench:
        generation = answer["answer_generation"]
        # finish_type says give_answer in every file, even for 69 whose search never answered:
        # valid_data and the tree, not finish_type, tell whether the search finished.
        assert generation["finish_type"] == "give_answer"
        paths = from_tree(answer, tools, name)
        assert paths
        for d, kind in paths:
            kinds[kind] = kinds.get(kind, 0) + 1
            flagged = "filter_search_not_finished" in {v.code for v in check(d)}
            assert flagged == (kind != "give_answer"), (d.id, kind)
        answered = any(kind == "give_answer" for _, kind in paths)
        assert answered == generation["valid_data"] == bool(generation["final_answer"])
    assert kinds["give_answer"] == 4 and kinds["give_up_and_restart"] == 3 and kinds[None] >= 5


def test_unknown_function_matches_the_environments_own_verdict(toolbench) -> None:  # type: ignore[no-untyped-def]
    hallucinated = 0
    for name, answer, tools in toolbench:
        for d, _ in from_tree(answer, tools, name):
            flagged = {v.path for v in check(d) if v.code == "call_unknown_function"}
            for i, message in enumerate(d.messages):
                if not message.tool_calls:
                    continue
                observation = d.messages[i + 1].content or ""
                said_unknown = "No such function name" in observation
                hallucinated += said_unknown
                assert (f"messages[{i}].tool_calls[0].name" in flagged) == said_unknown, (d.id, i)
    assert hallucinated >= 10


def test_a_long_abandoned_search_is_too_many_steps(toolbench) -> None:  # type: ignore[no-untyped-def]
    for name, answer, tools in toolbench:
        for d, _ in from_tree(answer, tools, name):
            steps = len(calls_of(d))
            assert ("filter_too_many_steps" in {v.code for v in check(d)}) == (steps > 5)


# -- ToolAlpaca -------------------------------------------------------------------------------

def golden_dialogues(shared_data: Path) -> list[tuple[Dialogue, list[dict[str, str]], set[str]]]:
    out = []
    for raw in json.loads((shared_data / "toolalpaca/eval_simulated.json").read_text()):
        tool = convert("toolalpaca", raw)[0]
        for k, (instruction, golden) in enumerate(zip(raw["Instructions"], raw["Golden_Answers"])):
            messages = [Message(role="user", content=instruction)]
            for s, step in enumerate(golden):
                call = ToolCall(id=f"call_{s}", name=step["Action"], arguments=step["Action_Input"])
                messages += [
                    Message(role="assistant", tool_calls=[call]),
                    Message(role="tool", tool_call_id=call.id, name=call.name, content='{"status_code": 200, "response": {}}'),
                ]
            messages.append(Message(role="assistant", content="Done."))
            d = Dialogue(id=f"{tool.name}/{k}", task_id="t", tools=tool.functions, messages=messages, recipe="toolalpaca")
            out.append((d, golden, {f.name for f in tool.functions}))
    return out


def test_toolalpaca_golden_calls(shared_data: Path) -> None:
    dialogues = golden_dialogues(shared_data)
    assert len(dialogues) == 100
    enum_paths = []
    for d, golden, names in dialogues:
        verdicts = check(d)
        for s, step in enumerate(golden):
            call_path = f"messages[{1 + 2 * s}].tool_calls[0]"
            at_call = {v.code for v in verdicts if v.path.startswith(call_path)}
            # Golden inputs chain steps with templates such as {"animeId": ${animeId from searchAnime}}:
            # not JSON, and flagged exactly when they do not parse.
            try:
                json.loads(step["Action_Input"])
                parses = True
            except json.JSONDecodeError:
                parses = False
            assert ("call_arguments_not_json" in at_call) == (not parses), (d.id, s)
            # "[Optional]name" is no function of the tool; "getDetails" (ask the user) is ToolAlpaca's own.
            assert ("call_unknown_function" in at_call) == (step["Action"] not in names | {"getDetails"}), (d.id, s)
        enum_paths += [v.path for v in verdicts if v.code == "call_argument_enum"]
    # A real fault of the golden answers: optional enum parameters sent as "" (Axolotl's gender/size).
    assert enum_paths and all(p.endswith(("/gender", "/size")) for p in enum_paths)
