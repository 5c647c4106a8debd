"""The dialogues stage: one dialogue per task, played by its recipe's driver.

A recipe (:mod:`toolfactory.recipes`) names the driver of its dialogues, one per shape
(:mod:`.drivers`):

* multi-agent simulation (:mod:`.simulation`): user agent, assistant, tool executor; the
  assistant as ToolAlpaca's ReAct agent (:mod:`.react`) or with native function calling
  (:mod:`.native`; toolace: formal thinking and self-consistency);
* solution search (:mod:`.search_dialogue`, toolllm): ReAct or DFSDT over assistant actions with
  ToolLLM's Finish function; a search that ends without an answer is rejected
  (`search_failed`) unless `dialogues.keep_failed_searches`.

Every dialogue records the mode its messages show, and its task's target mode when the task had
one (toolace); the verify stage rejects a dialogue whose shown mode is not its target. Long tool
responses reach the assistant compressed (:mod:`.compression`). Calls to tools of executable
sources run for real, in sessions of their own per dialogue (:mod:`.execution`); a failure of the
environment rejects the dialogue with its reason code (``exec_timeout``, ``exec_server_crashed``, …).
A task from a blueprint passes its target state on in ``generation["execution"]["target_state"]``.
A record's ``llm_calls`` are its agents' requests, counted by :func:`.drivers.play`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from toolfactory.executable.counts import count_executed
from toolfactory.executable.session import ExecutionFailed
from toolfactory.models import Dialogue, Record, Rejected, Task, stable_id
from toolfactory.recipes import recipe_named
from toolfactory.stages.base import CALLS_BY_RECIPE, ONE_TO_ONE, Inputs, Planning, ShardContext, ShardSpec, StageOutput, one_to_one, upstream_of
from toolfactory.stages.dialogues.assistant import Disagreement
from toolfactory.stages.dialogues.drivers import Driver, play
from toolfactory.stages.dialogues.early import RejectedEarly
from toolfactory.stages.dialogues.execution import EXECUTION, DialogueExecution
from toolfactory.stages.dialogues.record import dialogue_record
from toolfactory.stages.records import map_records


class DialoguesStage:
    name: ClassVar[str] = "dialogues"
    inputs: ClassVar[Inputs] = Inputs("tasks", ONE_TO_ONE)

    def plan(self, planning: Planning) -> list[ShardSpec]:
        return one_to_one(self.name, planning, upstream_of(self.inputs))

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        tasks = [Task.model_validate(data) for data in inputs]
        drivers: dict[str, Driver] = {}  # each recipe's driver, made once per shard (it may share decisions)

        def driver_for(task: Task) -> Driver:
            if task.recipe not in drivers:
                drivers[task.recipe] = recipe_named(task.recipe).driver(ctx)
            return drivers[task.recipe]

        out = await map_records(self.name, tasks, lambda t: self._dialogue(t, driver_for(t), ctx), lambda t: (t.id, t.model_dump()))
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

    async def _dialogue(self, task: Task, driver: Driver, ctx: ShardContext) -> list[Record]:
        rejected_id = stable_id("dialogue", task.id)
        try:
            # Every executable source gets a fresh session for this dialogue, closed when it ends.
            async with DialogueExecution(task, ctx.config.tools) as live:
                try:
                    result = await play(driver, task, ctx, live)
                except RejectedEarly as early:
                    detail = "; ".join(f"{v.code} at {v.path}: {v.message}" for v in early.verdicts)
                    return [Rejected(id=rejected_id, stage=self.name,
                                     reasons=sorted({v.code for v in early.verdicts}), detail=f"rejected early: {detail}",
                                     record={"task": task.model_dump(), "messages": [m.model_dump() for m in early.messages],
                                             "llm_calls": early.llm_calls})]
                except Disagreement as failed:
                    return [Rejected(id=rejected_id, stage=self.name, reasons=[failed.reason], detail=str(failed),
                                     record={"task": task.model_dump(), "messages": [m.model_dump() for m in failed.messages],
                                             "llm_calls": failed.llm_calls})]
                if result.lost is not None:
                    return [Rejected(id=rejected_id, stage=self.name, reasons=[result.lost.reason], detail=result.lost.detail,
                                     record={"task": task.model_dump(), "generation": result.generation,
                                             "llm_calls": result.llm_calls})]
                executed = await live.metadata(result.messages)
        except ExecutionFailed as failed:
            # The environment failed (hung, crashed, flooded, forked): this dialogue only.
            return [Rejected(id=rejected_id, stage=self.name, reasons=[failed.reason], detail=failed.message,
                             record={"task": task.model_dump(), "execution": {"calls": live.calls}})]
        generation = result.generation
        if task.blueprint is not None:
            # The verifier's replay accepts the dialogue only if its calls reach the blueprint's state.
            executed = {"calls": [], "states": {}, **(executed or {}), "target_state": task.blueprint.target_state}
        if executed is not None:
            generation[EXECUTION] = executed
        dialogue = dialogue_record(task, result.messages, generation)
        dialogue.models = {role: ctx.gateway.model_for(role) for role in ("user", "assistant", "tool")}
        dialogue.llm_calls = result.llm_calls  # this stage's requests for this record (all agents)
        return [dialogue]
