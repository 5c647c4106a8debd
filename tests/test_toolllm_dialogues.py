"""The toolllm dialogues stage through the real gateway and the simulator over HTTP: response
compression as ToolLLM A.2 does it (full-size responses, keys chosen once per API, then the cut)
and the shape of every stored path (a thought and its call are one assistant message)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from toolfactory.config import load_config
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue, Function, Rejected, Task, Tool
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.dialogues.api_pages import full_page
from toolfactory.stages.dialogues.compression import estimate_tokens, keep_documented
from toolfactory.stages.dialogues.response_keys import key_paths, restrict
from toolfactory.stages.dialogues.stage import DialoguesStage
from toolfactory.storage import ObjectStore

HOTEL = {"type": "object", "properties": {
    "name": {"type": "string"}, "address": {"type": "string"}, "stars": {"type": "integer"},
    "price_per_night": {"type": "number"}, "image_url": {"type": "string"}, "booking_token": {"type": "string"},
    "description": {"type": "string"}}}
SEARCH = Function(
    name="search_hotels", description="Search hotels in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    returns={"type": "object", "properties": {"request_id": {"type": "string"}, "results": {"type": "array", "items": HOTEL}}},
)
RATE = Function(
    name="exchange_rate", description="The exchange rate between two currencies.",
    parameters={"type": "object", "properties": {"base": {"type": "string"}, "target": {"type": "string"}}, "required": ["base", "target"]},
    returns={"type": "object", "properties": {"rate": {"type": "number"}, "date": {"type": "string"}}},
)
TOOLS = [Tool(name="Hotels", description="Hotel search.", category="Travel", functions=[SEARCH]),
         Tool(name="Currency", description="Exchange rates.", category="Finance", functions=[RATE])]
CITIES = ["Lisbon", "Porto", "Madrid", "Seville", "Valencia", "Bilbao"]


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings()) as simulator:
        yield simulator


def dialogues(sim: Any, root: Path, *overrides: str) -> tuple[StageOutput, dict[str, Any]]:
    tasks = [Task(id=f"t{i}", tools=TOOLS, instruction=f"Find a hotel in {city} and tell me its price in yen.",
                  recipe="toolllm", mode="open") for i, city in enumerate(CITIES)]
    config = load_config(None, [f"storage.root={root}", "dialogues.keep_failed_searches=true", *overrides], environ={})

    async def go() -> tuple[StageOutput, dict[str, Any]]:
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), config.llm) as gateway:
            ctx = ShardContext(config=config, run_id="r", gateway=gateway, store=ObjectStore.open(config.storage))
            out = await DialoguesStage().run(ShardSpec("dialogues", 0, ()), [t.model_dump() for t in tasks], ctx)
            return out, gateway.meter.to_dict()

    return asyncio.run(go())


@pytest.fixture(scope="module")
def paper(sim: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[StageOutput, dict[str, Any]]:
    return dialogues(sim, tmp_path_factory.mktemp("paper"))


def tool_bodies(dialogue: Dialogue, name: str) -> list[str]:
    return [m.content or "" for m in dialogue.messages if m.role == "tool" and m.name == name]


def test_key_paths_and_restrict_follow_the_returns_schema() -> None:
    assert key_paths(SEARCH.returns) == ["request_id", "results"] + [f"results[].{k}" for k in HOTEL["properties"]]
    kept = restrict(SEARCH.returns, ["results[].name", "results[].stars"])
    response = {"request_id": "r1", "results": [{"name": "Ritz", "stars": 5, "image_url": "x"}]}
    assert keep_documented(response, kept) == {"results": [{"name": "Ritz", "stars": 5}]}
    assert keep_documented(response, restrict(SEARCH.returns, ["results"])) == {"results": response["results"]}


def test_full_page_asks_for_long_outermost_lists_only() -> None:
    paged = full_page({"type": "object", "properties": {"items": {"type": "array", "maxItems": 10, "items": {
        "type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}}}}}, 40)
    assert paged["required"] == ["items"] and paged["properties"]["items"]["minItems"] == 10
    assert "minItems" not in paged["properties"]["items"]["items"]["properties"]["tags"]
    assert full_page(RATE.returns, 40) == RATE.returns and full_page(SEARCH.returns, 0) == SEARCH.returns


def test_long_responses_are_compressed_by_the_keys_chosen_once_per_api(paper: tuple[StageOutput, dict[str, Any]]) -> None:
    out, usage = paper
    records = [r for r in out.records if isinstance(r, Dialogue)]
    budget = 1024
    searched = [d for d in records if tool_bodies(d, "search_hotels")]
    assert len(searched) >= 3
    assert out.profile["compressed_responses"]["toolllm"] >= len(searched)
    assert usage["designer"]["calls"] == 1  # A.2's choice is made once for the one API whose responses are long
    for dialogue in searched:
        keys = dialogue.generation["response_keys"]["search_hotels"]
        assert keys and set(keys) <= set(key_paths(SEARCH.returns)) and "exchange_rate" not in dialogue.generation["response_keys"]
        for body in tool_bodies(dialogue, "search_hotels"):
            assert estimate_tokens(body) <= budget
            try:
                value = json.loads(body)
            except json.JSONDecodeError:  # still too long after pruning: cut, as A.2 does
                continue
            response = value["response"]
            assert keep_documented(response, restrict(SEARCH.returns, keys)) == response  # no key outside the chosen ones
    # A short response is passed on as it came.
    for dialogue in records:
        for body in tool_bodies(dialogue, "exchange_rate"):
            assert set(json.loads(body)["response"]) <= {"rate", "date"}


def test_the_returns_schema_alone_can_decide_what_is_kept(sim: Any, tmp_path: Path) -> None:
    out, usage = dialogues(sim, tmp_path, "dialogues.compression_keys=returns_schema")
    assert "designer" not in usage and out.profile["compressed_responses"]["toolllm"] >= 1
    assert all("response_keys" not in r.generation for r in out.records if isinstance(r, Dialogue))


def test_every_stored_path_has_each_thought_in_the_message_of_its_call(paper: tuple[StageOutput, dict[str, Any]]) -> None:
    out, _ = paper
    records = [r for r in out.records if isinstance(r, Dialogue)]
    assert len(records) + len([r for r in out.rejected if isinstance(r, Rejected)]) == len(CITIES) and records
    calls_with_thought = 0
    for dialogue in records:
        roles = [m.role for m in dialogue.messages]
        for k in range(1, len(roles)):
            assert not (roles[k] == "assistant" and roles[k - 1] == "assistant"), (dialogue.id, roles)
        for message in dialogue.messages:
            if message.role == "assistant" and message.tool_calls:
                calls_with_thought += bool(message.content)
    assert calls_with_thought  # the simulator's thoughts are there, in the calls' own messages
