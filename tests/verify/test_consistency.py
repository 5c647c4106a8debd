"""Data sample consistency rules (sample_*)."""

from __future__ import annotations

import json

import pytest

from toolfactory.models import Dialogue, Function, Message, ToolCall
from toolfactory.stages.verify.rules import check

from .helpers import WEATHER, chat, codes, dialogue

SYSTEM = ("system", "You can call functions.")
USER = ("user", "Weather in Lyon and Paris?")
ANSWER = ("assistant", "Sunny in both cities, with highs around 21 degrees.")


def call(id_: str, city: str = "Lyon", name: str = "get_forecast") -> ToolCall:
    return ToolCall(id=id_, name=name, arguments=json.dumps({"city": city}))


def calling(*calls: ToolCall, content: str | None = None) -> Message:
    return Message(role="assistant", content=content, tool_calls=list(calls))


def response(id_: str | None, name: str | None = "get_forecast") -> Message:
    return Message(role="tool", tool_call_id=id_, name=name, content='{"status_code": 200, "response": {"temp": 21}}')


def test_parallel_calls_answered_in_any_order_pass() -> None:
    d = chat(SYSTEM, USER, calling(call("a"), call("b", "Paris")), response("b"), response("a"), ANSWER)
    assert check(d) == []


@pytest.mark.parametrize(
    ("broken", "paths"),
    [
        (dialogue(respond=False), ["messages[2].tool_calls[0]"]),
        (chat(SYSTEM, USER, calling(call("a"), call("b", "Paris")), response("a"), ANSWER), ["messages[2].tool_calls[1]"]),
        # a response to an id that no call has: the response is an orphan and the call is unanswered
        (chat(SYSTEM, USER, calling(call("a")), response("zzz"), ANSWER), ["messages[3]", "messages[2].tool_calls[0]"]),
        # two responses to one call
        (chat(SYSTEM, USER, calling(call("a")), response("a"), response("a"), ANSWER), ["messages[4]"]),
        # a response without an id answers nothing
        (chat(SYSTEM, USER, calling(call("a")), response(None), ANSWER), ["messages[3]", "messages[2].tool_calls[0]"]),
    ],
)
def test_unanswered_call(broken: Dialogue, paths: list[str]) -> None:
    verdicts = check(broken)
    assert {v.code for v in verdicts} == {"sample_unanswered_call"}
    assert [v.path for v in verdicts] == paths


def test_a_response_before_its_call_answers_nothing() -> None:
    d = chat(SYSTEM, USER, Message(role="assistant", content="Checking."), response("a"), calling(call("a")), response("a"), ANSWER)
    # Three faults: the early response answers no open call, it follows an assistant turn without calls,
    # and the call comes after that text turn with no user turn between.
    assert codes(d) == {"sample_unanswered_call", "sample_role_order", "sample_call_after_answer"}


def test_response_name_mismatch_is_its_own_code() -> None:
    d = chat(SYSTEM, USER, calling(call("a")), response("a", name="get_weather"), ANSWER)
    verdicts = check(d)
    assert [(v.code, v.path) for v in verdicts] == [("sample_response_name_mismatch", "messages[3].name")]


def test_a_response_without_a_name_is_not_a_mismatch() -> None:
    assert check(chat(SYSTEM, USER, calling(call("a")), response("a", name=None), ANSWER)) == []


def test_duplicate_call_id_answered_in_order_is_only_a_duplicate() -> None:
    sequential = chat(SYSTEM, USER, calling(call("a")), response("a"), calling(call("a", "Paris")), response("a"), ANSWER)
    assert [(v.code, v.path) for v in check(sequential)] == [("sample_duplicate_call_id", "messages[4].tool_calls[0].id")]
    parallel = chat(SYSTEM, USER, calling(call("a"), call("a", "Paris")), response("a"), response("a"), ANSWER)
    assert [(v.code, v.path) for v in check(parallel)] == [("sample_duplicate_call_id", "messages[2].tool_calls[1].id")]


@pytest.mark.parametrize(
    ("turns", "path"),
    [
        ([USER, SYSTEM, calling(call("a")), response("a"), ANSWER], "messages[1]"),  # system not first
        ([SYSTEM, USER, calling(call("a")), response("a"), ("system", "Be brief."), ANSWER], "messages[4]"),
        ([SYSTEM, ("assistant", "Hello! How can I help?"), USER, calling(call("a")), response("a"), ANSWER], "messages[1]"),
        ([SYSTEM, USER, calling(call("a")), ("user", "Any news?"), response("a"), ANSWER], "messages[4]"),  # tool after user
        ([SYSTEM, USER, ("user", "Hurry, please."), calling(call("a")), response("a"), ANSWER], "messages[2]"),
        ([response("a"), USER, calling(call("a")), response("a"), ANSWER], "messages[0]"),  # tool first
    ],
)
def test_role_order(turns: list, path: str) -> None:  # type: ignore[type-arg]
    verdicts = [v for v in check(chat(*turns)) if v.code == "sample_role_order"]
    assert [v.path for v in verdicts] == [path]


@pytest.mark.parametrize(
    "turns",
    [
        [USER, calling(call("a")), response("a"), ANSWER],  # no system prompt
        # ToolLLM's DFSDT paths interject a user turn after a tool response
        [SYSTEM, USER, calling(call("a")), response("a"), ("user", "Try something different."), calling(call("b")), response("b"), ANSWER],
        [SYSTEM, USER, calling(call("a")), response("a"), ("assistant", "Got it."), ANSWER],  # consecutive assistant turns
        [SYSTEM, USER, calling(call("a")), response("a"), ANSWER, ("user", "And Paris?"), calling(call("b", "Paris")), response("b"), ANSWER],
    ],
)
def test_allowed_orders(turns: list) -> None:  # type: ignore[type-arg]
    assert check(chat(*turns)) == []


def test_no_user_turn_is_a_missing_field_not_a_role_order_fault() -> None:
    d = chat(SYSTEM, calling(call("a")), response("a"), ANSWER)
    assert codes(d) == {"dialogue_missing_field"}


# -- a call after an answer ----------------------------------------------------------------------


def test_a_call_after_an_answer_without_a_user_turn_is_flagged() -> None:
    d = chat(SYSTEM, USER, ANSWER, calling(call("a")), response("a"), ANSWER)
    assert [(v.code, v.path) for v in check(d)] == [("sample_call_after_answer", "messages[3]")]


@pytest.mark.parametrize("text", ["Let me look that up:", "The weather in Paris is sunny.", "Je vérifie."])
def test_a_text_turn_then_a_call_is_flagged_whatever_the_text_says(text: str) -> None:
    d = chat(SYSTEM, USER, ("assistant", text), calling(call("a")), response("a"), ANSWER)
    assert [(v.code, v.path) for v in check(d)] == [("sample_call_after_answer", "messages[3]")]


def test_a_call_after_an_answer_is_allowed_where_finish_ends_the_task() -> None:
    finish = Function(name="Finish", description="End the task.", parameters={"type": "object", "properties": {}})
    d = chat(SYSTEM, USER, ANSWER, calling(call("a")), response("a"), ANSWER, tools=[WEATHER, finish])
    assert "sample_call_after_answer" not in codes(d)
