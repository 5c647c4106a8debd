"""The mode a dialogue shows, and the verify rule that holds a dialogue to its target mode."""

from __future__ import annotations

import json

from toolfactory.models import Dialogue, Function, Message, ToolCall
from toolfactory.stages.dialogues.assistant import decision_key
from toolfactory.stages.dialogues.modes import matches_target, shown_mode
from toolfactory.stages.verify.rules import check

WEATHER = Function(name="get_weather", description="Weather of a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
HOTELS = Function(name="find_hotel", description="Hotels near a landmark.",
                  parameters={"type": "object", "properties": {"near": {"type": "string"}}, "required": ["near"]})


def call(name: str, cid: str, **arguments: object) -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=json.dumps(arguments))


def dialogue(*messages: Message, target: str | None = None, tools: list[Function] | None = None,
             asked_at: int | None = None) -> Dialogue:
    generation = {"clarification_turns": [asked_at]} if asked_at is not None else {}
    d = Dialogue(id="d", task_id="t", tools=tools or [WEATHER, HOTELS], target_mode=target, generation=generation,
                 messages=[Message(role="system", content="You can call functions."), *messages])
    d.mode = shown_mode(d)
    return d


def user(text: str) -> Message:
    return Message(role="user", content=text)


def assistant(text: str | None = None, *calls: ToolCall) -> Message:
    return Message(role="assistant", content=text, tool_calls=list(calls) or None)


def tool(cid: str, name: str, body: object) -> Message:
    return Message(role="tool", tool_call_id=cid, name=name, content=json.dumps(body))


def test_each_mode_is_recognised_from_the_messages() -> None:
    single = dialogue(user("Weather in Lyon?"), assistant(None, call("get_weather", "1", city="Lyon")),
                      tool("1", "get_weather", {"temp": 21}), assistant("It is 21 degrees in Lyon."))
    parallel = dialogue(user("Weather in Lyon and Oslo?"),
                        assistant(None, call("get_weather", "1", city="Lyon"), call("get_weather", "2", city="Oslo")),
                        tool("1", "get_weather", {"temp": 21}), tool("2", "get_weather", {"temp": 4}), assistant("21 and 4 degrees."))
    dependent = dialogue(user("Where is the warmest museum?"), assistant(None, call("get_weather", "1", city="Lyon")),
                         tool("1", "get_weather", {"landmark": "Musee des Confluences"}),
                         assistant(None, call("find_hotel", "2", near="Musee des Confluences")),
                         tool("2", "find_hotel", {"hotel": "Hotel Lumiere"}), assistant("Hotel Lumiere."))
    declined = dialogue(user("Book me a dentist."), assistant("None of my tools can book a dentist, sorry."))
    asked = dialogue(user("What is the weather?"), assistant("Please tell me the city you mean."), user("Lyon, please."),
                     assistant(None, call("get_weather", "1", city="Lyon")), tool("1", "get_weather", {"temp": 21}),
                     assistant("It is 21 degrees."), asked_at=2)
    assert [d.mode for d in (single, parallel, dependent, declined, asked)] == [
        "single", "parallel", "dependent", "non_tool", "missing_params"]


def test_a_dialogue_is_held_to_its_target_mode_by_the_verifier() -> None:
    single = [user("Weather in Lyon?"), assistant(None, call("get_weather", "1", city="Lyon")),
              tool("1", "get_weather", {"temp": 21}), assistant("It is 21 degrees in Lyon.")]
    assert matches_target(dialogue(*single, target="single"))
    assert matches_target(dialogue(*single, target="multiple"))  # one of several similar functions
    assert not matches_target(dialogue(*single, target="multiple", tools=[WEATHER]))
    assert matches_target(dialogue(*single, target="open")) and matches_target(dialogue(*single))
    wrong = dialogue(*single, target="parallel")
    codes = {v.code for v in check(wrong)}
    assert "dialogue_mode_mismatch" in codes
    assert "dialogue_mode_mismatch" not in {v.code for v in check(dialogue(*single, target="single"))}
    declined = dialogue(user("Book me a dentist."), assistant("None of my tools can book a dentist."), target="non_tool")
    assert not {"dialogue_mode_mismatch", "dialogue_no_function_call"} & {v.code for v in check(declined)}
    no_call = dialogue(user("Weather in Lyon?"), assistant("It is sunny."), target="open")
    assert "dialogue_no_function_call" in {v.code for v in check(no_call)}


def test_self_consistency_compares_decisions_not_ids_or_argument_order() -> None:
    a = [call("get_weather", "x", city="Lyon", units="metric")]
    b = [ToolCall(id="y", name="get_weather", arguments='{"units": "metric", "city": "Lyon"}')]
    c = [call("get_weather", "z", city="Oslo", units="metric")]
    assert decision_key(a) == decision_key(b) != decision_key(c)
    assert decision_key([]) != decision_key(a)
    both = [call("get_weather", "1", city="Lyon"), call("find_hotel", "2", near="x")]
    assert decision_key(both) == decision_key(list(reversed(both)))


def test_a_question_mark_alone_does_not_make_a_clarification() -> None:
    # The user agent read the turn as an answer: a follow-up request is no answer to a question.
    d = dialogue(user("Weather in Lyon?"), assistant("Shall I also check Oslo?"), user("Now book a hotel near the Louvre."),
                 assistant(None, call("find_hotel", "1", near="Louvre")), tool("1", "find_hotel", {"hotel": "H"}),
                 assistant("Hotel H."))
    assert d.mode == "single"


def test_a_clarification_without_a_question_mark_is_recognised() -> None:
    d = dialogue(user("What is the weather?"), assistant("I need the city to look it up."), user("Lyon."),
                 assistant(None, call("get_weather", "1", city="Lyon")), tool("1", "get_weather", {"temp": 21}),
                 assistant("21 degrees."), asked_at=2)
    assert d.mode == "missing_params"
