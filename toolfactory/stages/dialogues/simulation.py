"""Multi-agent simulation of one task (ToolAlpaca §3.2; ToolACE §2.2 Algorithm 1).

The user agent opens with the task's instruction. The assistant acts: for toolalpaca, by default,
the paper's ReAct agent (:mod:`.react`), whose ``getDetails`` question the user agent answers
(Fig. 9) and whose Final Answer ends the user turn; otherwise native function calls (with formal
thinking and self-consistency for toolace); each call is answered by the tool
executor, the response compressed when it is long (a tool of an executable source: run for real,
its result kept verbatim, :mod:`.execution`); the assistant goes on until it answers in
text. When that text comes before any call, the user agent reads it (a structured
classification: asks for a missing value, declines, answers) and answers a question with
concrete values (once per user turn); the index of a turn that asked is kept in the record's
`generation.clarification_turns`, which is what the dialogue's mode is read from, with the
missing values the assistant's formal thinking named (`generation.missing_values`); tool
responses that are errors are counted in `generation.error_responses`. A task made
for ``insufficient_info`` (ToolACE §2.2.1: "the information is not enough to call a tool", one
of its two non-tool cases) ends at the assistant's question: asking is the turn's action. When
the task has more user turns, the user agent asks a follow-up request (a blueprint task's
follow-ups are its own requests, :mod:`toolfactory.stages.tasks.blueprints`; the assistant never
sees the blueprint's calls). `dialogues.max_steps`
bounds the assistant turns per user turn.
"""

from __future__ import annotations

import asyncio
from typing import Any

from toolfactory.models import Message, Task, ToolCall
from toolfactory.stages.base import ShardContext
from toolfactory.stages.dialogues.agents import execute, read_turn, user_details, user_follow_up
from toolfactory.stages.dialogues.execution import DialogueExecution
from toolfactory.stages.dialogues.assistant import Action, Disagreement, act
from toolfactory.stages.dialogues.react import react_step
from toolfactory.stages.dialogues.compression import compress_response
from toolfactory.stages.dialogues.early import EarlyCheck

SYSTEM_PROMPT = (
    "You are a helpful assistant that can use the functions provided. Call a function when it "
    "helps to answer the request, with argument values taken from the conversation; if a required "
    "value is missing, ask the user for it; if no function fits, say so and help as you can. When "
    "you have the results, give the user a complete final answer in plain language."
)


async def simulate(task: Task, ctx: ShardContext, live: DialogueExecution | None = None) -> tuple[list[Message], int, dict[str, Any]]:
    """The dialogue's messages, the LLM calls they took and what happened (compressions, …).
    Calls to tools of executable sources run on `live` (:mod:`.execution`).

    Raises :class:`~toolfactory.stages.dialogues.early.RejectedEarly` as soon as a turn makes
    the record one the verify stage must reject (``dialogues.reject_early``), and
    :class:`~toolfactory.stages.dialogues.assistant.Disagreement`, with the calls spent and the
    messages so far, when no two samples of a decision agree under ``on_disagreement: drop``."""
    early = EarlyCheck.for_task(task, ctx.config)
    settings = ctx.config.dialogues
    toolace = task.recipe == "toolace"
    functions = [fn for tool in task.tools for fn in tool.functions]
    by_name = {fn.name: fn for fn in functions}
    offered = [fn.openai_tool() for fn in functions]
    messages = [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=task.instruction)]
    calls, user_turns = 0, 1
    notes: dict[str, Any] = {"compressed_responses": 0, "clarifications": 0, "clarification_turns": [], "error_responses": 0,
                             "missing_values": {}, "decision_samples": 0, "decision_samples_planned": 0}
    react = task.recipe == "toolalpaca" and settings.assistant_format == "react"

    async def respond(call: ToolCall) -> tuple[str, bool, int]:
        """The tool message's content, whether it is an error, and the LLM calls it took."""
        function, tool = by_name.get(call.name), task.tool_for(call.name)
        if live is not None and tool is not None and live.runs(tool):
            result = await live.respond(tool, function, call)
            return result.content, result.is_error, 0  # verbatim: the tool's own answer, or the 400
        body, used = await execute(function, call, ctx, tool, api_errors=task.recipe in settings.api_errors)
        compressed = compress_response(body, function.returns if function else {}, within="response",
                                       budget_tokens=settings.response_budget_tokens)
        notes["compressed_responses"] += compressed.compressed
        return compressed.text, int(body.get("status_code") or 0) >= 400, used

    samples = settings.self_consistency if toolace else 1
    while True:
        called = asked = False
        for _ in range(settings.max_steps):
            if react:
                step = await react_step(messages, functions, ctx)
                calls += step.llm_calls
                messages.append(step.message)
                if step.asks is not None:
                    # getDetails: the user agent answers the question (Fig. 9), once per user turn.
                    if asked:
                        break
                    notes["clarification_turns"].append(len(messages) - 1)
                    messages.append(Message(role="user", content=await user_details(messages, ctx)))
                    calls += 1
                    asked = True
                    notes["clarifications"] += 1
                    continue
                action = Action(step.message, step.llm_calls)
            else:
                try:
                    action = await act(messages, offered, ctx, think=toolace and settings.formal_thinking, samples=samples)
                except Disagreement as failed:  # the record is lost: it still shows what it cost
                    failed.llm_calls += calls
                    failed.messages = list(messages)
                    raise
                calls += action.llm_calls
                notes["decision_samples"] += action.samples
                notes["decision_samples_planned"] += samples
                messages.append(action.message)
                for other in action.outvoted:  # a sample the majority overruled: the rejected side of a step pair
                    notes.setdefault("alternatives", []).append(
                        {"at": len(messages) - 1, "kind": "outvoted", "message": other.model_dump(exclude_none=True)})
            if react and not action.message.tool_calls:
                break
            if not action.message.tool_calls:
                if called or asked:
                    break
                kind, reply = await read_turn(messages, ctx)
                calls += 1
                if kind != "asks_for_missing_value":
                    break
                turn = len(messages) - 1
                notes["clarification_turns"].append(turn)
                notes["clarifications"] += 1
                if action.missing_values:
                    notes["missing_values"][str(turn)] = action.missing_values
                if task.mode == "insufficient_info":
                    return messages, calls, notes  # the question is the dialogue's last turn
                if not reply.strip():
                    break
                messages.append(Message(role="user", content=reply))
                asked = True
                continue
            called = True
            if live is not None:  # near-miss types coerced before anything checks or runs the calls
                action.message.tool_calls = live.well_typed(action.message.tool_calls)
            if early is not None:  # before the tool executor answers calls of a lost record
                early.raise_if_rejected(functions, messages, calls)
            # The calls of one turn (parallel calls) are answered together, recorded in order.
            answers = await asyncio.gather(*(respond(call) for call in action.message.tool_calls))
            for call, (text, failed, used) in zip(action.message.tool_calls, answers):
                calls += used
                notes["error_responses"] += failed
                messages.append(Message(role="tool", tool_call_id=call.id, name=call.name, content=text))
            if early is not None:
                early.raise_if_rejected(functions, messages, calls)
        if user_turns >= task.turns:
            return messages, calls, notes
        if task.blueprint is not None and user_turns < len(task.blueprint.turns):
            # A blueprint's follow-up was written with the task: its request, never its calls.
            messages.append(Message(role="user", content=task.blueprint.turns[user_turns].request))
        else:
            messages.append(Message(role="user", content=await user_follow_up(messages, ctx)))
            calls += 1
        user_turns += 1
