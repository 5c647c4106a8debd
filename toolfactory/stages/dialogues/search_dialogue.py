"""The solution-search shape: a dialogue found by searching a decision tree (ToolLLM §2.3, A.2).

:func:`~.search.solve` searches the task with ToolLLM's Finish function, by DFSDT or ReAct
(``dialogues.search``). This driver gives it the task's opening, the assistant and the tool
executor: the executor answers with a real API's page size (:mod:`.api_pages`), a long response
keeps the keys the `designer` model picked for its API (:mod:`.response_keys`, A.2, decided once
per API and shard) and is compressed (:mod:`.compression`); a tool of an executable source runs
for real and its result is kept verbatim (:mod:`.execution`). With ``dialogues.reject_early`` a
branch the verify stage would reject is given up before its calls are answered, and an answer
whose path its rules reject before the judges are asked about it. A search that ends without an
answer is lost (``search_failed``) unless ``dialogues.keep_failed_searches``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from toolfactory.models import Function, Task, ToolCall
from toolfactory.stages.base import ShardContext
from toolfactory.stages.dialogues.agents import execute
from toolfactory.stages.dialogues.api_pages import for_executor
from toolfactory.stages.dialogues.compression import compress_response, estimate_tokens
from toolfactory.stages.dialogues.drivers import DialogueResult, Lost
from toolfactory.stages.dialogues.early import EarlyCheck
from toolfactory.stages.dialogues.execution import DialogueExecution
from toolfactory.stages.dialogues.record import dialogue_record
from toolfactory.stages.dialogues.response_keys import important_keys, restrict
from toolfactory.stages.dialogues.search import opening_messages, solve

SEARCH_FAILED = "search_failed"


@dataclass
class SearchNotes:
    """What a search left in its record's ``generation``."""

    search: dict[str, Any]
    """The search's summary (:meth:`~.search.SearchResult.metadata` without the tree)."""
    compressed_responses: int = 0
    response_keys: dict[str, list[str] | None] = field(default_factory=dict)
    """A.2's choice for each API whose responses were long: the keys kept (None: all)."""

    def generation(self) -> dict[str, Any]:
        out: dict[str, Any] = {"search": self.search, "compressed_responses": self.compressed_responses}
        if self.response_keys:
            out["response_keys"] = dict(self.response_keys)
        return out


class SearchDialogue:
    """ToolLLM's search, for one shard's tasks."""

    def __init__(self, ctx: ShardContext) -> None:
        # A.2 decides once per API which keys its long responses keep: shared by the shard's
        # tasks, and asked through the shard's gateway (a decision of the shard, not of a dialogue).
        self._strategies: dict[str, asyncio.Future[list[str] | None]] = {}
        self._designer = ctx.gateway

    async def play(self, task: Task, ctx: ShardContext, live: DialogueExecution | None) -> DialogueResult:
        settings = ctx.config.dialogues
        notes = SearchNotes(search={})

        async def chat(messages: list[dict[str, Any]], *, tools: list[dict[str, Any]], sample: int) -> dict[str, Any]:
            return await ctx.gateway.chat("assistant", messages, tools=tools, tool_choice="auto", sample=sample)

        async def run_call(function: Function, call: ToolCall) -> str:
            tool = task.tool_for(function.name)
            if live is not None and tool is not None and live.runs(tool):
                return (await live.respond(tool, function, call)).content  # verbatim, never compressed
            body, _ = await execute(for_executor(function, settings.response_items), call, ctx, tool)
            returns = function.returns
            if estimate_tokens(json.dumps(body, ensure_ascii=False)) > settings.response_budget_tokens:
                returns = await self._kept_schema(task, function, ctx, notes)  # asked only for APIs whose responses need it
            result = compress_response(body, returns, within="response", budget_tokens=settings.response_budget_tokens)
            notes.compressed_responses += result.compressed
            return result.text

        functions = [fn for tool in task.tools for fn in tool.functions]
        early = EarlyCheck.for_task(task, ctx.config)
        result = await solve(
            opening_messages(task.instruction, task.tools), functions, chat=chat, execute=run_call,
            method=settings.search, max_depth=settings.search_max_depth, max_children=settings.search_max_children,
            max_calls=settings.search_max_calls,
            # A branch the verify stage would reject is given up before its calls are answered,
            # and an answer whose path its rules reject before the judges are asked about it.
            rejects=None if early is None else (lambda messages: bool(early.findings(functions, messages))),
            rejects_answer=None if early is None else (lambda messages: bool(early.finished(dialogue_record(task, messages)))),
            well_typed=None if live is None else live.well_typed,
        )
        notes.search = {key: value for key, value in result.metadata().items() if key != "tree"}
        lost = None
        if result.finish_type != "give_answer" and not settings.keep_failed_searches:
            lost = Lost(SEARCH_FAILED, f"{result.method} ended with {result.finish_type} ({result.limit or 'no limit hit'}) "
                                       f"after {result.tree_size} nodes and {result.llm_calls} calls")
        return DialogueResult(result.messages, notes, lost=lost)

    async def _kept_schema(self, task: Task, function: Function, ctx: ShardContext, notes: SearchNotes) -> dict[str, Any]:
        if ctx.config.dialogues.compression_keys != "llm":
            return function.returns
        tool = task.tool_for(function.name)
        key = f"{tool.id if tool else ''}/{function.name}"
        if key not in self._strategies:
            self._strategies[key] = asyncio.ensure_future(important_keys(function, tool, self._designer))
        keys = notes.response_keys[function.name] = await self._strategies[key]
        return restrict(function.returns, keys) if keys else function.returns
