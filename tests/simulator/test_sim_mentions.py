"""Argument values taken from what the user says, when the simulator follows the request."""

from __future__ import annotations

import json
import random
from typing import Any

from toolfactory.simulator.chat import complete_chat
from toolfactory.simulator.mentions import mentioned_values
from toolfactory.simulator.seeding import request_hash
from toolfactory.simulator.settings import SimulatorSettings
from toolfactory.simulator.stated_values import offered_functions, values_sentences

from .sample_tools import WEATHER_TOOLS

EXPENSE = {
    "amount": {"type": "number", "exclusiveMinimum": 0},
    "category": {"type": "string", "enum": ["groceries", "dining", "travel"]},
    "country_code": {"type": "string", "pattern": "^[A-Z]{2}$"},
    "date": {"type": "string", "format": "date"},
}


def calls(text: str, sample: int, obedience: float = 1.0) -> list[tuple[str, dict[str, Any]]]:
    body = {"model": "m", "tools": WEATHER_TOOLS, "messages": [
        {"role": "system", "content": f"Analysis of sample {sample}."}, {"role": "user", "content": text}]}
    reply = complete_chat(body, SimulatorSettings(obedience=obedience), request_hash(body))
    return [(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in reply["choices"][0]["message"].get("tool_calls") or []]


def test_values_written_after_a_parameter_name_or_in_its_shape_are_found() -> None:
    text = "Record it. The details: amount 54.4, category dining, country code KE, date 2024-01-02."
    values = mentioned_values(EXPENSE, [text])
    assert values["amount"][0] == 54.4
    assert values["category"] == ["dining"]
    assert values["country_code"] == ["KE"]
    assert values["date"] == ["2024-01-02"]


def test_an_obedient_call_takes_the_city_the_user_names() -> None:
    name, arguments = calls("Weather in Lyon?", 0)[0]
    assert (name, arguments["city"]) == ("get_weather", "Lyon")


def test_samples_of_a_request_that_gives_its_values_agree_on_the_call() -> None:
    text = "What's the weather in Lyon for 3 days, metric units?"
    assert all(calls(text, k) == [("get_weather", {"city": "Lyon", "days": 3, "units": "metric"})] for k in range(4))


def test_two_places_fill_origin_and_destination_in_order() -> None:
    name, arguments = calls("Flights from Paris to Berlin on 2025-05-02", 0)[0]
    assert name == "search_flights"
    assert (arguments["origin"], arguments["destination"], arguments["date"]) == ("Paris", "Berlin", "2025-05-02")


def test_parallel_calls_take_one_named_place_each() -> None:
    text = "Weather in Lyon and Oslo. Please look up each of them at the same time."
    assert sorted(arguments["city"] for _, arguments in calls(text, 0)) == ["Lyon", "Oslo"]


def test_a_disobedient_simulator_still_invents_values() -> None:
    cities = {arguments.get("city") for k in range(8) for name, arguments in calls("Weather in Lyon?", k, 0.0) if name == "get_weather"}
    assert cities - {"Lyon"}


def test_a_request_writer_states_the_required_values_of_the_listed_functions() -> None:
    prompt = ("Use concrete values.\nFunctions offered to the assistant:\n"
              '- add_expense: Record a new expense. Parameters: {"type": "object", "properties": '
              '{"amount": {"type": "number", "minimum": 1}, "note": {"type": "string"}}, "required": ["amount"]}')
    offered = offered_functions(prompt)
    sentence = values_sentences(["add_expense"], offered, random.Random(1), ["lunch"])
    assert sentence is not None and sentence.startswith("The details: amount ")
    assert "amount" in mentioned_values(offered["add_expense"].parameters["properties"], [sentence])


def test_values_inside_quoted_json_are_not_stated() -> None:
    properties = {"return_type": {"type": "string", "enum": ["give_answer", "give_up_and_restart"]}}
    text = ('Previous actions:\n[{"name": "Finish", "arguments": "{\\"return_type\\": \\"give_up_and_restart\\"}"}]\n'
            "Make an action different from them.")
    assert mentioned_values(properties, [text]) == {}


def test_capitalised_words_are_no_codes_for_a_pattern() -> None:
    properties = {"symbol": {"type": "string", "pattern": "^[A-Z]{1,5}$"}}
    assert mentioned_values(properties, ["I think This is the one."]) == {}
    assert mentioned_values(properties, ["I think AAPL is the one."]) == {"symbol": ["AAPL"]}


def test_a_retry_prompt_listing_a_give_up_is_not_obeyed_as_a_value() -> None:
    finish = {"type": "function", "function": {"name": "Finish", "description": "Finish the task.", "parameters": {
        "type": "object", "properties": {"return_type": {"type": "string", "enum": ["give_answer", "give_up_and_restart"]},
                                         "final_answer": {"type": "string"}}, "required": ["return_type"]}}}
    shown = json.dumps([{"name": "Finish", "arguments": json.dumps({"return_type": "give_up_and_restart"})}], indent=2)
    kinds = set()
    for k in range(12):
        body = {"model": "m", "tools": [finish], "messages": [
            {"role": "system", "content": f"Attempt {k}."}, {"role": "user", "content": "Weather in Lyon?"},
            {"role": "user", "content": f"All previous trails failed. Previous actions:\n{shown}\nFinish differently."}]}
        reply = complete_chat(body, SimulatorSettings(obedience=1.0), request_hash(body))
        kinds |= {json.loads(c["function"]["arguments"])["return_type"] for c in reply["choices"][0]["message"]["tool_calls"]}
    assert "give_answer" in kinds


def test_a_latest_message_stating_no_value_leaves_the_choice_to_chance_among_equals() -> None:
    chosen = set()
    for k in range(12):
        body = {"model": "m", "tools": WEATHER_TOOLS, "messages": [
            {"role": "system", "content": f"Attempt {k}."}, {"role": "user", "content": "Weather in Lyon for 3 days?"},
            {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Now try something else."}]}
        reply = complete_chat(body, SimulatorSettings(obedience=1.0), request_hash(body))
        chosen |= {c["function"]["name"] for c in reply["choices"][0]["message"].get("tool_calls") or []}
    assert len(chosen) > 1


def test_parallel_repeats_without_stated_values_follow_the_draw() -> None:
    body = {"model": "m", "tools": [t for t in WEATHER_TOOLS if t["function"]["name"] == "get_weather"], "messages": [
        {"role": "user", "content": "Tell me something nice."}]}
    settings = SimulatorSettings(obedience=1.0, rate_parallel_calls=1.0, decline_when_irrelevant=False)
    sizes = set()
    for k in range(16):
        body["messages"] = [{"role": "system", "content": f"Attempt {k}."}, *body["messages"][-1:]]
        reply = complete_chat(body, settings, request_hash(body))
        sizes.add(len(reply["choices"][0]["message"].get("tool_calls") or []))
    assert 2 in sizes
