"""Injected faults, retry-ability, latency and the admin endpoints, over real HTTP."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from toolfactory.simulator import SimulatorProcess

from .sample_tools import WEATHER_TOOLS, tool_parameters

Configure = Callable[..., dict[str, Any]]

WEATHER_QUESTION = [{"role": "user", "content": "What's the weather in Paris for 3 days?"}]
SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "answer",
        "schema": {
            "type": "object",
            "properties": {"summary": {"type": "string"}, "score": {"type": "integer"}},
            "required": ["summary", "score"],
        },
    },
}


def weather_call(client: openai.OpenAI) -> Any:
    reply = client.chat.completions.create(
        model="sim-small",
        messages=WEATHER_QUESTION,
        tools=WEATHER_TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    return reply.choices[0].message.tool_calls[0].function


def test_rate_429_answers_with_retry_after(
    configure: Configure, admin: httpx.Client, sim: SimulatorProcess
) -> None:
    configure(rate_429=1.0, retry_after_s=0.2)
    response = admin.post(
        f"{sim.base_url}/chat/completions", json={"model": "m", "messages": WEATHER_QUESTION}
    )
    assert response.status_code == 429
    assert response.headers["retry-after"] == "0.2"
    assert response.headers["retry-after-ms"] == "200"
    assert response.json()["error"]["code"] == "rate_limit_exceeded"


def test_rate_429_raises_rate_limit_error(configure: Configure, client: openai.OpenAI) -> None:
    configure(rate_429=1.0)
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="m", messages=WEATHER_QUESTION)


def test_rate_500_raises_internal_server_error(configure: Configure, client: openai.OpenAI) -> None:
    configure(rate_500=1.0)
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="m", messages=WEATHER_QUESTION)
    assert caught.value.status_code == 500


def test_faults_also_hit_embeddings(configure: Configure, client: openai.OpenAI) -> None:
    configure(rate_500=1.0)
    with pytest.raises(openai.InternalServerError):
        client.embeddings.create(model="e", input="hello")


def test_rate_timeout_makes_the_client_time_out(
    configure: Configure, client: openai.OpenAI, admin: httpx.Client
) -> None:
    configure(rate_timeout=1.0, timeout_hang_s=2.0)
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        client.with_options(timeout=0.5).chat.completions.create(
            model="m", messages=WEATHER_QUESTION
        )
    assert time.monotonic() - started < 1.9
    assert admin.get("/simulator/stats").json()["faults"]["timeout"] == 1


def test_malformed_json_breaks_tool_arguments(configure: Configure, client: openai.OpenAI) -> None:
    configure(rate_malformed_json=1.0)
    with pytest.raises(ValueError):
        json.loads(weather_call(client).arguments)


def test_malformed_json_breaks_schema_answers(configure: Configure, client: openai.OpenAI) -> None:
    configure(rate_malformed_json=1.0)
    reply = client.chat.completions.create(
        model="m", messages=WEATHER_QUESTION, response_format=SCHEMA_FORMAT
    )
    with pytest.raises(ValueError):
        json.loads(reply.choices[0].message.content)


def test_hallucinated_function_is_not_offered(configure: Configure, client: openai.OpenAI) -> None:
    configure(rate_hallucinated_function=1.0)
    reply = client.chat.completions.create(
        model="m", messages=WEATHER_QUESTION, tools=WEATHER_TOOLS
    )
    name = reply.choices[0].message.tool_calls[0].function.name
    assert name not in [tool["function"]["name"] for tool in WEATHER_TOOLS]
    assert name


def test_missing_required_drops_a_required_key(configure: Configure, client: openai.OpenAI) -> None:
    configure(rate_missing_required=1.0)
    arguments = json.loads(weather_call(client).arguments)
    assert not {"city", "days"} <= set(arguments)


def test_wrong_type_fails_validation(configure: Configure, client: openai.OpenAI) -> None:
    configure(rate_wrong_type=1.0)
    arguments = json.loads(weather_call(client).arguments)
    assert {"city", "days"} <= set(arguments)
    with pytest.raises(jsonschema.ValidationError) as caught:
        jsonschema.validate(arguments, tool_parameters("get_weather"))
    assert caught.value.validator in ("type", "enum")


def test_content_faults_are_stable_per_request(configure: Configure, client: openai.OpenAI) -> None:
    configure(rate_wrong_type=0.5, rate_missing_required=0.5)
    first = [weather_call(client).arguments for _ in range(3)]
    assert len(set(first)) == 1


def test_500_fault_is_retryable_and_replays(
    configure: Configure, client: openai.OpenAI, admin: httpx.Client
) -> None:
    configure(rate_500=0.5)

    def outcomes() -> list[bool]:
        seen = []
        for _ in range(12):
            try:
                client.chat.completions.create(model="m", messages=WEATHER_QUESTION)
                seen.append(True)
            except openai.InternalServerError:
                seen.append(False)
        return seen

    first = outcomes()
    assert True in first and False in first
    admin.post("/simulator/reset").raise_for_status()
    assert outcomes() == first


def test_openai_client_retries_through_429(
    configure: Configure, sim: SimulatorProcess, admin: httpx.Client
) -> None:
    configure(rate_429=0.5, retry_after_s=0.01)
    patient = openai.OpenAI(base_url=sim.base_url, api_key="sk-test", max_retries=8)
    for topic in ("owls", "rivers", "volcanoes", "trains", "cheese"):
        reply = patient.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"Tell me about {topic}"}]
        )
        assert reply.choices[0].message.content
    assert admin.get("/simulator/stats").json()["faults"]["429"] > 0


def test_latency_is_concurrent(configure: Configure, sim: SimulatorProcess) -> None:
    configure(latency_ms=500, latency_jitter_ms=20)

    async def burst() -> list[Any]:
        async with openai.AsyncOpenAI(
            base_url=sim.base_url, api_key="sk-test", max_retries=0
        ) as async_client:
            return await asyncio.gather(
                *(
                    async_client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": f"question number {i}"}]
                    )
                    for i in range(64)
                )
            )

    started = time.monotonic()
    replies = asyncio.run(burst())
    elapsed = time.monotonic() - started
    assert len(replies) == 64
    # 64 answers of 0.5 s each: one after another they would take 32 s. Far below that means the
    # simulator answers them at once (the bound leaves room for a loaded machine).
    assert 0.45 <= elapsed < 8.0


def test_stats_count_requests_and_faults(
    configure: Configure, client: openai.OpenAI, admin: httpx.Client
) -> None:
    client.chat.completions.create(model="m", messages=WEATHER_QUESTION)
    client.embeddings.create(model="e", input=["a", "b"])
    configure(rate_500=1.0)
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=WEATHER_QUESTION)
    stats = admin.get("/simulator/stats").json()
    answered = stats.pop("prompt_tokens")  # the one chat request answered (the 500 was not)
    assert stats == {
        "requests": 3,
        "chat_requests": 2,
        "embedding_requests": 1,
        "faults": {"429": 0, "500": 1, "timeout": 0},
        "cached_prompt_tokens": 0,
    }
    assert answered > 0


def test_reset_zeroes_counters(
    configure: Configure, client: openai.OpenAI, admin: httpx.Client
) -> None:
    client.chat.completions.create(model="m", messages=WEATHER_QUESTION)
    stats = admin.post("/simulator/reset").json()
    assert stats["requests"] == 0 and stats["chat_requests"] == 0


def test_settings_update_returns_new_settings(configure: Configure, admin: httpx.Client) -> None:
    updated = configure(rate_500=0.25, embedding_dim=8)
    assert updated["rate_500"] == 0.25 and updated["embedding_dim"] == 8
    assert admin.get("/simulator/settings").json() == updated


def test_invalid_settings_update_is_rejected(configure: Configure, admin: httpx.Client) -> None:
    for bad in ({"rate_500": 2.0}, {"no_such_field": 1}):
        response = admin.post("/simulator/settings", json=bad)
        assert response.status_code == 400
        assert "error" in response.json()
    assert admin.get("/simulator/settings").json()["rate_500"] == 0.0


def test_unknown_route_gets_openai_error_body(admin: httpx.Client, sim: SimulatorProcess) -> None:
    response = admin.get(f"{sim.base_url}/nothing-here")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
