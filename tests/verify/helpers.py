"""Small dialogues for the rule tests: one weather function, one call, one answer."""

from __future__ import annotations

import json
from typing import Any

from toolfactory.models import Dialogue, Function, Message, ToolCall
from toolfactory.stages.verify.rules import check

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

ANSWER = "It will be sunny in Lyon for the next three days, with highs around 21 degrees."


def dialogue(
    arguments: str = '{"city": "Lyon", "days": 3}',
    name: str = "get_forecast",
    answer: str | None = ANSWER,
    respond: bool = True,
    tools: list[Function] | None = None,
    user: str = "Weather in Lyon for 3 days?",
    response: Any = None,
    **fields: Any,
) -> Dialogue:
    messages = [
        Message(role="system", content="You can call functions."),
        Message(role="user", content=user),
        Message(role="assistant", tool_calls=[ToolCall(id="call_1", name=name, arguments=arguments)]),
    ]
    if respond:
        body = response if response is not None else {"status_code": 200, "response": {"temp": 21}}
        content = body if isinstance(body, str) else json.dumps(body)  # a str is the raw content
        messages.append(Message(role="tool", tool_call_id="call_1", name=name, content=content))
    if answer is not None:
        messages.append(Message(role="assistant", content=answer))
    return Dialogue(id="d", task_id="t", tools=[WEATHER] if tools is None else tools, messages=messages, **fields)


def with_schema(parameters: dict[str, Any], arguments: Any) -> Dialogue:
    """A dialogue calling a function `f` with `parameters` and `arguments` (a value or JSON text)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return dialogue(arguments=text, name="f", tools=[Function(name="f", description="A test function.", parameters=parameters)],
                    user=f"Call f with {text}")  # the values are the user's


# The fixtures' argument values are made up for the rule under test, not given by their user:
# the grounding warnings they draw are left out here (tests/verify_rules tests grounding).
GROUNDING = frozenset({"arg_value_ungrounded", "arg_text_ungrounded"})


def codes(d: Dialogue, disabled: frozenset[str] = frozenset()) -> set[str]:
    return {v.code for v in check(d, disabled | GROUNDING)}


def paths(d: Dialogue, code: str) -> list[str]:
    return [v.path for v in check(d) if v.code == code]


def chat(*turns: tuple[str, str | None] | Message, tools: list[Function] | None = None, **fields: Any) -> Dialogue:
    """A dialogue from (role, content) pairs or Messages."""
    messages = [t if isinstance(t, Message) else Message(role=t[0], content=t[1]) for t in turns]  # type: ignore[arg-type]
    return Dialogue(id="d", task_id="t", tools=[WEATHER] if tools is None else tools, messages=messages, **fields)
