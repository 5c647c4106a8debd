"""One small request per capability, sent through the gateway like any other request.

Going through the gateway means a probe is sent exactly as the run's requests are (the role's
parameters under their names, its structured-output and tool-calling modes), is retried on
transient errors, and is cached: a second check, or the re-run of a run, costs nothing. A cached
answer says what a model served, not that it serves now: the first request of the check for a
model the endpoint did not list just now goes to the endpoint, not the cache.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Awaitable, Callable, Iterable

from toolfactory.config import LLMConfig
from toolfactory.errors import ConfigError, LLMFailure, TerminalError
from toolfactory.llm import Endpoint, LLMGateway, RequestCache, UsageMeter
from toolfactory.llm.parameters import role_parameters
from toolfactory.llm.text_tools import parse_text_calls
from toolfactory.models import canonical_json
from toolfactory.render import CallFormatError

PROBE_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather forecast of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
MIN_RETRIES = 3
CHAT = [{"role": "user", "content": "Reply with one short sentence: is the weather in Lyon usually mild?"}]
STRUCTURED = [{"role": "user", "content": "Give the weather forecast request for Lyon for 2 days as JSON."}]
TOOL_CALL = [{"role": "user", "content": "What is the weather forecast in Lyon? Use the get_weather function."}]


@dataclass(frozen=True)
class Probe:
    """The outcome of one capability check."""

    role: str  # a role, or "embedding"
    model: str
    capability: str  # chat | structured output | tool calling | embeddings
    mode: str  # the mode tried (chat: the parameters changed from the role's config, "" for none)
    status: str  # ok | unsupported | unreachable
    latency_s: float
    cached: bool
    detail: str  # the endpoint's own message when unsupported; what came back when ok
    parameter: str = ""  # the request field the endpoint named in refusing (max_tokens, temperature, …)
    same_as: str = ""  # the role whose identical request this probe's result is (same model and parameters)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Prober:
    """Sends probes for one endpoint, each with the config of the mode it tries."""

    def __init__(self, endpoint: Endpoint, cache: Callable[[], RequestCache | None], listed: Iterable[str] = ()) -> None:
        self._endpoint = endpoint
        self._cache = cache
        self.meter = UsageMeter()
        self._chats: dict[str, Probe] = {}  # chat probes by request: roles that send the same one share it
        # Models the endpoint answered for in this check (`listed`: in its model list just now).
        self._answering = set(listed)

    async def _send(self, llm: LLMConfig, role: str, capability: str, mode: str, model: str,
                    work: Callable[[LLMGateway], Awaitable[str]]) -> Probe:
        # A moment of 429s or 5xx says nothing about what the endpoint serves: probes retry them
        # even when the run's requests do not (the run's own shard retries take over there).
        llm = llm.model_copy(update={"max_retries": max(llm.max_retries, MIN_RETRIES)})
        local = capability == "embeddings" and mode == "local"
        fresh = not local and model not in self._answering
        async with LLMGateway(self._endpoint, llm, None if fresh else self._cache(), self.meter) as gateway:
            hits = gateway.meter.role(role).cache_hits
            started = time.perf_counter()
            parameter = ""
            try:
                detail, status = await work(gateway), "ok"
            except LLMFailure as exc:
                detail = exc.detail or str(exc)
                status = "unreachable" if exc.transient else "unsupported"
                parameter = exc.parameter or ""
            except (TerminalError, ConfigError) as exc:
                detail, status = str(exc), "unsupported"
            latency = time.perf_counter() - started
            cached = gateway.meter.role(role).cache_hits > hits
        if status != "unreachable":
            self._answering.add(model)
        return Probe(role, model, capability, mode, status, round(latency, 3), cached, _one_line(detail), parameter)

    async def chat(self, llm: LLMConfig, role: str, mode: str = "") -> Probe:
        """A plain chat request with `role`'s parameters; `mode` says how they differ from the
        role's config. A role whose request is one another role sent already (same model and
        parameters) gets that probe's result, not a second request."""
        params = llm.role(role)
        request = canonical_json({"model": params.model, **role_parameters(params)})
        if (earlier := self._chats.get(request)) is not None:
            return replace(earlier, role=role, mode=mode, latency_s=0.0, same_as=earlier.same_as or earlier.role)

        async def work(gateway: LLMGateway) -> str:
            message = await gateway.chat(role, CHAT)
            return f"answered {len(message.get('content') or '')} characters"

        probe = await self._send(llm, role, "chat", mode, params.model, work)
        if probe.status != "unreachable":  # a moment's outage says nothing about the request
            self._chats[request] = probe
        return probe

    async def structured(self, llm: LLMConfig, role: str, mode: str) -> Probe:
        llm = with_role_mode(llm, role, "structured_output", mode)

        async def work(gateway: LLMGateway) -> str:
            value = await gateway.structured(role, STRUCTURED, PROBE_SCHEMA, name="preflight")
            return f"JSON with {', '.join(sorted(value))}"

        return await self._send(llm, role, "structured output", mode, llm.role(role).model, work)

    async def tool_call(self, llm: LLMConfig, role: str, mode: str) -> Probe:
        llm = with_role_mode(llm, role, "tool_calling", mode)

        async def work(gateway: LLMGateway) -> str:
            # `auto`, as the run sends it: what a vLLM without a tool parser refuses.
            message = await gateway.chat(role, TOOL_CALL, tools=[WEATHER_TOOL], tool_choice="auto")
            calls = [c["function"]["name"] for c in message.get("tool_calls") or []]
            if calls:
                return "called " + ", ".join(calls)
            if mode == "native" and _calls_in_text(message.get("content") or ""):
                # A server without a tool parser hands the model's calls back as text.
                raise ConfigError("the model wrote its call as text in the content: the server parses no tool calls")
            return "answered without a call"

        return await self._send(llm, role, "tool calling", mode, llm.role(role).model, work)

    async def embeddings(self, llm: LLMConfig) -> Probe:
        source = llm.embedding_source()
        model = llm.local_embedding_model if source == "local" else llm.embedding_model
        llm = llm.model_copy(update={"embedding_backend": source})

        async def work(gateway: LLMGateway) -> str:
            [vector] = await gateway.embed(["weather forecast"], model=llm.embedding_model)
            return f"{len(vector)} dimensions"

        return await self._send(llm, "embedding", "embeddings", source, model, work)


def with_role_mode(llm: LLMConfig, role: str, field: str, mode: Any) -> LLMConfig:
    """`llm` with `role`'s `field` (tool_calling, structured_output, max_tokens_parameter,
    temperature, …) set to `mode`."""
    roles = dict(llm.roles)
    roles[role] = llm.role(role).model_copy(update={field: mode})  # type: ignore[index]
    return llm.model_copy(update={"roles": roles})


def _calls_in_text(content: str) -> bool:
    try:
        return bool(parse_text_calls(content, "json", "preflight")[1])
    except CallFormatError:
        return False


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
