"""Filters of ToolAlpaca §4.1 and ToolLLM (filter_*)."""

from __future__ import annotations

import json

import pytest

from toolfactory.models import Message, ToolCall
from toolfactory.definitions.finish import FINISH_ANSWERED, FINISH_FUNCTION, FINISH_GAVE_UP
from toolfactory.stages.verify.rules import check
from toolfactory.stages.verify.rules.filters import MAX_STEPS

from .helpers import ANSWER, GROUNDING, WEATHER, chat, codes, dialogue


def steps(count: int, per_turn: int = 1) -> list[Message]:
    messages = [Message(role="user", content="Weather in five cities, please?")]
    n = 0
    while n < count:
        batch = [ToolCall(id=f"c{n + k}", name="get_forecast", arguments='{"city": "Lyon"}') for k in range(min(per_turn, count - n))]
        messages.append(Message(role="assistant", tool_calls=batch))
        messages += [Message(role="tool", tool_call_id=c.id, name=c.name, content='{"status_code": 200, "response": {}}') for c in batch]
        n += len(batch)
    return [*messages, Message(role="assistant", content=ANSWER)]


def test_at_most_five_steps_pass() -> None:
    assert check(chat(*steps(MAX_STEPS)), GROUNDING) == []


@pytest.mark.parametrize("per_turn", [1, 3, 6])
def test_more_than_five_calls_are_too_many_steps(per_turn: int) -> None:
    verdicts = check(chat(*steps(MAX_STEPS + 1, per_turn)), GROUNDING)
    assert [v.code for v in verdicts] == ["filter_too_many_steps"]


@pytest.mark.parametrize(
    ("body", "flagged"),
    [
        ({"status_code": 400, "error": "invalid arguments: 'city' is a required property"}, True),
        ({"status_code": 400, "error": "unknown function 'get_weather'"}, True),
        ({"status_code": 200, "response": {"temp": 21}}, False),
        ({"status_code": 404, "error": "city not found"}, False),  # a real API answer, not a pipeline error
        ({"status_code": 400, "response": {"detail": "bad"}}, False),  # no error key
        ('not JSON but mentions "status_code": 400', False),
        ({"error": "", "response": "{'temp': 21}"}, False),  # ToolBench's observation shape
    ],
)
def test_parse_error_is_the_pipelines_400_error(body: object, flagged: bool) -> None:
    found = codes(dialogue(response=body))
    assert found == ({"filter_parse_error"} if flagged else set())
    if flagged:
        assert [v.path for v in check(dialogue(response=body))] == ["messages[3].content"]


def finish_dialogue(arguments: str | None, observation: str = FINISH_ANSWERED, tools: list | None = None) -> object:  # type: ignore[type-arg]
    d = dialogue(tools=[WEATHER, FINISH_FUNCTION] if tools is None else tools)
    if arguments is not None:
        d.messages[-1:-1] = [
            Message(role="assistant", tool_calls=[ToolCall(id="fin", name="Finish", arguments=arguments)]),
            Message(role="tool", tool_call_id="fin", name="Finish", content=observation),
        ]
    return d


def test_a_path_that_gives_the_answer_passes() -> None:
    assert check(finish_dialogue(json.dumps({"return_type": "give_answer", "final_answer": ANSWER}))) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (json.dumps({"return_type": "give_up_and_restart"}), "only with return_type give_up_and_restart"),
        (None, "never called"),
    ],
)
def test_a_path_that_never_gives_the_answer_is_not_finished(arguments: str | None, message: str) -> None:
    verdicts = check(finish_dialogue(arguments, FINISH_GAVE_UP))  # type: ignore[arg-type]
    assert [v.code for v in verdicts] == ["filter_search_not_finished"]
    assert message in verdicts[0].message


def test_finish_with_broken_arguments_has_not_given_the_answer() -> None:
    assert codes(finish_dialogue('{"return_type": "give_answer"')) == {"call_arguments_not_json", "filter_search_not_finished"}  # type: ignore[arg-type]


def test_without_finish_among_the_tools_the_rule_does_not_apply() -> None:
    assert "filter_search_not_finished" not in codes(dialogue())
