"""Arguments of the form a parameter's description documents (quoted examples, spelled-out formats),
and a retry that does not send again the value an error refused."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from toolfactory.simulator import SimulatorSettings, instance_for, start_simulator
from toolfactory.simulator.documented import documented_examples

SEEDS = range(40)
CONTEXT = ["what", "time", "is", "it", "over", "there"]
# mcp-server-time's own documentation of its parameters.
TIMEZONE = {
    "type": "string",
    "description": "IANA timezone name (e.g., 'America/New_York', 'Europe/London'). "
                   "Use 'UTC' as local timezone if no timezone provided by the user.",
}


def _values(schema: dict[str, object], name: str) -> list[object]:
    wrapped = {"type": "object", "properties": {name: schema}, "required": [name]}
    return [instance_for(wrapped, random.Random(seed), CONTEXT)[name] for seed in SEEDS]


def test_a_string_the_lexicon_does_not_know_takes_the_examples_its_description_quotes() -> None:
    assert set(_values(TIMEZONE, "timezone")) <= {"America/New_York", "Europe/London", "UTC"}


def test_an_unquoted_list_of_codes_after_e_g_is_read_but_prose_is_not() -> None:
    assert documented_examples({"description": "Zone, e.g. America/New_York, Europe/London."}) == [
        "America/New_York", "Europe/London"]
    assert documented_examples({"description": "Where to send it, e.g. the shop name."}) == []


def test_an_example_that_breaks_the_schema_is_not_taken() -> None:
    schema = {**TIMEZONE, "maxLength": 5}
    assert set(_values(schema, "timezone")) == {"UTC"}


def test_a_format_the_description_spells_out_wins_over_the_property_name() -> None:
    schema = {"type": "string", "description": "When it happened, as DD/MM/YYYY"}
    assert all(re.fullmatch(r"\d{2}/\d{2}/\d{4}", str(value)) for value in _values(schema, "date"))


def test_a_property_the_lexicon_knows_keeps_its_own_values() -> None:
    schema = {"type": "string", "description": "City name, e.g. 'Lisbon'."}
    assert len(set(_values(schema, "city"))) > 1


def test_a_file_name_whose_description_allows_no_path_is_a_bare_name() -> None:
    # BFCL's file system: touch(file_name) refuses "/data/notes.txt".
    schema = {"type": "string", "description": "The name of the new file in the current directory. "
                                               "file_name is local to the current directory and does not allow path."}
    values = _values(schema, "file_name")
    assert all("/" not in str(value) for value in values) and all(str(value).endswith(".txt") for value in values)


QUIET = {"latency_ms": 0, "latency_jitter_ms": 0, "rate_malformed_json": 0, "rate_hallucinated_function": 0,
         "rate_missing_required": 0, "rate_wrong_type": 0, "rate_parallel_calls": 0, "rate_follow_up_call": 0,
         "rate_clarify": 0, "rate_decline": 0}
GET_TIME = {"type": "function", "function": {
    "name": "get_current_time", "description": "Get current time in a specific timezone",
    "parameters": {"type": "object", "properties": {"timezone": TIMEZONE}, "required": ["timezone"]}}}


@pytest.fixture(scope="module")
def quiet_client() -> Iterator[openai.OpenAI]:
    with start_simulator(SimulatorSettings(**QUIET)) as simulator:
        yield openai.OpenAI(base_url=simulator.base_url, api_key="sk-test", max_retries=0)


@pytest.mark.parametrize("seed", range(6))
def test_after_a_plain_text_error_the_call_is_made_again_without_the_value_it_refused(
        quiet_client: openai.OpenAI, seed: int) -> None:
    refused = "America/San_Francisco"  # quoted by the server's own documentation, refused by the server
    messages: list[Any] = [
        {"role": "user", "content": f"What time is it over there? ({seed})"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "get_current_time", "arguments": json.dumps({"timezone": refused})}}]},
        {"role": "tool", "tool_call_id": "c1",
         "content": f"Error executing tool get_current_time: Invalid timezone: 'No time zone found with key {refused}'"},
    ]
    answer = quiet_client.chat.completions.create(model="sim-small", messages=messages, tools=[GET_TIME], seed=seed)
    [call] = answer.choices[0].message.tool_calls or []
    assert call.function.name == "get_current_time"
    assert json.loads(call.function.arguments)["timezone"] != refused


def test_apostrophes_inside_words_quote_nothing() -> None:
    assert documented_examples({"description": "The owner's label, shown in the owner's list"}) == []
    assert documented_examples({"description": "Sort order: 'asc' or 'desc'."}) == ["asc", "desc"]
