"""Multi-agent simulation of one task (ToolAlpaca §3.2; ToolACE §2.2 Algorithm 1).

The user agent opens with the task's instruction. The assistant acts, in one of two shapes, each
a driver of its own: the paper's ReAct agent for toolalpaca by default
(:class:`~.react.ReactDialogue`), whose ``getDetails`` question the user agent answers (Fig. 9)
and whose Final Answer ends the user turn; otherwise native function calls
(:class:`~.native.NativeDialogue`, with formal thinking and self-consistency for toolace). What
the shapes share is here (:class:`Simulation`): each call is answered by the tool executor, the
response compressed when it is long (a tool of an executable source: run for real, its result
kept verbatim, :mod:`.execution`); the index of a turn that asked the user is kept in the
record's `generation.clarification_turns`, which is what the dialogue's mode is read from, with
the missing values the assistant's formal thinking named (`generation.missing_values`); tool
responses that are errors are counted in `generation.error_responses`. When the task has more
user turns, the user agent asks a follow-up request (a blueprint task's follow-ups are its own
requests, :mod:`toolfactory.stages.tasks.blueprints`; the assistant never sees the blueprint's
calls). `dialogues.max_steps` bounds the assistant turns per user turn.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from toolfactory.models import Message, Task, ToolCall
from toolfactory.recipes import recipe_named
from toolfactory.stages.base import ShardContext
from toolfactory.stages.dialogues.agents import execute, user_follow_up
from toolfactory.stages.dialogues.compression import compress_response
from toolfactory.stages.dialogues.drivers import DialogueResult, play
from toolfactory.stages.dialogues.early import EarlyCheck
from toolfactory.stages.dialogues.execution import DialogueExecution

SYSTEM_PROMPT = (
    "You are a helpful assistant that can use the functions provided. Call a function when it "
    "helps to answer the request, with argument values taken from the conversation; if a required "
    "value is missing, ask the user for it; if no function fits, say so and help as you can. When "
    "you have the results, give the user a complete final answer in plain language."
)


@dataclass
class SimulationNotes:
    """What happened in a simulated dialogue, as its record's ``generation`` keeps it."""

    compressed_responses: int = 0
    """Tool responses shortened to `dialogues.response_budget_tokens`."""
    clarification_turns: list[int] = field(default_factory=list)
    """Indexes of the assistant turns that asked the user for a missing value."""
    error_responses: int = 0
    """Tool responses that are errors (the pipeline's 400, the API's error, a failed real call)."""
    missing_values: dict[str, list[str]] = field(default_factory=dict)
    """Per asking turn (its index as text), the missing values the formal thinking named."""
    decision_samples: int = 0
    """Self-consistency: assistant decisions sampled (fewer than planned when agreement came early)."""
    decision_samples_planned: int = 0
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    """Samples the majority overruled, each at the index of the turn it competed for."""

    def asked(self, turn: int) -> None:
        self.clarification_turns.append(turn)

    def generation(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "compressed_responses": self.compressed_responses, "clarifications": len(self.clarification_turns),
            "clarification_turns": list(self.clarification_turns), "error_responses": self.error_responses,
            "missing_values": dict(self.missing_values), "decision_samples": self.decision_samples,
            "decision_samples_planned": self.decision_samples_planned,
        }
        if self.alternatives:
            out["alternatives"] = list(self.alternatives)
        return out


class Simulation:
    """One simulated dialogue in progress: its messages and notes, the tool turns and the user's
    follow-ups. A driver plays each user turn's assistant part (:meth:`run`'s `user_turn`)."""

    def __init__(self, task: Task, ctx: ShardContext, live: DialogueExecution | None) -> None:
        self.task, self.ctx, self.live = task, ctx, live
        self.settings = ctx.config.dialogues
        self.early = EarlyCheck.for_task(task, ctx.config)
        self.functions = [fn for tool in task.tools for fn in tool.functions]
        self.messages = [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=task.instruction)]
        self.notes = SimulationNotes()
        self._by_name = {fn.name: fn for fn in self.functions}
        self._api_errors = task.recipe in self.settings.api_errors

    async def run(self, user_turn: Callable[[Simulation], Awaitable[bool]]) -> DialogueResult:
        """The dialogue: each user turn's assistant part by `user_turn` (True: the dialogue ends
        there), then the next request, until the task's turns are done."""
        turns = 1
        while not await user_turn(self) and turns < self.task.turns:
            blueprint = self.task.blueprint
            if blueprint is not None and turns < len(blueprint.turns):
                # A blueprint's follow-up was written with the task: its request, never its calls.
                request = blueprint.turns[turns].request
            else:
                request = await user_follow_up(self.messages, self.ctx)
            self.messages.append(Message(role="user", content=request))
            turns += 1
        return DialogueResult(self.messages, self.notes)

    async def answer(self, turn: Message) -> None:
        """The tool turn after the assistant `turn` that calls: its calls answered together
        (parallel calls), recorded in order; checked before and after when rejecting early."""
        if self.live is not None:  # near-miss types coerced before anything checks or runs the calls
            turn.tool_calls = self.live.well_typed(turn.tool_calls or [])
        if self.early is not None:  # before the tool executor answers calls of a lost record
            self.early.raise_if_rejected(self.functions, self.messages)
        calls = turn.tool_calls or []
        if self.live is not None:  # the states the earlier user turns left are taken before these run
            await self.live.user_turn(sum(m.role == "user" for m in self.messages) - 1)
        answers = await asyncio.gather(*(self._respond(call) for call in calls))
        for call, (text, failed) in zip(calls, answers):
            self.notes.error_responses += failed
            self.messages.append(Message(role="tool", tool_call_id=call.id, name=call.name, content=text))
        if self.early is not None:
            self.early.raise_if_rejected(self.functions, self.messages)

    async def _respond(self, call: ToolCall) -> tuple[str, bool]:
        """The tool message's content, and whether it is an error."""
        function, tool = self._by_name.get(call.name), self.task.tool_for(call.name)
        if self.live is not None and tool is not None and self.live.runs(tool):
            result = await self.live.respond(tool, function, call)
            return result.content, result.is_error  # verbatim: the tool's own answer, or the 400
        body, _ = await execute(function, call, self.ctx, tool, api_errors=self._api_errors)
        compressed = compress_response(body, function.returns if function else {}, within="response",
                                       budget_tokens=self.settings.response_budget_tokens)
        self.notes.compressed_responses += compressed.compressed
        return compressed.text, int(body.get("status_code") or 0) >= 400


async def simulate(task: Task, ctx: ShardContext, live: DialogueExecution | None = None) -> DialogueResult:
    """`task`'s dialogue as its recipe's driver plays it, with the LLM requests it took."""
    return await play(recipe_named(task.recipe).driver(ctx), task, ctx, live)
