"""ReAct / DFSDT solution search (ToolLLM §2.3, A.4, A.8) and response compression (A.2).

The search runs against the real simulator over HTTP through the real gateway. With default
settings the simulator calls the function sharing most words with the last user message,
answers a tool result with text, and draws enum arguments at random per request. So the first
path of a search alternates calls and thoughts down to `max_depth`; a re-expansion's diversity
prompt lists the earlier actions (with words like "task", "state", "restart", "Finish"), which
makes the simulator call `Finish`, with ``give_answer`` or ``give_up_and_restart`` drawn at
random: that is where its give-ups, backtracks and answers come from. Scripted doubles pin down
exact branch shapes."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterator

import pytest

from conftest import http
from toolfactory.config import load_config
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Function, Message, Tool, ToolCall
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.stages.dialogues.compression import compress_response, estimate_tokens, keep_documented
from toolfactory.stages.dialogues.search import (
    DIVERSITY_PROMPT,
    FINISH_FUNCTION,
    SearchResult,
    joined_thoughts,
    opening_messages,
    solve,
)

WEATHER = Function(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    returns={"type": "object", "properties": {"temperature": {"type": "number"}, "conditions": {"type": "string"}}},
)
NEWS = Function(
    name="search_news",
    description="Search news articles about a topic.",
    parameters={"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]},
    returns={
        "type": "object",
        "properties": {"articles": {"type": "array", "items": {"type": "object", "properties": {"title": {"type": "string"}}}}},
    },
)
FUNCTIONS = [WEATHER, NEWS]
TOOLS = [
    Tool(name="Weather", description="Weather reports", functions=[WEATHER]),
    Tool(name="News", description="News search", functions=[NEWS]),
]
CITIES = ["Paris", "Berlin", "Rome", "Oslo", "Lima", "Cairo", "Tokyo", "Quito", "Dakar", "Hanoi"]
WEATHER_QUERIES = [f"What is the weather in {city} today?" for city in CITIES]
DIVERSITY_HEAD, DIVERSITY_TAIL = DIVERSITY_PROMPT.split("{previous_candidate}")


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings()) as simulator:
        yield simulator


@dataclass
class Exchange:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    sample: int
    reply: dict[str, Any]


@dataclass
class Agents:
    """The real assistant and tool executor (gateway → simulator), recording every exchange."""

    gateway: LLMGateway
    exchanges: list[Exchange] = field(default_factory=list)
    executed: list[ToolCall] = field(default_factory=list)

    async def chat(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]], sample: int) -> dict[str, Any]:
        reply = await self.gateway.chat("assistant", messages, tools=tools, tool_choice="auto", sample=sample)
        self.exchanges.append(Exchange(json.loads(json.dumps(messages)), tools, sample, reply))
        return reply

    async def execute(self, function: Function, call: ToolCall) -> str:
        self.executed.append(call)
        prompt = f"You simulate the API {function.name}. Request arguments: {call.arguments}"
        messages = [{"role": "user", "content": prompt}]
        response = await self.gateway.structured("tool", messages, function.returns, name="api_response")
        return json.dumps({"status_code": 200, "response": response})


@dataclass
class Run:
    result: SearchResult
    agents: Agents
    meter_calls: int  # assistant + tool requests the gateway sent for this search


def search(sim: Any, queries: list[str], **limits: Any) -> list[Run]:
    config = load_config(None, [], environ={})

    async def go() -> list[Run]:
        runs = []
        for query in queries:
            async with LLMGateway(Endpoint(sim.base_url, "sk-test"), config.llm) as gateway:
                agents = Agents(gateway)
                opening = opening_messages(query, TOOLS)
                result = await solve(opening, FUNCTIONS, chat=agents.chat, execute=agents.execute, **limits)
                meter = gateway.meter
                runs.append(Run(result, agents, meter.role("assistant").calls + meter.role("tool").calls))
        return runs

    return asyncio.run(go())


def thoughts_joined(shapes: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """`shape` output with a text-only assistant turn joined to the calling assistant turn after it."""
    out: list[tuple[Any, ...]] = []
    for role, content, ids, call_id in shapes:
        if role == "assistant" and ids and out and out[-1][0] == "assistant" and not out[-1][2]:
            content = "\n".join(t for t in (out.pop()[1], content) if t) or None
        out.append((role, content, ids, call_id))
    return out


def shape(messages: list[Any]) -> list[tuple[Any, ...]]:
    """Role, content and call ids of canonical or wire messages, to compare the two."""
    out = []
    for m in messages:
        m = m.model_dump() if isinstance(m, Message) else m
        ids = [c["id"] for c in m.get("tool_calls") or []]
        out.append((m["role"], m.get("content"), ids, m.get("tool_call_id")))
    return out


def is_diversity(message: dict[str, Any]) -> bool:
    return message["role"] == "user" and str(message["content"]).startswith(DIVERSITY_HEAD)


def call_ids(messages: list[Message]) -> set[str]:
    return {c.id for m in messages for c in m.tool_calls or []}


# --- DFSDT against the simulator ------------------------------------------------------------


def test_dfsdt_backtracks_after_give_ups_and_keeps_only_the_answering_path(sim: Any) -> None:
    runs = search(sim, WEATHER_QUERIES, max_depth=4, max_children=2)
    answered = [r for r in runs if r.result.finish_type == "give_answer"]
    assert answered and any(r.result.backtracks > 0 for r in answered)
    assert any(n.kind == "give_up" for r in answered for n in r.result.tree)
    abandoned_calls = 0
    for run in answered:
        result, exchanges = run.result, run.agents.exchanges
        final = result.messages[-1]
        assert final.role == "assistant" and not final.tool_calls
        assert result.finish is not None and final.content == json.loads(result.finish["arguments"])["final_answer"]
        assert all(c.name != "Finish" for m in result.messages for c in m.tool_calls or [])
        # The kept path is exactly the conversation the answering request carried, with each
        # plain-text thought joined to the assistant message after it.
        answering = next(e for e in exchanges if result.finish["id"] in {c["id"] for c in e.reply.get("tool_calls") or []})
        sent = [m for m in answering.messages if not is_diversity(m)]
        expected = thoughts_joined(shape(sent))
        if expected[-1][0] == "assistant" and not expected[-1][2]:  # a thought before Finish joins the answer
            assert expected.pop()[1] in (final.reasoning or "")
        assert shape(result.messages[:-1]) == expected
        assert result.path_depth == sum(m["role"] == "assistant" for m in sent) + 1
        # Calls of abandoned branches are not in it.
        made = {c["id"] for e in exchanges for c in e.reply.get("tool_calls") or [] if c["function"]["name"] != "Finish"}
        kept = call_ids(result.messages)
        assert kept <= made
        abandoned_calls += len(made - kept)
    assert abandoned_calls > 0


@pytest.mark.parametrize(("max_depth", "max_children"), [(4, 3), (3, 2)])
def test_dfsdt_respects_max_depth_and_max_children_and_counts_every_call(
    sim: Any, max_depth: int, max_children: int
) -> None:
    runs = search(sim, WEATHER_QUERIES, max_depth=max_depth, max_children=max_children, max_calls=100)
    widths: Counter[int] = Counter()
    for run in runs:
        result = run.result
        children = Counter(node.parent for node in result.tree)
        widths.update(children.values())
        assert max(children.values()) <= max_children
        assert all(node.depth <= max_depth for node in result.tree) and result.path_depth <= max_depth
        assert all(node.sample == index for kids in _siblings(result).values() for index, node in enumerate(kids))
        assert result.tree_size == len(result.tree) == len(run.agents.exchanges)
        assert result.llm_calls == len(run.agents.exchanges) + len(run.agents.executed) == run.meter_calls
        if result.finish_type == "limit":
            assert result.limit == "max_depth" and result.finish is None
    # The bounds were reached, not just respected.
    assert widths[max_children] > 0
    assert any(node.depth == max_depth for run in runs for node in run.result.tree)
    if max_children == 2:
        assert any(r.result.limit == "max_depth" for r in runs)


def test_max_calls_stops_the_search_and_says_so(sim: Any) -> None:
    for run in search(sim, WEATHER_QUERIES[:3], max_depth=12, max_children=2, max_calls=7):
        assert run.result.finish_type == "limit" and run.result.limit == "max_calls"
        assert run.result.llm_calls == run.meter_calls == 7
        assert run.result.finish is None


def test_re_expansion_sends_the_diversity_prompt_listing_the_earlier_children(sim: Any) -> None:
    checked_with_two = 0
    for run in search(sim, WEATHER_QUERIES[:5], max_depth=4, max_children=3):
        by_state: dict[str, list[Exchange]] = {}
        for exchange in run.agents.exchanges:
            state = [m for m in exchange.messages if not is_diversity(m)]
            by_state.setdefault(json.dumps(state), []).append(exchange)
            assert exchange.tools[-1] == FINISH_FUNCTION.openai_tool()
        for siblings in by_state.values():
            assert [e.sample for e in siblings] == list(range(len(siblings)))
            assert not any(is_diversity(m) for m in siblings[0].messages)
            for index, exchange in enumerate(siblings[1:], 1):
                prompt = exchange.messages[-1]
                assert is_diversity(prompt) and prompt["content"].endswith(DIVERSITY_TAIL)
                listed = json.loads(prompt["content"][len(DIVERSITY_HEAD) : -len(DIVERSITY_TAIL)])
                assert [_action(entry) for entry in listed] == [a for e in siblings[:index] for a in _actions(e.reply)]
                checked_with_two += index >= 2
    assert checked_with_two > 0


def test_react_is_a_single_chain(sim: Any) -> None:
    # Words of Finish's description make the simulator call it in the chain.
    finishing = [f"Give me the final answer about the {w} task result" for w in ("weather", "news", "city", "state")]
    queries = WEATHER_QUERIES[:3] + finishing
    runs = search(sim, queries, method="react", max_depth=6, max_children=3)
    for run in runs:
        result = run.result
        assert [n.parent for n in result.tree] == [n.id - 1 for n in result.tree]
        assert result.backtracks == 0 and all(n.sample == 0 for n in result.tree)
        assert not any(is_diversity(m) for e in run.agents.exchanges for m in e.messages)
        last = result.tree[-1]
        expected = {"give_answer": "give_answer", "give_up": "give_up", "invalid_finish": "give_up"}.get(last.kind, "limit")
        assert result.finish_type == expected
        if expected == "limit":
            assert result.limit == "max_depth" and result.path_depth == 6
    assert {r.result.finish_type for r in runs} >= {"give_up", "limit"}


@pytest.mark.parametrize(
    ("fault", "error"),
    [("rate_missing_required", "is a required property"), ("rate_hallucinated_function", "unknown function")],
)
def test_invalid_calls_get_error_observations(sim: Any, fault: str, error: str) -> None:
    http.post(f"{sim.root_url}/simulator/settings", json={fault: 1.0}).raise_for_status()
    try:
        runs = search(sim, WEATHER_QUERIES[:3], max_depth=4, max_children=2)
    finally:
        http.post(f"{sim.root_url}/simulator/settings", json={fault: 0.0}).raise_for_status()
    for run in runs:
        assert not run.agents.executed  # no invalid call reaches the executor
        observations = {m["content"] for e in run.agents.exchanges for m in e.messages if m["role"] == "tool"}
        observations |= {m.content for m in run.result.messages if m.role == "tool"}
        assert observations
        for content in observations:
            body = json.loads(content or "")
            assert body["status_code"] == 400 and error in body["error"]
        assert run.result.finish_type != "give_answer"  # every Finish is broken too


def _siblings(result: SearchResult) -> dict[int, list[Any]]:
    groups: dict[int, list[Any]] = {}
    for node in result.tree:
        groups.setdefault(node.parent, []).append(node)
    return groups


def _actions(reply: dict[str, Any]) -> list[tuple[str, str]]:
    calls = reply.get("tool_calls") or []
    finish = [c for c in calls if c["function"]["name"] == "Finish"]
    shown = finish[:1] or calls  # a Finish reply shows as that Finish
    return [(c["function"]["name"], c["function"]["arguments"]) for c in shown] or [("thought", reply.get("content"))]


def _action(entry: dict[str, Any]) -> tuple[str, str]:
    return ("thought", entry["thought"]) if "thought" in entry else (entry["name"], entry["arguments"])


# --- exact branch shapes with a scripted assistant ------------------------------------------

Reply = dict[str, Any]
_ids = itertools.count(1)


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": f"call_{next(_ids)}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def reply(*calls: dict[str, Any], content: str | None = None) -> Reply:
    return {"role": "assistant", "content": content, "tool_calls": list(calls) or None}


def give_up() -> Reply:
    return reply(tool_call("Finish", return_type="give_up_and_restart"))


Seen = list[tuple[list[str], int, bool]]  # (cities called on the path, sample, diversity prompt sent)


def scripted(decide: Callable[[list[str], int], Reply]) -> tuple[Callable[..., Awaitable[Reply]], Seen]:
    """An assistant double: `decide` sees the cities called so far on the path and the sample."""
    seen: Seen = []

    async def chat(messages: list[dict[str, Any]], *, tools: list[dict[str, Any]], sample: int) -> Reply:
        assert tools[-1] == FINISH_FUNCTION.openai_tool()
        path = [json.loads(c["function"]["arguments"])["city"] for m in messages for c in m.get("tool_calls") or []]
        seen.append((path, sample, is_diversity(messages[-1])))
        return decide(path, sample)

    return chat, seen


async def executor(function: Function, call: ToolCall) -> str:
    return json.dumps({"city": json.loads(call.arguments)["city"], "temperature": 21})


def run_script(decide: Callable[[list[str], int], Reply], **limits: Any) -> tuple[SearchResult, Seen]:
    chat, seen = scripted(decide)
    opening = opening_messages("Weather in Paris or Rome?", TOOLS)
    result = asyncio.run(solve(opening, FUNCTIONS, chat=chat, execute=executor, **limits))
    return result, seen


def test_a_give_up_abandons_the_branch_and_the_search_goes_back_to_the_parents_next_child() -> None:
    def decide(path: list[str], sample: int) -> Reply:
        if not path:
            return reply(tool_call("get_weather", city=["Paris", "Rome"][sample]), content="Let me look.")
        if path == ["Paris"]:
            return give_up()  # both children of the Paris node give up
        return reply(tool_call("Finish", return_type="give_answer", final_answer="Rome: 21 degrees."), content="Rome works.")

    result, seen = run_script(decide, max_depth=4, max_children=2)
    assert seen == [([], 0, False), (["Paris"], 0, False), (["Paris"], 1, True), ([], 1, True), (["Rome"], 0, False)]
    assert result.finish_type == "give_answer" and result.limit is None
    assert result.backtracks == 2 and result.tree_size == 5 and result.llm_calls == 5 + 2
    assert [n.kind for n in result.tree] == ["call", "give_up", "give_up", "call", "give_answer"]
    cities = [json.loads(c.arguments)["city"] for m in result.messages for c in m.tool_calls or []]
    assert cities == ["Rome"]  # the abandoned Paris branch is gone
    assert [m.role for m in result.messages] == ["system", "user", "assistant", "tool", "assistant"]
    final = result.messages[-1]
    assert final.content == "Rome: 21 degrees." and final.reasoning == "Rome works." and final.tool_calls is None
    assert result.finish is not None and result.finish["return_type"] == "give_answer" and result.path_depth == 2


def test_a_broken_finish_fails_its_branch_and_never_enters_the_path() -> None:
    def decide(path: list[str], sample: int) -> Reply:
        if sample == 0:
            return reply(tool_call("Finish", return_type="give_answer"))  # no final_answer
        answer = tool_call("Finish", return_type="give_answer", final_answer="Sunny.")
        return reply(answer, tool_call("get_weather", city="Oslo"))

    result, _ = run_script(decide, max_depth=3, max_children=2)
    assert [n.kind for n in result.tree] == ["invalid_finish", "give_answer"]
    assert result.finish_type == "give_answer" and result.backtracks == 1
    assert [m.role for m in result.messages] == ["system", "user", "assistant"] and result.messages[-1].content == "Sunny."
    assert result.finish is not None
    assert result.finish["discarded_calls"] == [{"name": "get_weather", "arguments": '{"city": "Oslo"}'}]
    assert result.llm_calls == 2  # the call sent next to the answer was not executed


def test_a_call_the_rules_reject_fails_its_branch_before_it_is_executed() -> None:
    def decide(path: list[str], sample: int) -> Reply:
        if not path and sample == 0:
            return reply(tool_call("get_forecast", city="Paris"))  # no such function
        if not path:
            return reply(tool_call("get_weather", city="Rome"))
        return reply(tool_call("Finish", return_type="give_answer", final_answer="Rome: 21 degrees."))

    def rejects(messages: list[Message]) -> bool:
        return any(c.name not in {f.name for f in FUNCTIONS} for m in messages for c in m.tool_calls or [])

    chat, seen = scripted(decide)
    opening = opening_messages("Weather in Paris or Rome?", TOOLS)
    result = asyncio.run(solve(opening, FUNCTIONS, chat=chat, execute=executor, max_depth=4, max_children=2, rejects=rejects))
    assert [n.kind for n in result.tree] == ["rejected_call", "call", "give_answer"]
    assert result.finish_type == "give_answer" and result.backtracks == 1
    assert result.llm_calls == 3 + 1  # three replies and one executed call: the rejected one was never answered
    assert [c.name for m in result.messages for c in m.tool_calls or []] == ["get_weather"]
    assert seen[1][2]  # the second child was asked with the diversity prompt showing the first


def test_an_answer_whose_path_the_rules_reject_fails_its_branch() -> None:
    def decide(path: list[str], sample: int) -> Reply:
        if not path and sample == 0:  # an answer without any call: verify would reject the path
            return reply(tool_call("Finish", return_type="give_answer", final_answer="It is sunny."))
        if not path:
            return reply(tool_call("get_weather", city="Rome"))
        return reply(tool_call("Finish", return_type="give_answer", final_answer="Rome: 21 degrees."))

    seen_paths: list[list[str]] = []

    def rejects_answer(messages: list[Message]) -> bool:
        seen_paths.append([m.role for m in messages])
        return not any(m.tool_calls for m in messages)

    chat, seen = scripted(decide)
    opening = opening_messages("Weather in Paris or Rome?", TOOLS)
    result = asyncio.run(solve(opening, FUNCTIONS, chat=chat, execute=executor, max_depth=4, max_children=2,
                               rejects_answer=rejects_answer))
    assert [n.kind for n in result.tree] == ["rejected_answer", "call", "give_answer"]
    assert result.finish_type == "give_answer" and result.messages[-1].content == "Rome: 21 degrees."
    # The check saw each answer's path as it would be kept, the final answer last.
    assert seen_paths == [["system", "user", "assistant"], ["system", "user", "assistant", "tool", "assistant"]]
    assert seen[1][2]  # the next child was asked with the diversity prompt showing the rejected answer


@pytest.mark.parametrize(("method", "size"), [("dfsdt", 3), ("react", 1)])
def test_a_search_that_always_gives_up_ends_with_give_up(method: str, size: int) -> None:
    result, seen = run_script(lambda path, sample: give_up(), method=method, max_depth=5, max_children=3)
    assert result.finish_type == "give_up" and result.limit is None
    assert result.tree_size == size and result.backtracks == size - 1
    assert [s for _, s, _ in seen] == list(range(size))
    assert [m.role for m in result.messages] == ["system", "user"] and result.path_depth == 0


def test_a_search_that_never_finishes_is_cut_by_max_depth() -> None:
    def always_call(path: list[str], sample: int) -> Reply:
        return reply(tool_call("get_weather", city=f"C{len(path)}{sample}"))

    result, _ = run_script(always_call, max_depth=2, max_children=2)
    # A full binary tree of depth 2: 6 nodes, each node re-expanded once after its first subtree.
    assert result.finish_type == "limit" and result.limit == "max_depth"
    assert result.tree_size == 6 and result.backtracks == 3
    layout = [(n.parent, n.depth, n.sample) for n in result.tree]
    assert layout == [(0, 1, 0), (1, 2, 0), (1, 2, 1), (0, 1, 1), (4, 2, 0), (4, 2, 1)]
    # The calls at max_depth are not executed (nothing below them could answer): 6 replies, 2 results.
    assert [n.kind for n in result.tree] == ["call", "depth_cut", "depth_cut", "call", "depth_cut", "depth_cut"]
    assert result.llm_calls == 6 + 2
    assert result.path_depth == 1 and call_ids(result.messages) == {m.tool_call_id for m in result.messages if m.role == "tool"}


def test_a_call_is_not_executed_when_no_answer_could_follow_it_within_the_budget() -> None:
    executed: list[str] = []

    async def counting(function: Function, call: ToolCall) -> str:
        executed.append(call.arguments)
        return await executor(function, call)

    def two_calls(path: list[str], sample: int) -> Reply:
        return reply(tool_call("get_weather", city=f"A{len(path)}"), tool_call("get_weather", city=f"B{len(path)}"))

    chat, _ = scripted(two_calls)
    opening = opening_messages("Weather in Paris or Rome?", TOOLS)
    # 1 reply + 2 results + 1 reply leave 1 request: the second reply's two calls plus an answer
    # would need 3, so they are not executed and the search ends for its budget.
    result = asyncio.run(solve(opening, FUNCTIONS, chat=chat, execute=counting, max_depth=9, max_calls=5))
    assert result.finish_type == "limit" and result.limit == "max_calls"
    assert len(executed) == 2 and result.llm_calls == 4


def test_running_out_of_calls_before_a_tool_result_drops_the_unanswered_call() -> None:
    def always_call(path: list[str], sample: int) -> Reply:
        return reply(tool_call("get_weather", city=f"C{len(path)}"))

    result, _ = run_script(always_call, max_depth=9, max_calls=3)
    assert result.finish_type == "limit" and result.limit == "max_calls" and result.llm_calls == 3
    answered = {m.tool_call_id for m in result.messages if m.role == "tool"}
    assert call_ids(result.messages) == answered and len(answered) == 1


def test_solve_refuses_a_task_function_named_finish_and_empty_limits() -> None:
    chat, _ = scripted(lambda path, sample: give_up())
    with pytest.raises(ValueError, match="Finish"):
        asyncio.run(solve([], [Function(name="Finish")], chat=chat, execute=executor))
    with pytest.raises(ValueError, match="max_children must be at least 1, got 0"):
        asyncio.run(solve([], FUNCTIONS, chat=chat, execute=executor, max_children=0))


# --- response compression (A.2) --------------------------------------------------------------

RETURNS = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "array", "items": {"$ref": "#/$defs/day"}},
        "source": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"name": {"type": "string"}}}]},
    },
    "$defs": {"day": {"type": "object", "properties": {"date": {"type": "string"}, "high": {"type": "number"}}}},
}


def noisy_response(days: int) -> dict[str, Any]:
    return {
        "city": "Paris",
        "debug_trace": "x" * 400,
        "days": [{"date": f"2024-05-{d:02}", "high": 20 + d, "raw_html": "<td>" * 30} for d in range(days)],
        "source": {"name": "Meteo", "api_key_hint": "abc", "headers": {"server": "nginx"}},
    }


def test_short_responses_are_untouched() -> None:
    text = json.dumps(noisy_response(1))
    compression = compress_response(text, RETURNS)
    assert compression.text == text and not compression.compressed
    assert compression.original_tokens == compression.kept_tokens == estimate_tokens(text) <= 1024


def test_long_responses_keep_only_the_documented_keys() -> None:
    response = noisy_response(30)
    compression = compress_response(json.dumps(response), RETURNS, budget_tokens=1024)
    assert compression.original_tokens > 1024 and compression.pruned and not compression.truncated
    kept = json.loads(compression.text)
    assert kept == {
        "city": "Paris",
        "days": [{"date": f"2024-05-{d:02}", "high": 20 + d} for d in range(30)],
        "source": {"name": "Meteo"},
    }
    assert compression.kept_tokens == estimate_tokens(compression.text) <= 1024


def test_responses_still_too_long_are_cut_to_the_budget() -> None:
    response = noisy_response(400)
    compression = compress_response(response, RETURNS, budget_tokens=256)
    assert compression.pruned and compression.truncated and compression.kept_tokens == 256
    assert compression.text == json.dumps(keep_documented(response, RETURNS))[: 256 * 4]
    assert compression.metadata() == {
        "original_tokens": compression.original_tokens, "kept_tokens": 256, "pruned": True, "truncated": True
    }


def test_text_responses_and_undocumented_objects_are_only_cut() -> None:
    text = "word " * 2000
    compression = compress_response(text, {"type": "object"}, budget_tokens=100)
    assert compression.text == text[:400] and compression.truncated and not compression.pruned
    assert compression.original_tokens == 2500
    free_form = {"anything": "y" * 5000}
    assert json.loads(compress_response(free_form, {"type": "object"}, budget_tokens=2000).text) == free_form


def test_an_envelope_keeps_its_keys_and_prunes_the_wrapped_response() -> None:
    body = {"status_code": 200, "response": noisy_response(30)}
    compression = compress_response(json.dumps(body), RETURNS, within="response")
    kept = json.loads(compression.text)
    assert kept["status_code"] == 200 and kept["response"] == keep_documented(noisy_response(30), RETURNS)
    assert compression.pruned and not compression.truncated


def test_a_thought_joins_the_call_after_it_and_the_answer_after_it() -> None:
    call = ToolCall(id="c1", name="get_weather", arguments="{}")
    messages = [
        Message(role="user", content="Weather?"),
        Message(role="assistant", content="I should look it up."),
        Message(role="assistant", tool_calls=[call]),
        Message(role="tool", tool_call_id="c1", content="{}"),
        Message(role="assistant", content="That answers it."),
        Message(role="assistant", content="Sunny."),
    ]
    joined = joined_thoughts(messages)
    assert [(m.role, m.content, m.reasoning, bool(m.tool_calls)) for m in joined] == [
        ("user", "Weather?", None, False),
        ("assistant", "I should look it up.", None, True),
        ("tool", "{}", None, False),
        ("assistant", "Sunny.", "That answers it.", False),
    ]


def test_the_replies_abandoned_on_the_kept_path_are_kept_as_alternatives_at_their_state() -> None:
    def decide(path: list[str], sample: int) -> Reply:
        if not path:
            return reply(tool_call("get_weather", city=["Paris", "Rome"][sample]), content="Let me look.")
        if path == ["Paris"]:
            return give_up()
        if sample == 0:
            return reply(tool_call("Finish", return_type="give_answer"))  # no final_answer: an invalid Finish
        return reply(tool_call("Finish", return_type="give_answer", final_answer="Rome: 21 degrees."))

    result, _ = run_script(decide, max_depth=4, max_children=2)
    assert result.finish_type == "give_answer"
    # At the opening: the Paris call, below which every path gave up. After Rome's result: the
    # invalid Finish tried before the answer. The give-ups below Paris are off the kept path.
    assert [(a.at, a.kind) for a in result.alternatives] == [(2, "call"), (4, "invalid_finish")]
    paris, finish = (a.message for a in result.alternatives)
    assert [json.loads(c.arguments) for c in paris.tool_calls or []] == [{"city": "Paris"}] and paris.content == "Let me look."
    assert [c.name for c in finish.tool_calls or []] == ["Finish"]
    assert [m.role for m in result.messages[:4]] == ["system", "user", "assistant", "tool"]
    assert result.metadata()["alternatives"][1]["message"]["tool_calls"][0]["name"] == "Finish"


def test_a_reply_abandoned_after_a_thought_is_kept_joined_with_that_thought() -> None:
    async def chat(messages: list[dict[str, Any]], *, tools: list[dict[str, Any]], sample: int) -> Reply:
        if len(messages) == 2:
            return reply(content="I should check the weather.")  # a thought
        if not any(m["role"] == "tool" for m in messages):  # after the thought: a give-up first, then a call
            return give_up() if sample == 0 else reply(tool_call("get_weather", city="Lima"))
        return reply(tool_call("Finish", return_type="give_answer", final_answer="Lima: 21 degrees."))

    opening = opening_messages("Weather in Lima?", TOOLS)
    result = asyncio.run(solve(opening, FUNCTIONS, chat=chat, execute=executor, max_depth=4, max_children=2))
    assert result.finish_type == "give_answer" and [n.kind for n in result.tree] == ["thought", "give_up", "call", "give_answer"]
    # The kept path joins the thought into the Lima call: the give-up tried after the thought
    # stands at the same state (the opening), joined with the same thought.
    assert result.messages[2].content == "I should check the weather." and result.messages[2].tool_calls
    (alternative,) = result.alternatives
    assert (alternative.at, alternative.kind) == (2, "give_up")
    assert alternative.message.content == "I should check the weather."
    assert [c.name for c in alternative.message.tool_calls or []] == ["Finish"]
