"""Dialogues stopped at the turn the verify stage's rule layer is certain to reject."""

from __future__ import annotations

import json

import pytest

from toolfactory.config import load_config
from toolfactory.models import Dialogue, Function, Message, Task, ToolCall
from toolfactory.stages.dialogues.early import EarlyCheck
from toolfactory.stages.dialogues.modes import shown_mode
from benchmarks.corpus import valid_dialogues
from toolfactory.stages.verify.corruption import corruptions
from toolfactory.stages.verify.policy import for_recipe
from toolfactory.stages.verify.rules import check, errors

WEATHER = Function(name="get_weather", description="Weather of a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
HOTELS = Function(name="find_hotel", description="Hotels near a landmark.",
                  parameters={"type": "object", "properties": {"near": {"type": "string"}}, "required": ["near"]})
TOOLS = [WEATHER, HOTELS]
OPENING = [Message(role="system", content="You can call functions."), Message(role="user", content="Weather in Lyon?")]


def task(recipe: str, mode: str) -> Task:
    return Task(id="t", tools=[], instruction="Weather in Lyon?", recipe=recipe, mode=mode)


def checks(recipe: str, mode: str, *overrides: str) -> EarlyCheck:
    found = EarlyCheck.for_task(task(recipe, mode), load_config(None, list(overrides), environ={}))
    assert found is not None
    return found


def turn(*calls: tuple[str, dict[str, object] | str]) -> Message:
    return Message(role="assistant", tool_calls=[
        ToolCall(id=f"c{i}", name=name, arguments=args if isinstance(args, str) else json.dumps(args))
        for i, (name, args) in enumerate(calls)
    ])


def codes(early: EarlyCheck, *messages: Message) -> set[str]:
    return {v.code for v in early.findings(TOOLS, [*OPENING, *messages])}


def test_a_call_the_rules_reject_stops_a_recipe_without_error_recovery() -> None:
    assert codes(checks("toolace", "single"), turn(("get_wether", {"city": "Lyon"}))) == {"call_unknown_function"}
    assert codes(checks("toolace", "single"), turn(("get_weather", {}))) == {"call_missing_required"}
    assert codes(checks("toolace", "single"), turn(("get_weather", "{city: Lyon"))) == {"call_arguments_not_json"}
    assert codes(checks("toolace", "single"), turn(("get_weather", {"city": "Lyon"}))) == set()


def test_a_recipe_that_keeps_error_recovery_goes_on_after_a_bad_call() -> None:
    assert codes(checks("toolalpaca", "open"), turn(("get_weather", {}))) == set()


def test_a_disabled_rule_never_stops_a_dialogue() -> None:
    early = checks("toolace", "single", "verify.disabled_rules=[call_missing_required]")
    assert codes(early, turn(("get_weather", {}))) == set()


def test_more_calls_than_the_policy_allows() -> None:
    six = [turn(("get_weather", {"city": f"city {i}"})) for i in range(6)]
    assert codes(checks("toolalpaca", "open"), *six[:5]) == set()
    assert codes(checks("toolalpaca", "open"), *six) == {"filter_too_many_steps"}


@pytest.mark.parametrize(("target", "messages", "rejected"), [
    ("non_tool", [turn(("get_weather", {"city": "Lyon"}))], True),
    ("missing_params", [turn(("get_weather", {"city": "Lyon"}))], True),
    ("single", [turn(("get_weather", {"city": "Lyon"}), ("get_weather", {"city": "Oslo"}))], True),
    ("dependent", [turn(("get_weather", {"city": "Lyon"}), ("get_weather", {"city": "Oslo"}))], True),
    ("parallel", [turn(("get_weather", {"city": "Lyon"}), ("get_weather", {"city": "Oslo"}))], False),
    ("parallel", [turn(("get_weather", {"city": "Lyon"}))], False),  # a later turn may still call in parallel
    ("single", [turn(("get_weather", {"city": "Lyon"}))], False),
    ("missing_params", [Message(role="assistant", content="Which city?")], False),
])
def test_a_mode_that_can_no_longer_be_the_target(target: str, messages: list[Message], rejected: bool) -> None:
    assert (codes(checks("toolace", target), *messages) == {"dialogue_mode_mismatch"}) is rejected


def test_switched_off() -> None:
    assert EarlyCheck.for_task(task("toolace", "single"), load_config(None, ["dialogues.reject_early=false"], environ={})) is None


def test_what_a_prefix_is_rejected_for_the_whole_dialogue_is_rejected_for() -> None:
    """Monotone: on every prefix of faulty and valid dialogues, each early finding is an error
    the verify stage's rules find on the whole dialogue, under each recipe's policy."""
    config = load_config(None, [], environ={})
    samples = [d for clean in valid_dialogues(3, seed=5) for d in [clean, *(c.dialogue for c in corruptions(clean, seed=5))]]
    stopped = 0
    for recipe in ("toolace", "toolalpaca", "toolllm"):
        for mode in ("single", "parallel", "open"):
            early = EarlyCheck.for_task(task(recipe, mode), config)
            assert early is not None
            for full in samples:
                whole = Dialogue.model_validate({**full.model_dump(), "recipe": recipe, "target_mode": mode})
                whole.mode = shown_mode(whole)
                rejecting = {v.code for v in errors(check(whole, policy=for_recipe(recipe, {"toolalpaca": 5}, ["toolalpaca"])))}
                for end in range(1, len(whole.messages) + 1):
                    found = {v.code for v in early.findings(whole.tools, whole.messages[:end])}
                    stopped += bool(found)
                    assert found <= rejecting, (recipe, mode, end, found, rejecting)
    assert stopped > 20  # the property is not vacuous


def test_a_finished_dialogue_is_rejected_for_what_the_verify_stage_s_rules_reject_it_for() -> None:
    config = load_config(None, ["verify.disabled_rules=[call_missing_required]"], environ={})
    samples = [d for clean in valid_dialogues(3, seed=6) for d in [clean, *(c.dialogue for c in corruptions(clean, seed=6))]]
    rejected = 0
    for recipe in ("toolace", "toolalpaca", "toolllm"):
        early = EarlyCheck.for_task(task(recipe, "open"), config)
        assert early is not None
        for full in samples:
            whole = Dialogue.model_validate({**full.model_dump(), "recipe": recipe, "target_mode": "open"})
            whole.mode = shown_mode(whole)
            expected = errors(check(whole, frozenset({"call_missing_required"}),
                                    policy=for_recipe(recipe, {"toolalpaca": 5}, ["toolalpaca"])))
            assert early.finished(whole) == expected
            rejected += bool(expected)
    assert rejected > 20
    # An answer with no call at all: the finished check rejects what a prefix check cannot.
    answered = [*OPENING, Message(role="assistant", content="It is sunny in Lyon.")]
    early = checks("toolllm", "open")
    assert not early.findings(TOOLS, answered)
    finished = Dialogue(id="d", task_id="t", tools=TOOLS, messages=answered, recipe="toolllm", target_mode="open")
    finished.mode = shown_mode(finished)
    assert {v.code for v in early.finished(finished)} == {"dialogue_no_function_call"}
