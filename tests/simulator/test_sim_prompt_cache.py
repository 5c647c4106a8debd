"""The simulator's emulation of its provider's prompt cache, over HTTP: OpenAI's rule for the
openai profile, vLLM's block prefix caching for the vLLM profiles, nothing for plain-text."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

LONG = " ".join(f"rule {i}: answer politely and cite the source of every figure." for i in range(120))  # ~1,900 tokens


def chat(admin: httpx.Client, system: str, user: str) -> dict[str, Any]:
    body = {"model": "sim-small", "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
    response = admin.post("/v1/chat/completions", json=body)
    response.raise_for_status()
    return dict(response.json()["usage"])


def cached(usage: dict[str, Any]) -> int:
    return int(usage["prompt_tokens_details"]["cached_tokens"])


def test_openai_serves_a_repeated_prefix_in_128_token_steps_from_1024_on(admin: httpx.Client, configure: Callable[..., Any]) -> None:
    configure(profile="openai")
    first = chat(admin, LONG, "What is the weather in Lyon?")
    second = chat(admin, LONG, "Book a table for two in Paris tonight.")
    assert cached(first) == 0
    assert cached(second) >= 1024 and cached(second) % 128 == 0
    assert second["prompt_tokens"] - cached(second) < 128 + 20  # all but the last step and the new question


def test_openai_caches_no_prompt_shorter_than_1024_tokens(admin: httpx.Client, configure: Callable[..., Any]) -> None:
    configure(profile="openai")
    short = "You are a helpful assistant. " * 20
    chat(admin, short, "What is the weather in Lyon?")
    assert cached(chat(admin, short, "What is the weather in Lyon?")) == 0


def test_vllm_serves_whole_16_token_blocks_but_never_the_last_token(admin: httpx.Client, configure: Callable[..., Any]) -> None:
    configure(profile="vllm-hermes")
    short = "You are a helpful assistant. " * 20
    first = chat(admin, short, "What is the weather in Lyon?")
    again = chat(admin, short, "What is the weather in Lyon?")
    assert cached(first) == 0
    assert 0 < cached(again) < again["prompt_tokens"] and cached(again) % 16 == 0


def test_a_prompt_that_differs_at_its_start_shares_nothing(admin: httpx.Client, configure: Callable[..., Any]) -> None:
    configure(profile="vllm-hermes")
    chat(admin, LONG, "What is the weather in Lyon?")
    assert cached(chat(admin, "Today is Monday. " + LONG, "What is the weather in Lyon?")) == 0


def test_a_server_without_a_prefix_cache_reports_no_cached_tokens(admin: httpx.Client, configure: Callable[..., Any]) -> None:
    configure(profile="plain-text")
    chat(admin, LONG, "What is the weather in Lyon?")
    assert "prompt_tokens_details" not in chat(admin, LONG, "What is the weather in Lyon?")


def test_requests_in_flight_together_do_not_serve_each_other(admin: httpx.Client, configure: Callable[..., Any]) -> None:
    configure(profile="openai", latency_ms=300)
    with ThreadPoolExecutor(2) as pool:
        usages = list(pool.map(lambda user: chat(admin, LONG, user), ["What is the weather in Lyon?", "And in Paris?"]))
    assert [cached(u) for u in usages] == [0, 0]
    assert cached(chat(admin, LONG, "And in Rome?")) >= 1024  # once answered, the prefix is held


def test_the_cache_forgets_the_least_recently_used_blocks_beyond_its_size(admin: httpx.Client, configure: Callable[..., Any]) -> None:
    configure(profile="vllm-hermes", prefix_cache_blocks=150)  # fewer than two long prompts' blocks
    chat(admin, LONG, "What is the weather in Lyon?")
    chat(admin, LONG.replace("rule", "law"), "What is the weather in Lyon?")
    assert cached(chat(admin, LONG, "What is the weather in Lyon?")) == 0


@pytest.mark.parametrize("profile", ["openai", "vllm-hermes"])
def test_the_server_totals_count_cached_tokens(admin: httpx.Client, configure: Callable[..., Any], profile: str) -> None:
    configure(profile=profile)
    usages = [chat(admin, LONG, "What is the weather in Lyon?") for _ in range(2)]
    stats = admin.get("/simulator/stats").json()
    assert stats["prompt_tokens"] == sum(u["prompt_tokens"] for u in usages)
    assert stats["cached_prompt_tokens"] == sum(cached(u) for u in usages) > 0


def test_a_text_mode_prompt_counts_its_functions_once_and_its_next_turn_finds_it_held(
        admin: httpx.Client, configure: Callable[..., Any]) -> None:
    # Text mode: the functions are written into the system prompt and no `tools` are sent; the
    # simulator reads them back to answer, but the prompt is the text that was sent.
    from toolfactory.llm.text_tools import text_messages

    configure(profile="openai")
    tools = [{"type": "function", "function": {"name": f"lookup_{i}", "description": LONG[:1200],
                                                 "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}
             for i in range(4)]
    opening = [{"role": "user", "content": "Find the opening hours of the Lyon museum."}]
    first_messages = text_messages(opening, tools, "react")
    first = admin.post("/v1/chat/completions", json={"model": "sim-small", "messages": first_messages})
    first.raise_for_status()
    answer = first.json()["choices"][0]["message"]
    chars = sum(len(m["content"]) for m in first_messages)
    assert first.json()["usage"]["prompt_tokens"] <= chars // 4 + 3 * len(first_messages) + 2
    turn = [*first_messages, {"role": "assistant", "content": answer["content"]},
            {"role": "tool", "name": "lookup_0", "content": "Observation: {\"hours\": \"9-18\"}"}]
    second = chat_body(admin, turn)
    assert second["prompt_tokens"] - cached(second) < 128 + 60  # all but the last step and the new turn


def chat_body(admin: httpx.Client, messages: list[dict[str, Any]]) -> dict[str, Any]:
    response = admin.post("/v1/chat/completions", json={"model": "sim-small", "messages": messages})
    response.raise_for_status()
    return dict(response.json()["usage"])
