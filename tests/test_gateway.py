"""The LLM gateway against the simulator over real HTTP, through the real openai client."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import http
from toolfactory.config import LLMConfig, StorageConfig, load_config
from toolfactory.errors import LLMFailure, TerminalError
from toolfactory.llm import Endpoint, LLMGateway, RequestCache
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.storage import ObjectStore

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "days"],
}
HELLO = [{"role": "user", "content": "What is the weather in Lyon tomorrow?"}]


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings()) as simulator:
        yield simulator


@pytest.fixture
def knobs(sim: Any) -> Iterator[Any]:
    """Set the simulator's knobs for one test; reset counters and knobs afterwards."""

    def set_knobs(**values: Any) -> None:
        http.post(f"{sim.root_url}/simulator/settings", json=values).raise_for_status()

    http.post(f"{sim.root_url}/simulator/reset").raise_for_status()
    yield set_knobs
    http.post(f"{sim.root_url}/simulator/settings", json=SimulatorSettings().model_dump()).raise_for_status()


def server_stats(sim: Any) -> dict[str, Any]:
    return http.get(f"{sim.root_url}/simulator/stats").json()


def llm(**values: Any) -> LLMConfig:
    base = {"llm.backoff_initial_s": 0.01, "llm.backoff_max_s": 2, "llm.timeout_s": 10}
    base.update({f"llm.{k}": v for k, v in values.items()})
    return load_config(None, [f"{k}={json.dumps(v)}" for k, v in base.items()], environ={}).llm


def gateway(sim: Any, config: LLMConfig, tmp_path: Path | None = None) -> LLMGateway:
    cache = RequestCache(ObjectStore.open(StorageConfig(root=str(tmp_path)))) if tmp_path else None
    return LLMGateway(Endpoint(sim.base_url, "sk-test"), config, cache)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_chat_returns_an_answer_and_counts_usage(sim: Any, knobs: Any) -> None:
    async def go() -> tuple[dict[str, Any], Any]:
        async with gateway(sim, llm()) as gw:
            return await gw.chat("assistant", HELLO), gw.meter

    message, meter = run(go())
    assert message["role"] == "assistant" and message["content"]
    usage = meter.role("assistant")
    assert usage.calls == 1 and usage.prompt_tokens > 0 and usage.completion_tokens > 0


def test_cached_prompt_tokens_the_endpoint_reports_are_counted(sim: Any, knobs: Any) -> None:
    knobs(profile="openai")
    system = {"role": "system", "content": " ".join(f"Rule {i}: cite the source of every figure." for i in range(200))}

    async def go() -> Any:
        async with gateway(sim, llm()) as gw:
            await gw.chat("assistant", [system, *HELLO])
            await gw.chat("assistant", [system, {"role": "user", "content": "And in Paris?"}])
            return gw.meter

    usage = run(go()).role("assistant")
    assert usage.cached_prompt_tokens >= 1024 and usage.cached_prompt_tokens % 128 == 0
    assert usage.cached_prompt_tokens == server_stats(sim)["cached_prompt_tokens"]


@pytest.mark.parametrize("min_tokens", [1024, 0])
def test_requests_sent_together_that_share_a_beginning_wait_for_the_first_answer(sim: Any, knobs: Any, min_tokens: int) -> None:
    # Answers take 100 ms: requests sent together are all prefilled in full unless held back.
    knobs(profile="openai", latency_ms=100, latency_jitter_ms=0)
    system = {"role": "system", "content": " ".join(f"Rule {i}: cite the source of every figure." for i in range(200))}
    questions = ["And in Paris?", "And in Oslo?", "And in Rome?", "And in Lima?"]
    short = [{"role": "user", "content": f"Hello number {i}"} for i in range(3)]  # share nothing worth waiting for

    async def go() -> tuple[Any, int]:
        async with gateway(sim, llm(prefix_cache_min_tokens=min_tokens)) as gw:
            await asyncio.gather(*(gw.chat("assistant", [system, {"role": "user", "content": q}]) for q in questions),
                                 *(gw.chat("user", [m]) for m in short))
            return gw.meter, gw.prefixes.waits

    meter, waits = run(go())
    usage = meter.role("assistant")
    per_prompt = usage.prompt_tokens // len(questions)
    if min_tokens:
        # The first paid the whole prompt; the three that waited found the shared rules cached.
        assert waits == 3
        assert usage.cached_prompt_tokens >= 3 * (per_prompt - 128)
        assert meter.role("user").cached_prompt_tokens == 0 and meter.role("user").calls == 3
    else:
        assert waits == 0 and usage.cached_prompt_tokens == 0
    assert usage.cached_prompt_tokens == server_stats(sim)["cached_prompt_tokens"]


def test_requests_whose_shared_beginning_is_held_already_go_together(sim: Any, knobs: Any) -> None:
    # Once one request with the shared system prompt is answered, the others gain nothing by
    # going one after another: what they share is held (a tool set's later dialogues, a turn's
    # samples after the first turn).
    knobs(profile="openai", latency_ms=50, latency_jitter_ms=0)
    system = {"role": "system", "content": " ".join(f"Rule {i}: cite the source of every figure." for i in range(200))}

    async def go() -> tuple[Any, int]:
        async with gateway(sim, llm()) as gw:
            await gw.chat("assistant", [system, {"role": "user", "content": "Plan a day in Lyon."}])
            await asyncio.gather(*(gw.chat("assistant", [system, {"role": "user", "content": q}])
                                   for q in ("Evening plans in Oslo?", "Morning plans in Rome?")))
            return gw.meter, gw.prefixes.waits

    meter, waits = run(go())
    assert waits == 0
    assert meter.role("assistant").cached_prompt_tokens >= 2 * 1024


def test_a_failed_first_request_lets_the_waiting_ones_go(sim: Any, knobs: Any) -> None:
    knobs(profile="openai", rate_500=1.0)
    system = {"role": "system", "content": " ".join(f"Rule {i}: cite the source of every figure." for i in range(200))}

    async def go() -> list[Any]:
        async with gateway(sim, llm(max_retries=0)) as gw:
            return await asyncio.gather(*(gw.chat("assistant", [system, {"role": "user", "content": q}])
                                          for q in ("Paris?", "Oslo?")), return_exceptions=True)

    assert [type(r) for r in run(go())] == [LLMFailure, LLMFailure]  # neither waits forever


@pytest.mark.parametrize("choices", ["all", "first", "refused"])
def test_samples_of_one_prompt_are_one_request_where_the_endpoint_answers_n_choices(
        sim: Any, knobs: Any, choices: str) -> None:
    # `all`: OpenAI, vLLM; `first`: a provider that ignores n; `refused`: one that answers n > 1 with a 400.
    knobs(choices=choices)

    async def go() -> tuple[list[Any], list[Any], Any, bool]:
        async with gateway(sim, llm()) as gw:
            first = await gw.structured_samples("judge", HELLO, SCHEMA, name="weather", first=0, count=3)
            again = await asyncio.gather(*(gw.structured_samples("judge", [{"role": "user", "content": q}], SCHEMA,
                                                                 name="weather", first=0, count=2)
                                           for q in ("Weather in Oslo?", "Weather in Rome?", "Weather in Lima?")))
            return first, list(again), gw.meter.role("judge"), gw.groups_samples("judge")

    first, again, usage, grouped = run(go())
    assert len(first) == 3 and all(isinstance(v["city"], str) for v in first)
    assert [len(values) for values in again] == [2, 2, 2]
    if choices == "all":
        assert grouped and usage.calls == 4  # one request per call, whatever the count
    elif choices == "first":
        # The first request's one choice is kept, the two missing are asked alone; then one by one.
        assert not grouped and usage.calls == 3 + 3 * 2
    else:
        assert not grouped and usage.calls == 3 + 3 * 2 and usage.failures == {"llm_bad_request": 1}


def test_a_choice_that_does_not_parse_is_asked_again_alone(sim: Any, knobs: Any) -> None:
    knobs(rate_malformed_json=0.5)

    async def go() -> tuple[list[list[Any]], Any]:
        async with gateway(sim, llm(max_reasks=6)) as gw:
            values = await asyncio.gather(*(gw.structured_samples("judge", [{"role": "user", "content": f"Weather in town {i}?"}],
                                                                  SCHEMA, name="weather", first=0, count=3) for i in range(6)))
            return list(values), gw.meter.role("judge")

    values, usage = run(go())
    assert all(len(v) == 3 and all(isinstance(x["days"], int) for x in v) for v in values)
    assert usage.reasks > 0 and usage.calls > 6  # some choices were malformed, and asked again


def test_structured_answer_fits_the_schema(sim: Any, knobs: Any) -> None:
    async def go() -> Any:
        async with gateway(sim, llm()) as gw:
            return await gw.structured("user", HELLO, SCHEMA, name="weather")

    value = run(go())
    assert isinstance(value["city"], str) and 1 <= value["days"] <= 7


def test_retry_after_is_honoured_then_the_failure_has_a_reason(sim: Any, knobs: Any) -> None:
    knobs(rate_429=1.0, retry_after_s=0.3)

    async def go() -> tuple[float, Any, LLMFailure]:
        async with gateway(sim, llm(max_retries=2)) as gw:
            started = time.perf_counter()
            with pytest.raises(LLMFailure) as err:
                await gw.chat("assistant", HELLO)
            return time.perf_counter() - started, gw.meter, err.value

    elapsed, meter, failure = run(go())
    assert failure.reason == "llm_rate_limited" and failure.transient
    assert meter.role("assistant").retries == 2
    assert server_stats(sim)["faults"]["429"] == 3
    # backoff alone would wait ~0.01-0.04 s; two Retry-After waits of 0.3 s were honoured
    assert elapsed >= 0.6


def test_intermittent_rate_limits_are_retried_to_success(sim: Any, knobs: Any) -> None:
    knobs(rate_429=0.5, retry_after_s=0.01)

    async def go() -> tuple[list[dict[str, Any]], Any]:
        async with gateway(sim, llm(max_retries=12)) as gw:
            prompts = [[{"role": "user", "content": f"question {i}"}] for i in range(20)]
            return await asyncio.gather(*(gw.chat("assistant", p) for p in prompts)), gw.meter

    answers, meter = run(go())
    assert len(answers) == 20 and meter.role("assistant").calls == 20
    assert meter.role("assistant").retries == server_stats(sim)["faults"]["429"] > 0


@pytest.mark.parametrize(
    ("fault", "reason"), [({"rate_500": 1.0}, "llm_server_error"), ({"rate_timeout": 1.0, "timeout_hang_s": 2.0}, "llm_timeout")]
)
def test_server_errors_and_timeouts_become_transient_failures(sim: Any, knobs: Any, fault: dict[str, float], reason: str) -> None:
    knobs(**fault)

    async def go() -> LLMFailure:
        async with gateway(sim, llm(max_retries=1, timeout_s=0.4)) as gw:
            with pytest.raises(LLMFailure) as err:
                await gw.chat("assistant", HELLO)
            assert gw.meter.role("assistant").failures[reason] == 1
            return err.value

    failure = run(go())
    assert failure.reason == reason and failure.transient


def test_malformed_answers_are_reasked_then_rejected_with_a_reason(sim: Any, knobs: Any) -> None:
    knobs(rate_malformed_json=1.0)

    async def go() -> tuple[LLMFailure, Any]:
        async with gateway(sim, llm(max_reasks=2)) as gw:
            with pytest.raises(LLMFailure) as err:
                await gw.structured("user", HELLO, SCHEMA, name="weather")
            return err.value, gw.meter

    failure, meter = run(go())
    assert failure.reason == "llm_malformed_json" and not failure.transient
    assert meter.role("user").reasks == 2 and meter.role("user").calls == 3


def test_a_reask_shows_the_model_its_invalid_answer(sim: Any, knobs: Any) -> None:
    knobs(rate_malformed_json=0.3)

    async def go() -> tuple[list[Any], Any]:
        async with gateway(sim, llm(max_reasks=6)) as gw:
            prompts = [[{"role": "user", "content": f"weather question {i}"}] for i in range(12)]
            return await asyncio.gather(*(gw.structured("user", p, SCHEMA, name="w") for p in prompts)), gw.meter

    values, meter = run(go())
    assert all(isinstance(v["days"], int) for v in values)
    assert meter.role("user").reasks > 0


def test_cache_answers_a_repeated_request_without_the_endpoint(sim: Any, knobs: Any, tmp_path: Path) -> None:
    async def ask() -> tuple[dict[str, Any], Any]:
        async with gateway(sim, llm(), tmp_path) as gw:
            return await gw.chat("assistant", HELLO), gw.meter

    first, _ = run(ask())
    requests_after_first = server_stats(sim)["chat_requests"]
    second, meter = run(ask())  # a new gateway, as on another worker or in a re-run
    assert second == first
    assert meter.role("assistant").cache_hits == 1 and meter.role("assistant").calls == 0
    assert server_stats(sim)["chat_requests"] == requests_after_first == 1


def test_cache_key_separates_samples_and_sampling_parameters(sim: Any, knobs: Any, tmp_path: Path) -> None:
    async def go() -> Any:
        async with gateway(sim, llm(), tmp_path) as gw:
            await gw.chat("assistant", HELLO, sample=0)
            await gw.chat("assistant", HELLO, sample=1)
            await gw.chat("judge", HELLO)  # another role: other temperature
            return gw.meter

    meter = run(go())
    assert meter.totals()["calls"] == 3 and meter.totals()["cache_hits"] == 0


def test_concurrency_is_bounded(sim: Any, knobs: Any) -> None:
    knobs(latency_ms=200)

    async def go() -> float:
        async with gateway(sim, llm(max_concurrency=2)) as gw:
            started = time.perf_counter()
            await asyncio.gather(*(gw.chat("assistant", [{"role": "user", "content": f"q{i}"}]) for i in range(6)))
            return time.perf_counter() - started

    # six 200 ms requests, two at a time, cannot finish in fewer than three rounds
    assert run(go()) >= 0.6


def test_tool_calls_come_back_in_openai_format(sim: Any, knobs: Any) -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": SCHEMA}}]

    async def go() -> dict[str, Any]:
        async with gateway(sim, llm()) as gw:
            return await gw.chat("assistant", HELLO, tools=tools, tool_choice="auto")

    [call] = run(go())["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert set(json.loads(call["function"]["arguments"])) >= {"city", "days"}


def test_refused_credentials_are_a_terminal_error(tmp_path: Path) -> None:
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    import threading
    import uvicorn

    async def refuse(request: Any) -> JSONResponse:
        return JSONResponse({"error": {"message": "bad key", "type": "invalid_request_error", "code": "invalid_api_key"}}, status_code=401)

    server = uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/v1/chat/completions", refuse, methods=["POST"])]), host="127.0.0.1", port=0, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        async def go() -> None:
            async with LLMGateway(Endpoint(f"http://127.0.0.1:{port}/v1", "sk-wrong"), llm()) as gw:
                await gw.chat("assistant", HELLO)

        with pytest.raises(TerminalError, match="401"):
            run(go())
    finally:
        server.should_exit = True
        thread.join(5)


def test_embeddings_are_float_vectors_and_cached(sim: Any, knobs: Any, tmp_path: Path) -> None:
    async def go() -> tuple[list[list[float]], Any]:
        async with gateway(sim, llm(), tmp_path) as gw:
            return await gw.embed(["weather in Lyon", "stock price"], model="sim-embed"), gw.meter

    vectors, meter = run(go())
    again, meter_again = run(go())
    assert len(vectors) == 2 and all(isinstance(x, float) for x in vectors[0])
    assert again == vectors
    assert (meter.role("embedding").calls, meter_again.role("embedding").cache_hits) == (1, 1)


def test_samples_of_one_prompt_are_distinct_requests(sim: Any, knobs: Any) -> None:
    schema = {"type": "object", "properties": {"verdict": {"type": "integer", "minimum": 0, "maximum": 1000000}}, "required": ["verdict"]}

    async def go() -> list[Any]:
        async with gateway(sim, llm()) as gw:
            return [await gw.structured("judge", HELLO, schema, name="v", sample=i) for i in range(4)]

    votes = run(go())
    assert len({v["verdict"] for v in votes}) > 1  # a deterministic endpoint still sees four different requests
    assert server_stats(sim)["chat_requests"] == 4


def test_a_closed_port_is_a_connection_error_not_a_timeout() -> None:
    with socket.socket() as probe:  # a port nothing listens at once the socket is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def go() -> tuple[LLMFailure, Any]:
        async with LLMGateway(Endpoint(f"http://127.0.0.1:{port}/v1", "sk-test"), llm(max_retries=0), None) as gw:
            with pytest.raises(LLMFailure) as err:
                await gw.chat("assistant", HELLO)
            return err.value, gw.meter

    failure, meter = run(go())
    assert failure.reason == "llm_connection_error" and failure.transient
    assert "cannot connect" in str(failure) and "\n" not in str(failure)
    assert meter.role("assistant").failures == {"llm_connection_error": 1}
