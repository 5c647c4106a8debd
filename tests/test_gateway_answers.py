"""What real endpoints answer, through the gateway: the simulator's provider profiles over real
HTTP and the real openai client (truncation, refusals, reasoning, fenced JSON, refused
parameters, tool calls written as text)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolfactory.errors import LLMFailure
from toolfactory.llm.answers import extract_json, split_reasoning
from test_gateway import HELLO, SCHEMA, gateway, knobs, llm, run, server_stats, sim  # noqa: F401  (fixtures)

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": SCHEMA}}
REASONING_ROLE = {"roles.user.max_tokens_parameter": "max_completion_tokens", "roles.user.temperature": None,
                  "roles.user.top_p": None}


def structured(sim: Any, config: Any, tmp_path: Path | None = None) -> tuple[Any, Any]:
    async def go() -> tuple[Any, Any]:
        async with gateway(sim, config, tmp_path) as gw:
            return await gw.structured("user", HELLO, SCHEMA, name="weather"), gw.meter

    return run(go())  # type: ignore[no-any-return]


def tool_turn(sim: Any, config: Any, messages: list[dict[str, Any]] = HELLO) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with gateway(sim, config) as gw:
            return await gw.chat("assistant", messages, tools=[WEATHER], tool_choice="auto")

    return run(go())  # type: ignore[no-any-return]


def failure(call: Any) -> LLMFailure:
    with pytest.raises(LLMFailure) as caught:
        call()
    return caught.value


# -- pure parsing ------------------------------------------------------------------------------


def test_json_is_taken_out_of_a_fenced_block_after_a_sentence() -> None:
    assert extract_json('Sure! Here it is:\n```json\n{"city": "Lyon"}\n```\nAnything else?') == {"city": "Lyon"}


def test_json_is_found_after_prose_without_a_fence() -> None:
    assert extract_json('The answer is {"city": "Lyon", "days": 2} as requested.') == {"city": "Lyon", "days": 2}


def test_text_without_json_raises_the_parsers_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        extract_json("I cannot answer that in JSON.")


def test_a_think_prefix_is_reasoning_not_answer() -> None:
    reasoning, content = split_reasoning({"content": "<think>\nweigh the options\n</think>\n\n{\"a\": 1}"})
    assert reasoning == "weigh the options" and content == '{"a": 1}'


def test_a_reasoning_field_is_kept_apart() -> None:
    assert split_reasoning({"content": "Hi", "reasoning": "plan"}) == ("plan", "Hi")


def test_an_unclosed_think_block_leaves_no_answer() -> None:
    assert split_reasoning({"content": "<think>still thinking when the limit came"})[1] == ""


# -- finish_reason and refusals ------------------------------------------------------------------


def test_a_truncated_answer_is_asked_again_with_the_larger_limit(sim: Any, knobs: Any) -> None:
    knobs(profile="vllm-hermes")
    value, meter = structured(sim, llm(**{"roles.user.max_tokens": 3, "roles.user.max_tokens_ceiling": 512}))
    assert set(value) >= {"city", "days"} and meter.role("user").calls == 2


def test_an_answer_cut_at_the_ceiling_is_llm_truncated(sim: Any, knobs: Any) -> None:
    knobs(profile="vllm-hermes")
    config = llm(**{"roles.user.max_tokens": 3, "roles.user.max_tokens_ceiling": 3})
    assert failure(lambda: structured(sim, config)).reason == "llm_truncated"


def test_a_refusal_has_its_own_reason(sim: Any, knobs: Any) -> None:
    knobs(rate_refusal=1.0)
    assert failure(lambda: structured(sim, llm())).reason == "llm_refused"


def test_a_filtered_answer_has_its_own_reason(sim: Any, knobs: Any) -> None:
    knobs(rate_content_filter=1.0)
    assert failure(lambda: structured(sim, llm())).reason == "llm_content_filter"


# -- reasoning models ----------------------------------------------------------------------------


def test_a_refused_parameter_names_the_setting_to_change(sim: Any, knobs: Any) -> None:
    knobs(profile="reasoning")
    error = failure(lambda: structured(sim, llm()))
    assert error.reason == "llm_bad_request" and "max_tokens_parameter" in str(error)


def test_a_reasoning_model_answers_with_its_parameters_renamed(sim: Any, knobs: Any) -> None:
    knobs(profile="reasoning")
    value, _ = structured(sim, llm(**REASONING_ROLE))
    assert set(value) >= {"city", "days"}


def test_reasoning_is_dropped_from_the_answer_unless_kept(sim: Any, knobs: Any) -> None:
    knobs(profile="reasoning")

    async def go(keep: bool) -> list[dict[str, Any]]:
        async with gateway(sim, llm(keep_reasoning=keep, **REASONING_ROLE)) as gw:
            return [await gw.chat("user", [{"role": "user", "content": f"Tell me about Lyon, day {i}"}]) for i in range(6)]

    dropped, kept = run(go(False)), run(go(True))
    assert all("<think>" not in (m["content"] or "") and "reasoning" not in m for m in dropped)
    assert all(m["reasoning"] and "<think>" not in (m["content"] or "") for m in kept)


# -- structured output modes ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["prompt", "json_object"])
def test_the_schema_written_in_the_prompt_is_answered(sim: Any, knobs: Any, mode: str) -> None:
    knobs(profile="openai")
    value, _ = structured(sim, llm(structured_output=mode))
    assert set(value) >= {"city", "days"}
    assert server_stats(sim)["chat_requests"] == 1


def test_fenced_json_from_a_plain_text_model_is_read(sim: Any, knobs: Any) -> None:
    knobs(profile="plain-text")
    value, meter = structured(sim, llm(structured_output="prompt"))
    assert set(value) >= {"city", "days"} and meter.role("user").reasks == 0


def test_a_per_role_mode_overrides_the_default(sim: Any, knobs: Any) -> None:
    knobs(profile="plain-text")
    value, _ = structured(sim, llm(structured_output="json_schema", **{"roles.user.structured_output": "prompt"}))
    assert set(value) >= {"city", "days"}


def test_the_cache_key_follows_the_parameters_sent(sim: Any, knobs: Any, tmp_path: Path) -> None:
    structured(sim, llm(), tmp_path)
    _, meter = structured(sim, llm(**{"roles.user.temperature": None}), tmp_path)
    assert meter.role("user").cache_hits == 0 and meter.role("user").calls == 1


# -- tool calling ---------------------------------------------------------------------------------


def test_auto_tool_choice_without_a_tool_parser_is_refused(sim: Any, knobs: Any) -> None:
    knobs(profile="vllm-no-tool-parser")
    assert failure(lambda: tool_turn(sim, llm())).reason == "llm_bad_request"


@pytest.mark.parametrize("profile", ["vllm-no-tool-parser", "plain-text", "openai"])
@pytest.mark.parametrize("fmt", ["json", "python", "react", "xml"])
def test_text_mode_calls_come_back_as_tool_calls(sim: Any, knobs: Any, profile: str, fmt: str) -> None:
    knobs(profile=profile)
    message = tool_turn(sim, llm(tool_calling="text", text_call_format=fmt))
    [call] = message["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert set(json.loads(call["function"]["arguments"])) >= {"city", "days"}


def test_text_mode_sends_no_tools(sim: Any, knobs: Any) -> None:
    knobs(profile="plain-text")  # answers a request with `tools` with a 400
    assert tool_turn(sim, llm(tool_calling="text"))["tool_calls"]


def test_text_mode_shows_results_and_the_model_answers_them(sim: Any, knobs: Any) -> None:
    knobs(profile="vllm-no-tool-parser")
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lyon", "days": 1}'}}
    messages = [*HELLO, {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": '{"forecast": "sunny"}'}]
    message = tool_turn(sim, llm(tool_calling="text"), messages)
    # The result went back wrapped in <tool_response>; the simulator read the JSON inside it.
    assert not message.get("tool_calls") and "forecast is sunny" in message["content"]


def test_hermes_calls_in_content_are_read_in_any_declared_format() -> None:
    from toolfactory.llm.text_tools import parse_text_calls

    content, calls = parse_text_calls('Let me check.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>', "react", "r")
    assert content == "Let me check." and calls[0]["function"]["name"] == "f"
