"""Instruction-following (`obedience`): the simulator reads a stated mode from the prompt text,
writes requests for it, and acts on requests that say what they need; and it reads an assistant
turn it is asked to classify. Over real HTTP through the openai client."""

from __future__ import annotations

import json
from typing import Any, Callable

import openai

from toolfactory.stages.dialogues.agents import READ_TURN_SCHEMA
from toolfactory.stages.tasks.toolace import MODE_GUIDES, PROMPT
from toolfactory.simulator.instructions import CUES

from .sample_tools import WEATHER_TOOLS

REQUESTS_SCHEMA = {
    "type": "object",
    "properties": {"requests": {"type": "array", "minItems": 4, "maxItems": 4, "items": {
        "type": "object", "properties": {"request": {"type": "string", "minLength": 10}}, "required": ["request"]}}},
    "required": ["requests"],
}


def requests_for(client: openai.OpenAI, mode: str) -> list[str]:
    prompt = PROMPT.format(count=4, guide=MODE_GUIDES[mode], style="short", note="", turns="", calls="",
                           functions="- get_weather: Weather of a city.")
    reply = client.chat.completions.create(
        model="sim-small", messages=[{"role": "user", "content": prompt}],
        response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": REQUESTS_SCHEMA}})
    return [item["request"] for item in json.loads(reply.choices[0].message.content or "")["requests"]]


def test_a_fully_obedient_simulator_writes_requests_for_the_stated_mode(configure: Callable[..., Any], client: openai.OpenAI) -> None:
    configure(obedience=1.0)
    assert all(r.endswith(CUES["parallel"]) for r in requests_for(client, "parallel"))


def test_without_obedience_the_stated_mode_is_not_followed(configure: Callable[..., Any], client: openai.OpenAI) -> None:
    configure(obedience=0.0)
    assert not any(CUES["parallel"] in r for r in requests_for(client, "parallel"))


def test_a_request_that_asks_for_parallel_calls_gets_them(configure: Callable[..., Any], client: openai.OpenAI) -> None:
    configure(obedience=1.0)
    reply = client.chat.completions.create(model="sim-small", tools=WEATHER_TOOLS, messages=[
        {"role": "user", "content": f"Weather in Lyon and Oslo. {CUES['parallel']}"}])
    assert len(reply.choices[0].message.tool_calls or []) >= 2


def test_a_request_missing_a_value_gets_a_question(configure: Callable[..., Any], client: openai.OpenAI) -> None:
    configure(obedience=1.0)
    reply = client.chat.completions.create(model="sim-small", tools=WEATHER_TOOLS, messages=[
        {"role": "user", "content": f"I want the weather forecast. {CUES['missing']}"}])
    assert reply.choices[0].message.tool_calls is None and reply.choices[0].message.content


def classify(client: openai.OpenAI, turn: str) -> str:
    history = f"[user] What is the weather?\n[assistant] {turn}"
    reply = client.chat.completions.create(
        model="sim-small", messages=[{"role": "user", "content": f"Read the assistant's last message.\n{history}"}],
        response_format={"type": "json_schema", "json_schema": {"name": "t", "schema": READ_TURN_SCHEMA}})
    return str(json.loads(reply.choices[0].message.content or "")["assistant_turn"])


def test_a_question_without_a_question_mark_is_read_as_asking(client: openai.OpenAI) -> None:
    assert classify(client, "Please tell me the city you have in mind.") == "asks_for_missing_value"


def test_a_decline_is_read_as_declining(client: openai.OpenAI) -> None:
    assert classify(client, "I'm sorry, but none of the available functions can help with that.") == "declines"


def test_a_request_written_with_its_calls_says_what_they_do_and_the_values_they_take(
        configure: Callable[..., Any], client: openai.OpenAI) -> None:
    # APIGen-MT's blueprint: the designer writes the request and its ground-truth calls together.
    from toolfactory.models import Function, Tool
    from toolfactory.stages.tasks.blueprints import DESIGNER_PROMPT, blueprint_schema
    from toolfactory.stages.tasks.toolalpaca import describe_functions

    preamble = "This tool belongs to the file system."
    touch = Function(name="touch", description=f"{preamble} Tool description: Create a new file in the current directory.",
                     parameters={"type": "object", "properties": {"file_name": {"type": "string"}}, "required": ["file_name"]})
    ls = Function(name="ls", description=f"{preamble} Tool description: List the current directory.",
                  parameters={"type": "object", "properties": {}})
    tool = Tool(name="files", description="A file system.", functions=[touch, ls])
    prompt = DESIGNER_PROMPT.format(turns=1, max_calls=1, name=tool.name, description=tool.description,
                                    functions=describe_functions(tool), state="{}")
    configure(obedience=1.0)
    reply = client.chat.completions.create(
        model="sim-small", messages=[{"role": "user", "content": prompt}],
        response_format={"type": "json_schema", "json_schema": {"name": "b", "schema": blueprint_schema(tool, 1, 1)}})
    [turn] = json.loads(reply.choices[0].message.content or "")["turns"]
    [call] = turn["calls"]
    step = {"touch": "Create a new file in the current directory.", "ls": "List the current directory."}[call["name"]]
    assert step in turn["request"] and preamble not in turn["request"]
    assert all(f"{' '.join(k.split('_'))} {v}" in turn["request"] for k, v in call["arguments"].items())


def test_a_request_written_with_its_calls_states_the_values_inside_their_objects(
        configure: Callable[..., Any], client: openai.OpenAI) -> None:
    # The memory MCP server's create_entities takes a list of objects: a request that gave only
    # the top-level values would leave the assistant to invent every name it creates.
    from toolfactory.models import Function, Tool
    from toolfactory.models import BlueprintCall
    from toolfactory.stages.tasks.blueprints import DESIGNER_PROMPT, blueprint_schema, unstated_value
    from toolfactory.stages.tasks.toolalpaca import describe_functions

    entity = {"type": "object", "properties": {"name": {"type": "string"}, "entityType": {"type": "string"},
                                               "observations": {"type": "array", "items": {"type": "string"}}},
              "required": ["name", "entityType", "observations"]}
    create = Function(name="create_entities", description="Create multiple new entities in the knowledge graph.",
                      parameters={"type": "object", "properties": {"entities": {"type": "array", "items": entity, "minItems": 1}},
                                  "required": ["entities"]})
    tool = Tool(name="memory", description="A knowledge graph.", functions=[create])
    prompt = DESIGNER_PROMPT.format(turns=1, max_calls=1, name=tool.name, description=tool.description,
                                    functions=describe_functions(tool), state="{}")
    configure(obedience=1.0)
    reply = client.chat.completions.create(
        model="sim-small", messages=[{"role": "user", "content": prompt}],
        response_format={"type": "json_schema", "json_schema": {"name": "b", "schema": blueprint_schema(tool, 1, 1)}})
    [turn] = json.loads(reply.choices[0].message.content or "")["turns"]
    [call] = turn["calls"]
    assert call["arguments"]["entities"]
    for made in call["arguments"]["entities"]:
        assert f"name {made['name']}" in turn["request"] and f"entity type {made['entityType']}" in turn["request"]
    assert unstated_value(BlueprintCall(**call), create, turn["request"]) is None
