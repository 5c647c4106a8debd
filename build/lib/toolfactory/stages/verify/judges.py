"""The model layer of verification: LLM judges with majority vote (ToolACE §3.2).

Each aspect is an independent judge. It sees the dialogue and answers
``{thought, passes, reason}`` (a structured answer checked against its JSON Schema by the
gateway), `votes` times with distinct sample indices. The majority decides, and a tie fails:
a record is kept only when most judges say it passes. Judges run only on records that passed
the rule layer, so no LLM call is spent on a record the rules already reject.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from toolfactory.llm import LLMGateway
from toolfactory.models import Dialogue, Judgement, Verdict, Vote

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "thought": {"type": "string"},
        "passes": {"type": "boolean"},
        "reason": {"type": "string"},
    },
    "required": ["thought", "passes", "reason"],
}

_INSTRUCTIONS = (
    "You review one training dialogue in which an assistant uses tools. Judge only the question "
    "below. Think step by step in `thought`, answer `passes` (true when the dialogue is right on "
    "this point), and give a one-sentence `reason`."
)

ASPECTS: dict[str, str] = {
    "hallucination": (
        "Are all argument values of the tool calls grounded in what the user said or in the system "
        "prompt, or in earlier tool responses? A value the assistant invented fails."
    ),
    "consistency": (
        "Does the assistant's final answer fulfil the user's request, respect its constraints and "
        "the system prompt's instructions, and agree with the tool responses?"
    ),
    "tool_response": (
        "Does every tool response fit its function's definition: the documented fields and types, "
        "realistic values, and an error where the request was invalid?"
    ),
    "repetition": (
        "Is the assistant free of repetition: no answer, sentence or tool call repeated without "
        "a reason?"
    ),
    "meaningless_tokens": (
        "Is every assistant message free of meaningless tokens: gibberish, stray markup, "
        "placeholder text or garbled characters?"
    ),
}


def render(dialogue: Dialogue) -> str:
    """The dialogue as the judges read it: the tools offered, then the messages."""
    tools = [{"name": f.name, "description": f.description, "parameters": f.parameters, "returns": f.returns} for f in dialogue.tools]
    lines = ["Tools:", json.dumps(tools, ensure_ascii=False), "", "Dialogue:"]
    for message in dialogue.messages:
        if message.tool_calls:
            calls = "; ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
            lines.append(f"[assistant calls] {calls}")
        if message.content:
            speaker = f"tool {message.name}" if message.role == "tool" else message.role
            lines.append(f"[{speaker}] {message.content}")
    return "\n".join(lines)


async def judge(dialogue: Dialogue, aspect: str, gateway: LLMGateway, votes: int) -> Judgement:
    messages = [
        {"role": "system", "content": _INSTRUCTIONS},
        {"role": "user", "content": f"{render(dialogue)}\n\nQuestion: {ASPECTS[aspect]}"},
    ]
    answers = await asyncio.gather(
        *(gateway.structured("judge", messages, JUDGE_SCHEMA, name=f"judge_{aspect}", sample=i) for i in range(votes))
    )
    cast = [Vote(passes=a["passes"], reason=a["reason"], thought=a["thought"]) for a in answers]
    return Judgement(aspect=aspect, passes=sum(v.passes for v in cast) * 2 > len(cast), votes=cast)


async def judge_all(dialogue: Dialogue, aspects: list[str], gateway: LLMGateway, votes: int) -> list[Judgement]:
    return list(await asyncio.gather(*(judge(dialogue, aspect, gateway, votes) for aspect in aspects)))


def failed_verdicts(judgements: list[Judgement]) -> list[Verdict]:
    """A rejecting verdict per aspect the majority failed, with the failing votes' reasons."""
    return [
        Verdict(
            code=f"judge_{j.aspect}",
            passed=False,
            message=" | ".join(v.reason for v in j.votes if not v.passes),
            path="dialogue",
        )
        for j in judgements
        if not j.passes
    ]
