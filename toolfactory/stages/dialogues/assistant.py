"""The assistant agent's decisions: native function calling, formal thinking, self-consistency.

* Formal thinking (ToolACE §2.2.2): before an action the assistant assesses the request, the
  tools it needs and whether every required value is known. The thinking is asked for as a
  structured answer, passed to the action as context, and kept in the message's `reasoning`;
  exports leave it out.
* Self-consistency (§2.2.2, Algorithm 1 lines 6–11): the decision is sampled up to N times, each
  sample with its own formal thinking (distinct `sample` indexes), so the samples are
  independent decisions as in the paper. It is kept when at least two samples make the same
  decision (whether to call, which functions, which argument values), choosing the majority;
  otherwise the turn is dropped or masked, as configured. Values are compared as a user reads
  them (:mod:`.decisions`). Sampling stops as soon as the outcome is decided: with N=3, two
  agreeing samples are a majority the third cannot change, so the third is never asked.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from toolfactory.errors import LLMFailure
from toolfactory.models import Message, ToolCall
from toolfactory.stages.base import ShardContext
from toolfactory.stages.dialogues.decisions import Tally, decision_key

THINKING_PROMPT = """\
Before you act, think formally about the conversation below, for an assistant that can call the
functions listed. 1) Assess the user's latest request. 2) Assess which functions, if any, are
needed. 3) Check that every required parameter of those functions is known from the conversation,
and list the missing ones.
Functions: {functions}
Conversation:
{history}"""


def thinking_schema(names: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "request": {"type": "string", "minLength": 3},
            "functions_needed": {"type": "array", "items": {"enum": names}, "uniqueItems": True},
            "missing_values": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["request", "functions_needed", "missing_values"],
    }


class Disagreement(LLMFailure):
    """No two samples of an assistant decision agreed (self-consistency).

    `llm_calls` is what the dialogue spent up to and including the samples, and `messages` the
    dialogue so far, so the rejected record shows what it cost (both set by the driver's
    :func:`~.drivers.play`)."""

    def __init__(self, samples: int, llm_calls: int = 0) -> None:
        super().__init__("dialogue_inconsistent_decision", f"no two of {samples} samples of an assistant turn agreed", transient=False)
        self.llm_calls = llm_calls
        self.messages: list[Message] = []


@dataclass
class Action:
    message: Message
    missing_values: list[str] = field(default_factory=list)  # what the chosen sample's thinking found missing
    samples: int = 1  # decisions sampled (fewer than asked when agreement came early)
    outvoted: list[Message] = field(default_factory=list)  # samples the majority overruled: rejected alternatives


def _calls(reply: dict[str, Any]) -> list[ToolCall]:
    return [
        ToolCall(id=c.get("id") or f"call_{i}", name=c["function"]["name"], arguments=c["function"].get("arguments") or "")
        for i, c in enumerate(reply.get("tool_calls") or [])
    ]


def wire(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages in OpenAI's chat format (reasoning is never sent)."""
    out = []
    for message in messages:
        item: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.tool_calls:
            item["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in message.tool_calls
            ]
        if message.tool_call_id:
            item["tool_call_id"] = message.tool_call_id
        out.append(item)
    return out


@dataclass
class _Sample:
    reply: dict[str, Any]
    reasoning: str | None
    missing_values: list[str]


async def _think(messages: list[Message], offered: list[dict[str, Any]], ctx: ShardContext, sample: int) -> dict[str, Any]:
    from toolfactory.stages.dialogues.agents import history_text

    names = [tool["function"]["name"] for tool in offered]
    return dict(await ctx.gateway.structured(
        "assistant",
        [{"role": "user", "content": THINKING_PROMPT.format(functions=", ".join(names), history=history_text(messages))}],
        thinking_schema(names), name="formal_thinking", sample=sample,
    ))


async def _sample(messages: list[Message], offered: list[dict[str, Any]], ctx: ShardContext, *, think: bool, k: int) -> _Sample:
    """One independent decision: its own formal thinking (when on), then the action."""
    context, reasoning, missing = wire(messages), None, []
    if think:
        thought = await _think(messages, offered, ctx, k)
        missing = [str(v) for v in thought["missing_values"]]
        reasoning = (f"Request: {thought['request']} Functions needed: {', '.join(thought['functions_needed']) or 'none'}. "
                     f"Missing values: {', '.join(missing) or 'none'}.")
        # The analysis joins the system prompt, so the conversation still ends where it did
        # (after the user's words or the tool results the assistant must act on).
        system = context[0] if context and context[0]["role"] == "system" else {"role": "system", "content": ""}
        noted = {**system, "content": f"{system['content']}\n\nYour analysis of the current state: {reasoning}".strip()}
        context = [noted, *(context[1:] if context and context[0]["role"] == "system" else context)]
    reply = await ctx.gateway.chat("assistant", context, tools=offered, tool_choice="auto", sample=k)
    return _Sample(reply, reasoning, missing)


async def act(messages: list[Message], offered: list[dict[str, Any]], ctx: ShardContext, *, think: bool, samples: int) -> Action:
    """The assistant's next message, after thinking and self-consistency when asked for."""
    settings = ctx.config.dialogues
    early = settings.self_consistency_early_stop
    tally = Tally(samples)
    drawn: list[_Sample] = []
    # Two samples are the fewest that can agree, so they are sent together; then one at a
    # time until the outcome is decided (or all at once when stopping early is off).
    while not tally.complete and not (early and tally.decided):
        batch = (min(2, samples) if not drawn else 1) if early else samples
        got = await asyncio.gather(*(_sample(messages, offered, ctx, think=think, k=len(drawn) + j) for j in range(batch)))
        for item in got:
            drawn.append(item)
            tally.add(decision_key(_calls(item.reply)))
    chosen, masked = 0, None
    if samples > 1:
        winner = tally.winner()
        if winner is not None:
            chosen = winner
        elif settings.on_disagreement == "mask":
            masked = True
        else:
            raise Disagreement(samples)
    pick = drawn[chosen]
    outvoted = [Message(role="assistant", content=item.reply.get("content") or None, tool_calls=_calls(item.reply) or None)
                for item, key in zip(drawn, tally.keys) if masked is None and key != tally.keys[chosen]]
    tool_calls = _calls(pick.reply)
    # The model's own reasoning is there only with llm.keep_reasoning; it follows the formal
    # thinking, and like it stays out of the turn's text.
    reasoning = "\n".join(part for part in (pick.reasoning, pick.reply.get("reasoning")) if part) or None
    message = Message(role="assistant", content=pick.reply.get("content") or None, reasoning=reasoning,
                      tool_calls=tool_calls or None, masked=masked)
    return Action(message, pick.missing_values, len(drawn), outvoted)
