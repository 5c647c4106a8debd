"""Tool-use behaviours over real HTTP: parallel and follow-up calls, grounding, clarify, decline."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsonschema
import openai
import pytest

from .sample_tools import HOTEL_TOOLS, WEATHER_TOOLS, parameters_of
from conftest import http

Configure = Callable[..., dict[str, Any]]

FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER
ON_TOPIC = [
    "What will the weather be in Tokyo this week?",
    "Find me flights from Paris to Berlin next Friday",
    "Convert 250 USD to EUR please",
    "Is it going to rain in Sydney? I need the forecast",
    "Book flights from Toronto to Madrid for two passengers",
]
HOTEL_RESULT = {
    "status_code": 200,
    "response": {
        "results": [
            {"hotel_id": "H417", "name": "Alfama Inn", "stars": 4},
            {"hotel_id": "H733", "name": "Baixa Stay", "stars": 3},
        ]
    },
}
KNOBS = ("rate_parallel_calls", "rate_follow_up_call", "rate_clarify", "rate_decline")


def chat(
    client: openai.OpenAI,
    messages: str | list[dict[str, Any]],
    tools: list[dict[str, Any]] = WEATHER_TOOLS,
    **kwargs: Any,
) -> Any:
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    return client.chat.completions.create(
        model="sim-small", messages=messages, tools=tools, **kwargs
    )


def assert_valid_calls(message: Any, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every call names an offered function with valid arguments; the parsed arguments."""
    parsed = []
    for call in message.tool_calls:
        arguments = json.loads(call.function.arguments)
        schema = parameters_of(tools, call.function.name)
        jsonschema.validate(arguments, schema, format_checker=FORMAT_CHECKER)
        parsed.append(arguments)
    return parsed


def required_words(tools: list[dict[str, Any]], name: str) -> list[str]:
    required = parameters_of(tools, name).get("required", [])
    return [parameter.replace("_", " ") for parameter in required]


def with_results(
    messages: list[dict[str, Any]], assistant: Any, result: dict[str, Any]
) -> list[dict[str, Any]]:
    """The conversation extended by the assistant's calls and one result per call."""
    extended = [*messages, assistant.model_dump(exclude_none=True)]
    for call in assistant.tool_calls:
        extended.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    return extended


# -- knobs at 0: the single-call behaviour -------------------------------------------------


def test_knobs_at_zero_give_one_call_then_a_summary(client: openai.OpenAI) -> None:
    for prompt in ON_TOPIC:
        reply = chat(client, prompt, n=4)
        for choice in reply.choices:
            assert choice.finish_reason == "tool_calls"
            assert len(choice.message.tool_calls) == 1
            assert_valid_calls(choice.message, WEATHER_TOOLS)
        question = [{"role": "user", "content": prompt}]
        after = chat(client, with_results(question, reply.choices[0].message, {"ok": True}), n=4)
        assert all(c.message.tool_calls is None and c.message.content for c in after.choices)


# -- parallel calls ------------------------------------------------------------------------


def test_parallel_rate_one_always_gives_two_or_three_valid_calls(
    configure: Configure, client: openai.OpenAI
) -> None:
    configure(rate_parallel_calls=1.0)
    ids: list[str] = []
    for prompt in ON_TOPIC:
        for choice in chat(client, prompt, n=4).choices:
            assert choice.finish_reason == "tool_calls"
            assert 2 <= len(choice.message.tool_calls) <= 3
            assert_valid_calls(choice.message, WEATHER_TOOLS)
            ids += [call.id for call in choice.message.tool_calls]
    assert len(ids) == len(set(ids))


def test_parallel_calls_go_to_the_functions_the_request_mentions(
    configure: Configure, client: openai.OpenAI
) -> None:
    configure(rate_parallel_calls=1.0)
    reply = chat(client, "Find me flights from Paris to Berlin and convert 200 USD to EUR", n=3)
    for choice in reply.choices:
        names = {call.function.name for call in choice.message.tool_calls}
        assert names == {"search_flights", "convert_currency"}


def test_parallel_calls_repeat_a_single_function_with_other_arguments(
    configure: Configure, client: openai.OpenAI
) -> None:
    configure(rate_parallel_calls=1.0)
    reply = chat(
        client,
        "What's the weather in Tokyo and in Paris?",
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        n=4,
    )
    for choice in reply.choices:
        calls = choice.message.tool_calls
        assert {call.function.name for call in calls} == {"get_weather"}
        arguments = assert_valid_calls(choice.message, WEATHER_TOOLS)
        assert len({json.dumps(a, sort_keys=True) for a in arguments}) == len(arguments) >= 2
        assert {a["city"] for a in arguments[:2]} == {"Tokyo", "Paris"}


def test_parallel_tool_calls_false_gives_exactly_one_call(
    configure: Configure, client: openai.OpenAI
) -> None:
    configure(rate_parallel_calls=1.0)
    for prompt in ON_TOPIC:
        reply = chat(client, prompt, parallel_tool_calls=False, n=4)
        assert all(len(choice.message.tool_calls) == 1 for choice in reply.choices)


def test_parallel_rate_is_a_fraction_of_turns(configure: Configure, client: openai.OpenAI) -> None:
    configure(rate_parallel_calls=0.5)
    reply = chat(client, "Weather forecast for Berlin please", n=60)
    parallel = sum(len(choice.message.tool_calls) > 1 for choice in reply.choices)
    assert 15 <= parallel <= 45


def test_content_faults_damage_only_the_first_parallel_call(
    configure: Configure, client: openai.OpenAI
) -> None:
    configure(rate_parallel_calls=1.0, rate_hallucinated_function=1.0)
    offered = {tool["function"]["name"] for tool in WEATHER_TOOLS}
    calls = chat(client, "Find me flights from Paris to Berlin and convert 200 USD to EUR").choices[
        0
    ].message.tool_calls
    assert calls[0].function.name not in offered
    assert all(call.function.name in offered for call in calls[1:])


# -- follow-up calls and grounding ---------------------------------------------------------


def test_follow_up_call_takes_its_arguments_from_the_tool_result(
    configure: Configure, client: openai.OpenAI
) -> None:
    configure(rate_follow_up_call=1.0)
    question = [{"role": "user", "content": "Search hotels in Lisbon for 2 guests"}]
    first = chat(client, question, HOTEL_TOOLS).choices[0].message
    assert [call.function.name for call in first.tool_calls] == ["search_hotels"]
    reply = chat(client, with_results(question, first, HOTEL_RESULT), HOTEL_TOOLS, n=4)
    for choice in reply.choices:
        assert choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls
        assert call.function.name == "book_hotel"
        arguments = assert_valid_calls(choice.message, HOTEL_TOOLS)[0]
        assert arguments["hotel_id"] == "H417"  # the first hotel of the latest result


def test_follow_up_rate_zero_summarises_instead(client: openai.OpenAI) -> None:
    question = [{"role": "user", "content": "Search hotels in Lisbon for 2 guests"}]
    first = chat(client, question, HOTEL_TOOLS).choices[0].message
    reply = chat(client, with_results(question, first, HOTEL_RESULT), HOTEL_TOOLS, n=4)
    assert all(choice.message.tool_calls is None for choice in reply.choices)


def test_follow_up_conversation_ends_after_three_tool_rounds(
    configure: Configure, client: openai.OpenAI
) -> None:
    configure(rate_follow_up_call=1.0, rate_parallel_calls=1.0)
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Search hotels in Lisbon and book one for 2 guests"}
    ]
    rounds = 0
    for _ in range(10):
        choice = chat(client, messages, HOTEL_TOOLS).choices[0]
        if not choice.message.tool_calls:
            break
        rounds += 1
        assert_valid_calls(choice.message, HOTEL_TOOLS)
        messages = with_results(messages, choice.message, HOTEL_RESULT)
    assert rounds == 3
    assert choice.finish_reason == "stop" and choice.message.content


def test_grounding_is_on_without_knobs_for_a_later_request(client: openai.OpenAI) -> None:
    question = [{"role": "user", "content": "Search hotels in Lisbon"}]
    first = chat(client, question, HOTEL_TOOLS).choices[0].message
    conversation = with_results(question, first, HOTEL_RESULT)
    summary = chat(client, conversation, HOTEL_TOOLS).choices[0].message
    conversation += [
        summary.model_dump(exclude_none=True),
        {"role": "user", "content": "Great, book that hotel room for us"},
    ]
    call = chat(client, conversation, HOTEL_TOOLS).choices[0].message.tool_calls[0]
    assert call.function.name == "book_hotel"
    assert json.loads(call.function.arguments)["hotel_id"] in {"H417", "H733"}


def test_grounding_skips_result_values_that_do_not_validate(
    configure: Configure, client: openai.OpenAI
) -> None:
    configure(rate_follow_up_call=1.0)
    question = [{"role": "user", "content": "Search hotels in Lisbon"}]
    first = chat(client, question, HOTEL_TOOLS).choices[0].message
    result = {"hotel_id": "not-an-id", "guests": 12, "hotels": [{"hotel_id": "H9"}]}
    reply = chat(client, with_results(question, first, result), HOTEL_TOOLS, n=4)
    for choice in reply.choices:
        arguments = assert_valid_calls(choice.message, HOTEL_TOOLS)[0]
        assert arguments["hotel_id"] == "H9" and arguments["guests"] != 12


# -- clarifying questions ------------------------------------------------------------------


def test_clarify_rate_one_asks_for_a_required_parameter(
    configure: Configure, client: openai.OpenAI
) -> None:
    settings = configure(rate_clarify=1.0)
    asked = {}
    for prompt in ON_TOPIC:
        asked[prompt] = chat(client, prompt, n=3).choices
    configure(**{**settings, "rate_clarify": 0.0})
    for prompt, choices in asked.items():
        would_call = chat(client, prompt, n=3).choices  # the same request: the call it replaced
        for question, call in zip(choices, would_call, strict=True):
            text = question.message.content
            assert question.message.tool_calls is None and question.finish_reason == "stop"
            words = required_words(WEATHER_TOOLS, call.message.tool_calls[0].function.name)
            assert any(word in text for word in words), (text, words)


def test_clarify_asks_for_what_the_user_did_not_say(
    configure: Configure, client: openai.OpenAI
) -> None:
    configure(rate_clarify=1.0)
    reply = chat(client, "Search flights from Paris to Madrid", n=6)
    for choice in reply.choices:  # origin and destination are given, the date is not
        assert "date" in choice.message.content


def test_clarify_calls_when_nothing_is_required(
    configure: Configure, client: openai.OpenAI
) -> None:
    configure(rate_clarify=1.0)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "list_holidays",
                "description": "List public holidays",
                "parameters": {"type": "object", "properties": {"year": {"type": "integer"}}},
            },
        }
    ]
    reply = chat(client, "Which public holidays are coming up?", tools)
    assert reply.choices[0].message.tool_calls[0].function.name == "list_holidays"


# -- declining -----------------------------------------------------------------------------


def test_decline_rate_one_answers_without_a_call(
    configure: Configure, client: openai.OpenAI
) -> None:
    configure(rate_decline=1.0)
    for prompt in ON_TOPIC:
        for choice in chat(client, prompt, n=3).choices:
            assert choice.message.tool_calls is None and choice.finish_reason == "stop"
            assert choice.message.content and "?" not in choice.message.content


def test_decline_takes_precedence_over_clarify(configure: Configure, client: openai.OpenAI) -> None:
    configure(rate_decline=1.0, rate_clarify=1.0)
    for choice in chat(client, ON_TOPIC[0], n=4).choices:
        assert choice.message.tool_calls is None and not choice.message.content.endswith("?")


def test_unrelated_request_is_declined_when_switched_on(
    configure: Configure, client: openai.OpenAI
) -> None:
    configure(decline_when_irrelevant=True)
    reply = chat(client, "Tell me a joke about penguins", n=3)
    for choice in reply.choices:
        assert choice.message.tool_calls is None
        assert "joke about penguins" in choice.message.content
    for prompt in ON_TOPIC:
        assert all(choice.message.tool_calls for choice in chat(client, prompt, n=3).choices)


def test_unrelated_request_is_called_by_default(client: openai.OpenAI) -> None:
    reply = chat(client, "Tell me a joke about penguins", n=3)
    assert all(choice.message.tool_calls for choice in reply.choices)


def test_a_bare_greeting_gets_a_plain_answer(configure: Configure, client: openai.OpenAI) -> None:
    configure(decline_when_irrelevant=True)
    message = chat(client, "hi").choices[0].message
    assert message.tool_calls is None and message.content


def test_a_value_a_function_takes_makes_the_request_relevant(
    configure: Configure, client: openai.OpenAI
) -> None:
    configure(decline_when_irrelevant=True)
    message = chat(client, "Is it going to rain in Sydney?").choices[0].message
    assert message.tool_calls  # no word in common with any function, but a city to look up


# -- tool_choice wins over the knobs -------------------------------------------------------


@pytest.mark.parametrize(
    "tool_choice",
    ["required", {"type": "function", "function": {"name": "convert_currency"}}],
    ids=["required", "named"],
)
def test_forced_tool_choice_always_calls(
    configure: Configure, client: openai.OpenAI, tool_choice: Any
) -> None:
    configure(rate_clarify=1.0, rate_decline=1.0, decline_when_irrelevant=True)
    for prompt in [*ON_TOPIC, "Tell me a joke about penguins"]:
        for choice in chat(client, prompt, tool_choice=tool_choice, n=2).choices:
            assert choice.finish_reason == "tool_calls"
            assert_valid_calls(choice.message, WEATHER_TOOLS)
            if isinstance(tool_choice, dict):
                assert choice.message.tool_calls[0].function.name == "convert_currency"


def test_tool_choice_none_never_calls(configure: Configure, client: openai.OpenAI) -> None:
    question = [{"role": "user", "content": ON_TOPIC[0]}]
    first = chat(client, question).choices[0].message
    configure(**{knob: 1.0 for knob in KNOBS}, decline_when_irrelevant=True)
    for messages in (question, with_results(question, first, {"temperature_c": 21})):
        for choice in chat(client, messages, tool_choice="none", n=3).choices:
            assert choice.message.tool_calls is None and choice.message.content


# -- determinism ---------------------------------------------------------------------------


def test_same_request_gets_the_same_behaviour(configure: Configure, client: openai.OpenAI) -> None:
    configure(**{knob: 0.4 for knob in KNOBS})
    kinds = set()
    for prompt in ON_TOPIC:
        first = chat(client, prompt, n=8)
        assert chat(client, prompt, n=8).model_dump() == first.model_dump()
        for choice in first.choices:
            calls = choice.message.tool_calls
            kinds.add("text" if calls is None else f"{min(len(calls), 2)} calls")
    assert kinds == {"text", "1 calls", "2 calls"}


def test_sample_variation_decides_whether_a_resample_repeats_the_first_answer() -> None:
    from toolfactory.simulator import SimulatorSettings, start_simulator

    body = {"model": "sim-small", "messages": [{"role": "user", "content": "Name three rivers in France."}]}
    with start_simulator(SimulatorSettings(sample_variation=0.0)) as sim:
        first = http.post(f"{sim.base_url}/chat/completions", json=body).json()["choices"][0]["message"]["content"]
        again = [http.post(f"{sim.base_url}/chat/completions", json={**body, "seed": k}).json()["choices"][0]["message"]["content"]
                 for k in range(1, 6)]
        assert again == [first] * 5
        http.post(f"{sim.root_url}/simulator/settings", json={"sample_variation": 1.0}).raise_for_status()
        fresh = [http.post(f"{sim.base_url}/chat/completions", json={**body, "seed": k}).json()["choices"][0]["message"]["content"]
                 for k in range(1, 6)]
        assert len(set(fresh) | {first}) > 2
