from __future__ import annotations

import json

import pytest

from toolfactory.models import Dialogue, Function, Message, ToolCall
from toolfactory.stages.verify.rules import RULES, check

WEATHER = Function(
    name="get_forecast",
    description="Forecast for a city.",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
            "units": {"type": "string", "enum": ["metric", "imperial"]},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
)


def dialogue(arguments: str = '{"city": "Lyon", "days": 3}', name: str = "get_forecast", answer: str | None = "Sunny.", respond: bool = True) -> Dialogue:
    messages = [
        Message(role="system", content="You can call functions."),
        Message(role="user", content="Weather in Lyon for 3 days?"),
        Message(role="assistant", tool_calls=[ToolCall(id="call_1", name=name, arguments=arguments)]),
    ]
    if respond:
        messages.append(Message(role="tool", tool_call_id="call_1", name=name, content=json.dumps({"temp": 21})))
    if answer is not None:
        messages.append(Message(role="assistant", content=answer))
    return Dialogue(id="d", task_id="t", tools=[WEATHER], messages=messages)


def codes(d: Dialogue) -> set[str]:
    return {v.code for v in check(d)}


def test_a_valid_dialogue_passes_every_rule() -> None:
    assert check(dialogue()) == []


@pytest.mark.parametrize(
    ("broken", "code"),
    [
        (dialogue(name="get_forecast_v2"), "call_unknown_function"),
        (dialogue(arguments='{"city": "Lyon"'), "call_arguments_not_json"),
        (dialogue(arguments='["Lyon"]'), "call_arguments_not_json"),
        (dialogue(arguments='{"days": 3}'), "call_missing_required"),
        (dialogue(arguments='{"city": "Lyon", "days": "3"}'), "call_argument_invalid"),
        (dialogue(arguments='{"city": "Lyon", "days": true}'), "call_argument_invalid"),
        (dialogue(arguments='{"city": "Lyon", "days": 9}'), "call_argument_invalid"),
        (dialogue(arguments='{"city": "Lyon", "units": "kelvin"}'), "call_argument_invalid"),
        (dialogue(arguments='{"city": "Lyon", "wind": 1}'), "call_argument_invalid"),
        (dialogue(answer=None), "dialogue_no_final_answer"),
        (dialogue(answer="  "), "dialogue_no_final_answer"),
        (dialogue(respond=False), "sample_unanswered_call"),
    ],
)
def test_each_rule_catches_its_fault(broken: Dialogue, code: str) -> None:
    assert code in codes(broken)


def test_integer_is_a_valid_number_and_bool_is_not_an_integer() -> None:
    number = Function(name="f", description="d", parameters={"type": "object", "properties": {"x": {"type": "number"}}})
    d = dialogue(arguments='{"x": 3}', name="f")
    d.tools = [number]
    assert "call_argument_invalid" not in codes(d)


def test_no_function_call_is_rejected_for_tool_modes() -> None:
    d = Dialogue(id="d", task_id="t", tools=[WEATHER], messages=[Message(role="user", content="hi"), Message(role="assistant", content="Hello!")])
    assert codes(d) == {"dialogue_no_function_call"}


def test_every_failed_rule_is_listed_not_only_the_first() -> None:
    assert codes(dialogue(arguments='{"days": "x"}', answer=None)) >= {"call_missing_required", "call_argument_invalid", "dialogue_no_final_answer"}


def test_disabled_rules_are_skipped() -> None:
    assert {v.code for v in check(dialogue(answer=None), frozenset({"dialogue_no_final_answer"}))} == set()


def test_every_rule_is_covered_here() -> None:
    assert set(RULES) == {
        "call_unknown_function", "call_arguments_not_json", "call_missing_required", "call_argument_invalid",
        "dialogue_no_function_call", "dialogue_no_final_answer", "sample_unanswered_call",
    }
