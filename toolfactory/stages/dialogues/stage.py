"""The dialogues stage: one dialogue per task, made by the task's recipe.

* toolalpaca and toolace: multi-agent simulation (:mod:`.simulation`): user agent, assistant
  with native function calling (toolace: formal thinking and self-consistency), tool executor;
* toolllm: solution search (:mod:`.search`): ReAct or DFSDT over assistant actions with
  ToolLLM's Finish function; a search that ends without an answer is rejected
  (`search_failed`) unless `dialogues.keep_failed_searches`.

Every dialogue records the mode its messages show, and its task's target mode when the task had
one (toolace); the verify stage rejects a dialogue whose shown mode is not its target. Long tool
responses reach the assistant compressed (:mod:`.compression`); for toolllm the executor answers
with a real API's page size (:mod:`.api_pages`) and a long response keeps the keys the `designer`
model picked for its API (:mod:`.response_keys`, ToolLLM A.2). Calls to tools of executable
sources run for real, in sessions of their own per dialogue (:mod:`.execution`); a failure of the
environment rejects the dialogue with its reason code (``exec_timeout``, ``exec_server_crashed``, …).
A task from a blueprint passes its target state on in ``generation["execution"]["target_state"]``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar

from toolfactory.executable.counts import count_executed
from toolfactory.executable.session import ExecutionFailed
from toolfactory.models import Dialogue, Function, Message, Record, Rejected, Task, ToolCall, ToolRef, stable_id
from toolfactory.stages.base import CALLS_BY_RECIPE, Planning, ShardContext, ShardSpec, StageOutput, one_to_one
from toolfactory.stages.dialogues.agents import execute
from toolfactory.stages.dialogues.api_pages import for_executor
from toolfactory.stages.dialogues.assistant import Disagreement
from toolfactory.stages.dialogues.compression import compress_response, estimate_tokens
from toolfactory.stages.dialogues.early import EarlyCheck, RejectedEarly
from toolfactory.stages.dialogues.execution import EXECUTION, DialogueExecution
from toolfactory.stages.dialogues.modes import shown_mode
from toolfactory.stages.dialogues.response_keys import important_keys, restrict
from toolfactory.stages.dialogues.search import opening_messages, solve
from toolfactory.stages.dialogues.simulation import simulate
from toolfactory.stages.records import map_records


class DialoguesStage:
    name: ClassVar[str] = "dialogues"

    def plan(self, planning: Planning) -> list[ShardSpec]:
        return one_to_one(self.name, planning, "tasks")

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        tasks = [Task.model_validate(data) for data in inputs]
        # A.2 decides once per API which keys its long responses keep: shared by the shard's tasks.
        strategies: dict[str, asyncio.Future[list[str] | None]] = {}
        out = await map_records(self.name, tasks, lambda t: self._dialogue(t, ctx, strategies), lambda t: (t.id, t.model_dump()))
        for record in out.records:
            assert isinstance(record, Dialogue)
            out.count("recipes", record.recipe)
            out.count("modes", record.mode)
            if record.target_mode is not None:
                out.count("target_modes", record.target_mode)
            out.count("user_turns", str(sum(m.role == "user" for m in record.messages)))
            if record.generation.get("decision_samples_planned"):  # self-consistency: samples drawn of those planned
                out.count("decision_samples", "drawn", record.generation["decision_samples"])
                out.count("decision_samples", "planned", record.generation["decision_samples_planned"])
            if record.generation.get("compressed_responses"):
                out.count("compressed_responses", record.recipe, record.generation["compressed_responses"])
            if record.generation.get("error_responses"):
                out.count("error_responses", record.recipe, record.generation["error_responses"])
            out.count(CALLS_BY_RECIPE, record.recipe, record.llm_calls)
            executed = record.generation.get(EXECUTION) or {}
            if executed.get("calls"):  # dialogues whose calls ran on executable sources
                out.count("executed_dialogues", record.recipe)
                out.count("executed_calls", record.recipe, len(executed["calls"]))
                count_executed(out, record.generation, sessions=True)
            if "target_state" in executed:
                out.count("blueprint_dialogues", record.recipe)
        for rejected in out.rejected:  # a search without an answer, a dialogue stopped early: spent too
            task = rejected.record.get("task") or {}
            if rejected.record.get("llm_calls"):
                out.count(CALLS_BY_RECIPE, str(task.get("recipe")), int(rejected.record["llm_calls"]))
            # A dialogue its environment failed (exec_timeout, exec_crashed, …) ran its calls up to
            # the failure: they count with the sources they ran on, as a kept dialogue's do.
            count_executed(out, rejected.record)
        return out

    async def _dialogue(self, task: Task, ctx: ShardContext, strategies: dict[str, asyncio.Future[list[str] | None]]) -> list[Record]:
        try:
            # Every executable source gets a fresh session for this dialogue, closed when it ends.
            async with DialogueExecution(task, ctx.config.tools) as live:
                if task.recipe == "toolllm":
                    found = await self._search(task, ctx, strategies, live)
                    if isinstance(found, Rejected):
                        return [found]
                    messages, calls, generation = found
                else:
                    try:
                        messages, calls, generation = await simulate(task, ctx, live)
                    except RejectedEarly as early:
                        detail = "; ".join(f"{v.code} at {v.path}: {v.message}" for v in early.verdicts)
                        return [Rejected(id=stable_id("dialogue", task.id), stage=self.name,
                                         reasons=sorted({v.code for v in early.verdicts}), detail=f"rejected early: {detail}",
                                         record={"task": task.model_dump(), "messages": [m.model_dump() for m in early.messages],
                                                 "llm_calls": early.llm_calls})]
                    except Disagreement as failed:
                        return [Rejected(id=stable_id("dialogue", task.id), stage=self.name, reasons=[failed.reason],
                                         detail=str(failed),
                                         record={"task": task.model_dump(), "messages": [m.model_dump() for m in failed.messages],
                                                 "llm_calls": failed.llm_calls})]
                executed = await live.metadata()
        except ExecutionFailed as failed:
            # The environment failed (hung, crashed, flooded, forked): this dialogue only.
            return [Rejected(id=stable_id("dialogue", task.id), stage=self.name, reasons=[failed.reason], detail=failed.message,
                             record={"task": task.model_dump(), "execution": {"calls": live.calls}})]
        if task.blueprint is not None:
            # The verifier's replay accepts the dialogue only if its calls reach the blueprint's state.
            executed = {"calls": [], "states": {}, **(executed or {}), "target_state": task.blueprint.target_state}
        if executed is not None:
            generation[EXECUTION] = executed
        dialogue = self._record(task, messages, generation)
        dialogue.models = {role: ctx.gateway.model_for(role) for role in ("user", "assistant", "tool")}
        dialogue.llm_calls = calls  # this stage's requests for this record (all agents)
        return [dialogue]

    @staticmethod
    def _record(task: Task, messages: list[Message], generation: dict[str, Any] | None = None) -> Dialogue:
        """The record of `task`'s dialogue with `messages`, as the verify stage reads it (its
        shown mode depends on `generation`'s clarification turns)."""
        dialogue = Dialogue(
            id=stable_id("dialogue", task.id),
            task_id=task.id,
            tools=[fn for tool in task.tools for fn in tool.functions],
            messages=messages,
            recipe=task.recipe,
            scenario=task.scenario,
            target_mode=task.mode,
            source_tools=[ToolRef(id=t.id, name=t.name, category=t.category, source=t.source) for t in task.tools],
            generation=generation or {},
        )
        dialogue.mode = shown_mode(dialogue)
        return dialogue

    async def _search(self, task: Task, ctx: ShardContext, strategies: dict[str, asyncio.Future[list[str] | None]],
                      live: DialogueExecution) -> tuple[list[Message], int, dict[str, Any]] | Rejected:
        settings = ctx.config.dialogues
        compressed = 0
        kept_keys: dict[str, list[str] | None] = {}

        async def chat(messages: list[dict[str, Any]], *, tools: list[dict[str, Any]], sample: int) -> dict[str, Any]:
            return await ctx.gateway.chat("assistant", messages, tools=tools, tool_choice="auto", sample=sample)

        async def kept_schema(function: Function) -> dict[str, Any]:
            if settings.compression_keys != "llm":
                return function.returns
            tool = task.tool_for(function.name)
            key = f"{tool.id if tool else ''}/{function.name}"
            if key not in strategies:
                strategies[key] = asyncio.ensure_future(important_keys(function, tool, ctx.gateway))
            keys = kept_keys[function.name] = await strategies[key]
            return restrict(function.returns, keys) if keys else function.returns

        async def run_call(function: Function, call: ToolCall) -> str:
            nonlocal compressed
            tool = task.tool_for(function.name)
            if tool is not None and live.runs(tool):
                return (await live.respond(tool, function, call)).content  # verbatim, never compressed
            body, _ = await execute(for_executor(function, settings.response_items), call, ctx, tool)
            returns = function.returns
            if estimate_tokens(json.dumps(body, ensure_ascii=False)) > settings.response_budget_tokens:
                returns = await kept_schema(function)  # asked only for APIs whose responses need it
            result = compress_response(body, returns, within="response", budget_tokens=settings.response_budget_tokens)
            compressed += result.compressed
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
            rejects_answer=None if early is None else (lambda messages: bool(early.finished(self._record(task, messages)))),
            well_typed=live.well_typed,
        )
        summary = {key: value for key, value in result.metadata().items() if key != "tree"}
        generation: dict[str, Any] = {"search": summary, "compressed_responses": compressed}
        if kept_keys:
            generation["response_keys"] = kept_keys  # A.2's choice for each API whose responses were long
        if result.finish_type != "give_answer" and not settings.keep_failed_searches:
            return Rejected(id=stable_id("dialogue", task.id), stage=self.name, reasons=["search_failed"],
                            detail=f"{result.method} ended with {result.finish_type} ({result.limit or 'no limit hit'}) "
                                   f"after {result.tree_size} nodes and {result.llm_calls} calls",
                            record={"task": task.model_dump(), "generation": generation, "llm_calls": result.llm_calls})
        return result.messages, result.llm_calls, generation
