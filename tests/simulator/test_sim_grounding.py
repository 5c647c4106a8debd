"""Pure pieces of the tool behaviours: values found in tool results, grounding, relevance."""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from toolfactory.simulator.functions import FunctionSpec, is_relevant
from toolfactory.simulator.grounding import ground_arguments, result_values

BOOKING = {
    "type": "object",
    "properties": {
        "flight_id": {"type": "string", "pattern": "^[A-Z]{2}[0-9]+$"},
        "seats": {"type": "integer", "minimum": 1, "maximum": 4},
        "note": {"type": "string"},
    },
    "required": ["flight_id", "seats"],
    "additionalProperties": False,
}


def tool_message(content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(content)}


def test_result_values_search_nested_objects_and_lists_latest_first() -> None:
    messages = [
        {"role": "user", "content": "flights"},
        tool_message({"flights": [{"flightId": "AF1", "seats": 2}, {"flightId": "LH7"}]}),
        {"role": "assistant", "content": "ok"},
        tool_message({"response": {"flight_id": "BA3"}}),
        tool_message("not json at all"),
    ]
    values = result_values(messages)
    assert values["flight_id"] == ["BA3", "AF1", "LH7"]
    assert values["seats"] == [2]
    assert values["flights"] == [[{"flightId": "AF1", "seats": 2}, {"flightId": "LH7"}]]


def test_grounding_takes_a_valid_value_and_keeps_the_arguments_valid() -> None:
    values = {"flight_id": ["not an id", "AF12"], "seats": [9], "note": ["window seat"]}
    arguments = {"flight_id": "XY1", "seats": 2}
    grounded = ground_arguments(arguments, BOOKING, values)
    assert arguments == {"flight_id": "AF12", "seats": 2, "note": "window seat"}
    assert grounded == ["flight_id", "note"]
    jsonschema.validate(arguments, BOOKING)


def test_grounding_prefers_values_not_used_by_earlier_calls() -> None:
    arguments = {"flight_id": "XY1", "seats": 1}
    ground_arguments(arguments, BOOKING, {"flight_id": ["AF12", "LH7"]}, {"flight_id": ["AF12"]})
    assert arguments["flight_id"] == "LH7"


def test_grounding_leaves_invalid_arguments_alone() -> None:
    arguments = {"seats": 1}  # missing the required flight_id: no value can be proven safe
    assert ground_arguments(arguments, BOOKING, {"seats": [2]}) == []
    assert arguments == {"seats": 1}


def test_relevance_matches_word_stems_and_known_values() -> None:
    weather = FunctionSpec(
        "get_forecast",
        "Daily forecast",
        {"type": "object", "properties": {"city": {"type": "string"}}},
    )
    booking = FunctionSpec("book_table", "Reserve a restaurant table", {"type": "object"})
    assert is_relevant([booking], ["booking", "tonight"], "booking tonight")
    assert is_relevant([weather], ["forecasts"], "forecasts")
    assert is_relevant([weather], ["rain", "New", "York"], "rain in New York")
    assert not is_relevant([weather, booking], ["joke", "penguins"], "a joke about penguins")
