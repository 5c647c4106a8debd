"""Requests an obedient request writer gives for a stated mode, and the calls that follow them."""

from __future__ import annotations

import json
import random
from typing import Any

from toolfactory.simulator.chat import complete_chat
from toolfactory.simulator.instructions import CUES
from toolfactory.simulator.seeding import request_hash
from toolfactory.simulator.settings import SimulatorSettings
from toolfactory.simulator.stated_values import chained_pair, offered_functions
from toolfactory.stages.tasks.toolace import MODE_GUIDES, PROMPT

ALERT_FUNCTIONS: list[dict[str, Any]] = [
    {"name": "list_alerts", "description": "List the weather alerts active in a country.", "parameters": {
        "type": "object", "properties": {"country_code": {"type": "string", "pattern": "^[A-Z]{2}$"}},
        "required": ["country_code"]}},
    {"name": "get_alert", "description": "Get one alert.", "parameters": {
        "type": "object", "properties": {"alert_id": {"type": "string", "description": "Alert id as returned by list_alerts."}},
        "required": ["alert_id"]}},
    {"name": "get_forecast", "description": "Forecast variables for a location in a country.", "parameters": {
        "type": "object", "properties": {"location": {"type": "string"}, "country_code": {"type": "string"}},
        "required": ["location"]}},
]
REQUESTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"requests": {"type": "array", "minItems": 3, "maxItems": 3, "items": {
        "type": "object",
        "properties": {"request": {"type": "string", "minLength": 10},
                       "functions": {"type": "array", "items": {"enum": [f["name"] for f in ALERT_FUNCTIONS]}, "uniqueItems": True}},
        "required": ["request", "functions"]}}},
    "required": ["requests"],
}


def prompt_for(mode: str) -> str:
    functions = "\n".join(f"- {f['name']}: {f['description']} Parameters: {json.dumps(f['parameters'])}" for f in ALERT_FUNCTIONS)
    return PROMPT.format(count=3, guide=MODE_GUIDES[mode], style="short", note="", turns="", calls="", functions=functions)


def written(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    body = {"model": "m", "messages": messages,
            "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": REQUESTS_SCHEMA}}}
    reply = complete_chat(body, SimulatorSettings(obedience=1.0), request_hash(body))
    return list(json.loads(reply["choices"][0]["message"]["content"])["requests"])


def test_a_dependent_request_names_two_chained_functions_and_leaves_the_value_the_first_gives() -> None:
    for item in written([{"role": "user", "content": prompt_for("dependent")}]):
        assert item["functions"] == ["list_alerts", "get_alert"]
        assert "country code " in item["request"] and "alert id" not in item["request"]
        # The cue, and the next step in the words of the second function's description.
        assert item["request"].endswith(CUES["dependent"].rstrip(".") + ": get one alert.")


def test_a_dependent_request_is_built_on_the_link_the_prompt_states() -> None:
    # Documentation alone chains list_alerts -> get_alert; the prompt says get_forecast takes
    # the location list_alerts gives, and a reader takes the prompt at its word.
    stated = prompt_for("dependent").replace(
        "Functions offered", "Functions that can feed each other: list_alerts's result gives the location that "
        "get_forecast needs.\nFunctions offered")
    for item in written([{"role": "user", "content": stated}]):
        assert item["functions"] == ["list_alerts", "get_forecast"]
        assert "location" not in item["request"].split(CUES["dependent"].rstrip("."))[0]
        assert item["request"].endswith("forecast variables for a location in a country.")


def test_a_reask_keeps_the_mode_of_the_prompt_it_corrects() -> None:
    messages = [{"role": "user", "content": prompt_for("parallel")}, {"role": "assistant", "content": "{\"requests\": ["},
                {"role": "user", "content": "Your answer is not valid JSON. Reply again with only JSON that fits the schema."}]
    assert all(item["request"].endswith(CUES["parallel"]) for item in written(messages))


def test_a_documented_source_is_preferred_to_one_the_names_suggest() -> None:
    offered = offered_functions("Use concrete values.\n" + "\n".join(
        f"- {name}: {text} Parameters: {json.dumps(parameters)}" for name, text, parameters in (
            ("search_hotels", "Search hotels.", {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
            ("get_hotel", "One hotel.", {"type": "object", "properties": {"hotel_id": {"type": "string"}}, "required": ["hotel_id"]}),
            ("get_review", "One review.", {"type": "object", "properties": {"review_id": {
                "type": "string", "description": "Review id as returned by get_hotel."}}, "required": ["review_id"]}),
        )))
    assert chained_pair(offered, random.Random(0)) == ("get_hotel", "get_review", frozenset({"review_id"}))
    del offered["get_review"]
    assert chained_pair(offered, random.Random(0)) == ("search_hotels", "get_hotel", frozenset({"hotel_id"}))


def test_after_a_result_an_obedient_call_goes_to_the_function_documented_to_take_it() -> None:
    tools = [{"type": "function", "function": f} for f in ALERT_FUNCTIONS]
    chosen = []
    for k in range(6):
        body = {"model": "m", "tools": tools, "messages": [
            {"role": "system", "content": f"Attempt {k}."},
            {"role": "user", "content": "Forecast alerts. The details: country code TX. " + CUES["dependent"]},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "list_alerts", "arguments": "{\"country_code\": \"TX\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "{\"status_code\": 200, \"response\": {\"count\": 0}}"}]}
        reply = complete_chat(body, SimulatorSettings(obedience=1.0), request_hash(body))
        chosen += [c["function"]["name"] for c in reply["choices"][0]["message"]["tool_calls"]]
    assert set(chosen) == {"get_alert"}


def test_a_reask_without_the_schema_is_answered_with_the_schema_written_before() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    body = {"model": "m", "messages": [
        {"role": "user", "content": f"Name a city. Answer with only a JSON value that fits this JSON Schema:\n{json.dumps(schema)}"},
        {"role": "assistant", "content": "Here is the JSON: {\"city\": "},
        {"role": "user", "content": "Your answer is not valid JSON. Reply again with only JSON that fits the schema and fixes this."}]}
    reply = complete_chat(body, SimulatorSettings(profile="plain-text"), request_hash(body))
    content = reply["choices"][0]["message"]["content"]
    assert isinstance(json.loads(content[content.index("{"):content.rindex("}") + 1])["city"], str)


RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"alerts": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
        "alert_id": {"type": "string"}, "event": {"type": "string"}, "severity": {"type": "string"}}}},
        "count": {"type": "integer"}, "country": {"type": "string"}, "updated": {"type": "string"}},
}


def _response(obedience: float, k: int) -> dict[str, Any]:
    body = {"model": "m", "messages": [{"role": "user", "content": f"You simulate an API. Request {k}: list_alerts"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": RESPONSE_SCHEMA}}}
    reply = complete_chat(body, SimulatorSettings(obedience=obedience), request_hash(body))
    return dict(json.loads(reply["choices"][0]["message"]["content"]))


def test_a_model_that_follows_the_request_fills_in_every_documented_field() -> None:
    # An API's response has the fields its schema documents (the alert ids a dependent call
    # needs among them); a model not following the request leaves some out.
    followed = [_response(1.0, k) for k in range(20)]
    assert all(set(r) == set(RESPONSE_SCHEMA["properties"]) for r in followed)
    assert all(set(a) == {"alert_id", "event", "severity"} for r in followed for a in r["alerts"])
    drawn = [_response(0.0, k) for k in range(20)]
    assert any(set(r) != set(RESPONSE_SCHEMA["properties"]) for r in drawn)
