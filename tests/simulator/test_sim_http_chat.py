"""Chat completions over real HTTP with the official openai client."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import openai
import pytest

from .sample_tools import WEATHER_TOOLS, tool_parameters

# Not jsonschema.FormatChecker(): that merges every draft and checks `time` by the draft-3
# rule (HH:MM:SS, no offset), which contradicts the RFC 3339 `time` of draft 7 and later.
FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


def ask(client: openai.OpenAI, text: str, **kwargs: Any) -> Any:
    return client.chat.completions.create(
        model="sim-small", messages=[{"role": "user", "content": text}], **kwargs
    )


def test_models_lists_simulated_models(client: openai.OpenAI) -> None:
    models = client.models.list().data
    assert "sim-small" in [m.id for m in models]
    assert all(m.owned_by == "toolfactory-simulator" and m.object == "model" for m in models)


def test_plain_text_answer_is_on_topic(client: openai.OpenAI) -> None:
    reply = ask(client, "How should I water tomato plants during a heatwave?")
    message = reply.choices[0].message
    assert reply.object == "chat.completion"
    assert reply.choices[0].finish_reason == "stop"
    assert message.role == "assistant" and message.tool_calls is None
    assert any(word in message.content.lower() for word in ("tomato", "water", "heatwave"))
    assert message.content.endswith(".")


def test_usage_is_counted(client: openai.OpenAI) -> None:
    usage = ask(client, "Summarise the history of the printing press").usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_model_name_is_echoed(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="any-model-name", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.model == "any-model-name"


def test_same_request_gives_identical_answer(client: openai.OpenAI) -> None:
    first = ask(client, "Explain how vaccines train the immune system", temperature=0.7)
    second = ask(client, "Explain how vaccines train the immune system", temperature=0.7)
    assert first.model_dump() == second.model_dump()


def test_different_requests_give_different_answers(client: openai.OpenAI) -> None:
    first = ask(client, "Explain how vaccines train the immune system")
    second = ask(client, "Describe the rules of cricket for beginners")
    assert first.choices[0].message.content != second.choices[0].message.content
    assert first.id != second.id


def test_n_returns_that_many_choices(client: openai.OpenAI) -> None:
    reply = ask(client, "Suggest a name for a bakery in Lisbon", n=3)
    assert [c.index for c in reply.choices] == [0, 1, 2]


def test_max_tokens_truncates_with_length_reason(client: openai.OpenAI) -> None:
    reply = ask(client, "Describe the water cycle in detail for a school project", max_tokens=5)
    assert reply.choices[0].finish_reason == "length"
    assert len(reply.choices[0].message.content) <= 20


def test_stream_is_rejected_with_openai_error(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        ask(client, "hello", stream=True)
    assert caught.value.status_code == 400
    assert caught.value.code == "stream_not_supported"


def test_missing_messages_is_a_bad_request(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="sim-small", messages=[])


SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 3, "maxLength": 40},
            "difficulty": {"type": "string", "enum": ["easy", "medium", "hard"]},
            "servings": {"type": "integer", "minimum": 1, "maximum": 12},
            "steps": {
                "type": "array",
                "minItems": 2,
                "maxItems": 6,
                "items": {
                    "type": "object",
                    "properties": {
                        "order": {"type": "integer", "minimum": 1},
                        "text": {"type": "string"},
                        "minutes": {"type": "number", "exclusiveMinimum": 0, "maximum": 90},
                    },
                    "required": ["order", "text"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["title", "difficulty", "servings", "steps"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "created": {"type": "string", "format": "date-time"},
            "due": {"type": "string", "format": "date"},
            "owner": {"type": "string", "format": "email"},
            "link": {"type": "string", "format": "uri"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        },
        "required": ["id", "created", "due", "owner", "link", "tags"],
    },
    {
        "$defs": {
            "person": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "age": {"type": "integer", "minimum": 0, "maximum": 120},
                    "city": {"type": "string"},
                },
                "required": ["name", "age"],
            }
        },
        "type": "object",
        "properties": {
            "team": {"type": "array", "items": {"$ref": "#/$defs/person"}, "minItems": 1},
            "lead": {"$ref": "#/$defs/person"},
            "budget": {"type": ["number", "null"], "minimum": 1000, "multipleOf": 0.5},
        },
        "required": ["team", "lead", "budget"],
    },
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=["recipe", "formats", "refs"])
def test_json_schema_response_validates(client: openai.OpenAI, schema: dict[str, Any]) -> None:
    for prompt in ("Plan a team dinner in Paris", "Make a pancake recipe for four people"):
        reply = ask(
            client,
            prompt,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "out", "schema": schema},
            },
        )
        value = json.loads(reply.choices[0].message.content)
        jsonschema.validate(value, schema, format_checker=FORMAT_CHECKER)


def test_json_object_response_is_an_object(client: openai.OpenAI) -> None:
    reply = ask(client, "List three facts about owls", response_format={"type": "json_object"})
    assert isinstance(json.loads(reply.choices[0].message.content), dict)


def test_tools_give_a_valid_tool_call(client: openai.OpenAI) -> None:
    reply = ask(client, "What will the weather be in Tokyo this week?", tools=WEATHER_TOOLS)
    choice = reply.choices[0]
    call = choice.message.tool_calls[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "get_weather"
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, tool_parameters("get_weather"), format_checker=FORMAT_CHECKER)
    assert arguments["city"] == "Tokyo"


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("Find me flights from Paris to Berlin next Friday", "search_flights"),
        ("Convert 250 USD to EUR please", "convert_currency"),
        ("Is it going to rain in Sydney? I need the forecast", "get_weather"),
    ],
)
def test_tool_choice_follows_the_prompt(client: openai.OpenAI, prompt: str, expected: str) -> None:
    call = ask(client, prompt, tools=WEATHER_TOOLS).choices[0].message.tool_calls[0]
    assert call.function.name == expected
    jsonschema.validate(
        json.loads(call.function.arguments),
        tool_parameters(expected),
        format_checker=FORMAT_CHECKER,
    )


def test_every_choice_has_valid_arguments(client: openai.OpenAI) -> None:
    reply = ask(client, "Book flights from Toronto to Madrid", tools=WEATHER_TOOLS, n=4)
    for choice in reply.choices:
        call = choice.message.tool_calls[0]
        jsonschema.validate(
            json.loads(call.function.arguments),
            tool_parameters(call.function.name),
            format_checker=FORMAT_CHECKER,
        )


def test_named_tool_choice_is_obeyed(client: openai.OpenAI) -> None:
    reply = ask(
        client,
        "What's the weather in Lisbon?",
        tools=WEATHER_TOOLS,
        tool_choice={"type": "function", "function": {"name": "convert_currency"}},
    )
    assert reply.choices[0].message.tool_calls[0].function.name == "convert_currency"


def test_unknown_named_tool_choice_is_a_bad_request(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError):
        ask(
            client,
            "hi",
            tools=WEATHER_TOOLS,
            tool_choice={"type": "function", "function": {"name": "nope"}},
        )


def test_tool_choice_none_answers_in_text(client: openai.OpenAI) -> None:
    reply = ask(client, "What's the weather in Lisbon?", tools=WEATHER_TOOLS, tool_choice="none")
    assert reply.choices[0].message.tool_calls is None
    assert reply.choices[0].message.content


def test_answer_after_tool_result_mentions_it(client: openai.OpenAI) -> None:
    question = {"role": "user", "content": "What's the weather in Tokyo tomorrow?"}
    first = client.chat.completions.create(
        model="sim-small", messages=[question], tools=WEATHER_TOOLS
    )
    assistant = first.choices[0].message
    result = {"temperature_c": 23, "condition": "light rain"}
    messages = [
        question,
        assistant.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": assistant.tool_calls[0].id, "content": json.dumps(result)},
    ]
    final = client.chat.completions.create(
        model="sim-small", messages=messages, tools=WEATHER_TOOLS
    )
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.tool_calls is None
    text = final.choices[0].message.content
    assert "light rain" in text and "23" in text and "get_weather" in text
