"""API filtering by a probe call before instructions are written (ToolLLM §2.1, appendix A.1).

ToolLLM kept only the RapidAPI APIs that worked: each was called once ("initial testing"), and
an API that failed, answered slowly or answered with something of no use (HTML source, an error
message) was dropped before any instruction was generated for it. Here every API of a sampled
tool set is probed once per shard before its instructions are written: the `designer` model
writes realistic arguments for it (an instance of its parameters schema), and the call goes to
the executor the dialogues use, so the probe is

* a real HTTP request for a tool whose base URL is in `dialogues.http.allowlist`: failures,
  timeouts and slow answers are the API's own;
* otherwise a call to the tool-executor LLM, and the filter judges the executor's answer (an
  error status or an empty, HTML or error-only body drops the API the same way).

Each dropped API is counted in the stage's profile under ``api_filter`` with its reason code
(``api_probe_error``, ``api_probe_timeout``, ``api_probe_unreachable``, ``api_probe_slow``,
``api_probe_empty``, ``api_probe_html``, ``api_probe_error_message``); kept APIs count as
``kept``, and the functions of executable sources (which are not probed) as ``executable``. Which recipes probe is `tasks.api_filter.recipes` (ToolLLM's by default).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import httpx

from toolfactory.errors import LLMFailure
from toolfactory.executable.session import executable_source
from toolfactory.models import Function, Tool, ToolCall, stable_id
from toolfactory.stages.base import ShardContext, StageOutput
from toolfactory.stages.dialogues.agents import execute
from toolfactory.stages.dialogues.http_executor import call_http, calls_for_real, http_client

PROBE_PROMPT = """\
You are testing whether an API works. Write the arguments of one realistic call to it, with
concrete values a typical user would send (real place names, dates, identifiers that look real).
Function: {name}
Description: {description}"""

# A body that is nothing but an error report: RapidAPI's gateway answers an unsubscribed or broken
# API with e.g. {"message": "..."} or {"error": "..."}. A body is error-only when it has an error
# key and every other key is one of these envelope keys.
_ERROR_KEYS = frozenset({"error", "errors", "err", "fault", "exception"})
_ENVELOPE_KEYS = _ERROR_KEYS | {"message", "messages", "msg", "detail", "details", "status", "code", "status_code",
                                "success", "ok", "info"}
_HTML = re.compile(r"<\s*(!doctype\s+html|html|head|body|div|script|title|table|p)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Probe:
    """The outcome of probing one API: why it is dropped (None when kept), and what it answered."""

    reason: str | None
    body: dict[str, Any]
    elapsed_s: float
    real: bool


def useless(response: Any) -> str | None:
    """Why a 2xx response body is of no use to a solution path (A.1's "low quality"), or None."""
    if response is None or response == "" or response == [] or response == {}:
        return "api_probe_empty"
    if isinstance(response, str):
        text = response.strip()
        if not text:
            return "api_probe_empty"
        if _HTML.search(text[:2000]):
            return "api_probe_html"
        return None
    if isinstance(response, dict):
        keys = {str(k).lower() for k in response}
        if keys & _ERROR_KEYS and keys <= _ENVELOPE_KEYS and any(response.get(k) for k in response if str(k).lower() in _ERROR_KEYS):
            return "api_probe_error_message"
    return None


def verdict(body: dict[str, Any], elapsed_s: float, *, real: bool, timeout_s: float, max_latency_s: float) -> str | None:
    """The reason code that drops an API after its probe answered `body`, or None to keep it.

    Latency only means something for a real call: the simulated executor's latency is the LLM's.
    """
    status = body.get("status_code")
    if status == 0:  # the HTTP executor's "no response": refused, unresolvable or timed out
        return "api_probe_timeout" if real and elapsed_s >= timeout_s else "api_probe_unreachable"
    if not isinstance(status, int) or status >= 400:
        return "api_probe_error"
    if real and elapsed_s > max_latency_s:
        return "api_probe_slow"
    return useless(body.get("response"))


class ApiFilter:
    """Probes each API once per shard (concurrent askers share one probe) and keeps the working ones."""

    def __init__(self, ctx: ShardContext, out: StageOutput) -> None:
        self.ctx, self.out = ctx, out
        self._probes: dict[tuple[str, str], asyncio.Task[Probe]] = {}
        self._client: httpx.AsyncClient | None = None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def probe(self, tool: Tool, function: Function) -> Probe:
        key = (tool.id, function.name)
        if key not in self._probes:
            self._probes[key] = asyncio.ensure_future(self._probe(tool, function))
        return await self._probes[key]

    async def _arguments(self, function: Function) -> dict[str, Any] | None:
        try:
            answer = await self.ctx.gateway.structured(
                "designer", [{"role": "user", "content": PROBE_PROMPT.format(name=function.name, description=function.description)}],
                function.parameters or {"type": "object"}, name="probe_arguments",
            )
        except LLMFailure as exc:
            if exc.transient:
                raise
            return None
        return answer if isinstance(answer, dict) else None

    async def _probe(self, tool: Tool, function: Function) -> Probe:
        ctx = self.ctx
        if executable_source(tool) is not None:
            # A tool that really runs answers for itself in every dialogue; a probe in an empty
            # environment would judge its state, not the tool.
            self.out.count("api_filter", "executable")
            return Probe(None, {}, 0.0, True)
        http = ctx.config.dialogues.http
        arguments = await self._arguments(function)
        if arguments is None:
            # No valid arguments could be written: the API is not at fault, so it is kept.
            self.out.count("api_filter", "probe_skipped")
            return Probe(None, {}, 0.0, False)
        call = ToolCall(id=stable_id("probe", tool.id, function.name)[:24], name=function.name,
                        arguments=json.dumps(arguments, ensure_ascii=False))
        real = bool(http.allowlist) and calls_for_real(tool, function, http)
        if real:
            # One client for every probe of the shard, made before the clock starts: a client's
            # set-up (its TLS context) is not the API's latency.
            self._client = self._client or http_client()
            started = time.perf_counter()
            body = await call_http(tool, function, call, http, self._client)
        else:
            started = time.perf_counter()
            body, _ = await execute(function, call, ctx, tool)
        elapsed = time.perf_counter() - started
        settings = ctx.config.tasks.api_filter
        reason = verdict(body, elapsed, real=real, timeout_s=http.timeout_s, max_latency_s=settings.max_latency_s)
        self.out.count("api_filter", reason or "kept")
        return Probe(reason, body, elapsed, real)

    async def working(self, tools: list[Tool]) -> list[Tool]:
        """`tools` with only their APIs whose probe passed; a tool left with none is left out."""
        probes = await asyncio.gather(*(self.probe(tool, fn) for tool in tools for fn in tool.functions))
        verdicts = iter(probes)
        kept: list[Tool] = []
        for tool in tools:
            functions = [fn for fn in tool.functions if next(verdicts).reason is None]
            if functions:
                kept.append(tool if len(functions) == len(tool.functions) else tool.model_copy(update={"functions": functions}))
        return kept
