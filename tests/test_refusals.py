"""Refusals retrying cannot fix, through the gateway against the simulator over real HTTP: the
same 400 for one role and request shape stops the work past `llm.max_repeated_refusals`."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from toolfactory.errors import EndpointRefused, LLMFailure, TerminalError
from toolfactory.llm.refusals import request_shape
from test_gateway import HELLO, SCHEMA, gateway, knobs, llm, run, sim  # noqa: F401  (fixtures)

LISTED = {"type": "object", "properties": {"cities": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
          "required": ["cities"]}


def ask(gw: Any, schema: dict[str, Any], name: str) -> Any:
    return gw.structured("user", HELLO, schema, name=name)


def test_the_same_refusal_past_the_limit_stops_with_the_endpoints_words(sim: Any, knobs: Any) -> None:
    knobs(refused_schema_keywords="minItems")

    async def go() -> tuple[list[str], EndpointRefused]:
        async with gateway(sim, llm(max_repeated_refusals=2)) as gw:
            reasons = []
            for _ in range(2):
                with pytest.raises(LLMFailure) as failure:
                    await ask(gw, LISTED, "cities")
                reasons.append(failure.value.reason)
            with pytest.raises(EndpointRefused) as stopped:
                await ask(gw, LISTED, "cities")
            return reasons, stopped.value

    reasons, stopped = run(go())
    assert reasons == ["llm_bad_request", "llm_bad_request"]  # up to the limit: rejected records
    assert isinstance(stopped, TerminalError) and stopped.count == 3 and stopped.status == 400
    assert str(stopped).startswith("llm.roles.user (model 'sim-small'): the endpoint refused 3 requests of the same shape")
    assert "response_format json_schema 'cities'" in str(stopped)
    assert "not supported by xgrammar: 'minItems'" in str(stopped)
    assert str(pickle.loads(pickle.dumps(stopped))) == str(stopped)  # it crosses Ray whole


def test_answers_of_the_same_shape_reset_the_count(sim: Any, knobs: Any) -> None:
    knobs(refused_schema_keywords="minItems")

    async def go() -> None:
        async with gateway(sim, llm(max_repeated_refusals=1)) as gw:
            for _ in range(3):  # a refusal, then an answer of the same shape: never two in a row
                with pytest.raises(LLMFailure):
                    await ask(gw, LISTED, "same")
                await ask(gw, SCHEMA, "same")

    run(go())


def test_shapes_are_told_apart_by_what_a_server_refuses() -> None:
    chat = {"model": "m", "messages": [], "max_tokens": 5, "temperature": 0.7}
    assert request_shape(chat) == "chat; parameters max_tokens, temperature"
    assert request_shape({**chat, "messages": [{"role": "user", "content": "other"}]}) == request_shape(chat)
    tools = {**chat, "tools": [{}], "tool_choice": "auto"}
    assert request_shape(tools) == "chat with tools; tool_choice auto; parameters max_tokens, temperature"
    schema = {**chat, "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {}}}}
    assert request_shape(schema) != request_shape({**schema, "response_format": {"type": "json_schema", "json_schema": {"name": "b"}}})
    assert request_shape({**chat, "seed": 2}) != request_shape(chat)
