"""The assistant agent's decisions: native function calling, formal thinking, self-consistency.

* Formal thinking (ToolACE §2.2.2): before an action the assistant assesses the request, the
  tools it needs and whether every required value is known. The thinking is asked for as a
  structured answer, passed to the action as context, and kept in the message's `reasoning`;
  exports leave it out.
* Self-consistency: the action is sampled N times (distinct `sample` indexes). It is kept when
  at least two samples make the same decision (whether to call, which functions, which argument
  values), choosing the majority; otherwise the turn is dropped or masked, as configured.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from toolfactory.errors import LLMFailure
from toolfactory.models import Message, ToolCall
from toolfactory.stages.base import ShardContext

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
    """No two samples of an assistant decision agreed (self-consistency)."""

    def __init__(self, samples: int) -> None:
        super().__init__("dialogue_inconsistent_decision", f"no two of {samples} samples of an assistant turn agreed", transient=False)


@dataclass
class Action:
    message: Message
    llm_calls: int


def _calls(reply: dict[str, Any]) -> list[ToolCall]:
    return [
        ToolCall(id=c.get("id") or f"call_{i}", name=c["function"]["name"], arguments=c["function"].get("arguments") or "")
        for i, c in enumerate(reply.get("tool_calls") or [])
    ]


def decision_key(calls: list[ToolCall]) -> str:
    """What must agree between samples: the calls' names and argument values (order-free)."""
    def value(text: str) -> Any:
        try:
            return json.loads(text or "{}")
        except json.JSONDecodeError:
            return text
    return json.dumps(sorted(json.dumps([c.name, value(c.arguments)], sort_keys=True) for c in calls))


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


async def act(messages: list[Message], offered: list[dict[str, Any]], ctx: ShardContext, *, think: bool, samples: int) -> Action:
    """The assistant's next message, after thinking and self-consistency when asked for."""
    from toolfactory.stages.dialogues.agents import history_text

    settings = ctx.config.dialogues
    calls = 0
    reasoning = None
    context = wire(messages)
    if think:
        names = [tool["function"]["name"] for tool in offered]
        thought = await ctx.gateway.structured(
            "assistant",
            [{"role": "user", "content": THINKING_PROMPT.format(functions=", ".join(names), history=history_text(messages))}],
            thinking_schema(names), name="formal_thinking",
        )
        calls += 1
        reasoning = (f"Request: {thought['request']} Functions needed: {', '.join(thought['functions_needed']) or 'none'}. "
                     f"Missing values: {', '.join(thought['missing_values']) or 'none'}.")
        # The analysis joins the system prompt, so the conversation still ends where it did
        # (after the user's words or the tool results the assistant must act on).
        system = context[0] if context and context[0]["role"] == "system" else {"role": "system", "content": ""}
        noted = {**system, "content": f"{system['content']}\n\nYour analysis of the current state: {reasoning}".strip()}
        context = [noted, *(context[1:] if context and context[0]["role"] == "system" else context)]
    # The first sample is the plain request; later ones differ by their sample index. They are
    # independent, so they are sent together.
    replies = await asyncio.gather(*(
        ctx.gateway.chat("assistant", context, tools=offered, tool_choice="auto", sample=k) for k in range(samples)
    ))
    calls += samples
    keys = [decision_key(_calls(r)) for r in replies]
    chosen, masked = 0, None
    if samples > 1:
        key, votes = Counter(keys).most_common(1)[0]
        if votes >= 2:
            chosen = keys.index(key)
        elif settings.on_disagreement == "mask":
            masked = True
        else:
            raise Disagreement(samples)
    reply = replies[chosen]
    tool_calls = _calls(reply)
    # The model's own reasoning is there only with llm.keep_reasoning; it follows the formal
    # thinking, and like it stays out of the turn's text.
    reasoning = "\n".join(part for part in (reasoning, reply.get("reasoning")) if part) or None
    message = Message(role="assistant", content=reply.get("content") or None, reasoning=reasoning,
                      tool_calls=tool_calls or None, masked=masked)
    return Action(message, calls)
