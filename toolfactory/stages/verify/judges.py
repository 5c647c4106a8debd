"""The model layer of verification: LLM judges with majority vote (ToolACE §3.2).

Each aspect is an independent judge. It sees the dialogue and answers
``{thought, passes, reason}`` (a structured answer checked against its JSON Schema by the
gateway), up to `votes` times with distinct sample indices. The majority decides, and a tie
fails: a record is kept only when most judges say it passes. Judges run only on records that
passed the rule layer, so no LLM call is spent on a record the rules already reject.

Votes are cast in waves and stop once the majority is decided (ToolLLM A.5 votes too, but
every one of them): with 3 votes, two that agree settle it, and the third is asked only on a
split. Vote i is always sample i, so the decision is exactly the one of casting every vote.
With ``verify.judge_call: combined`` one structured request per vote answers every aspect.

Every judge request of a dialogue begins with the same text (the instructions, the tools and the
dialogue; the aspect's question comes last), so an endpoint's prompt cache can serve all but the
first of them. It can only once that first one is answered (a prompt is held when its prefill is
done); the gateway sends the first alone and the others once it is answered
(:mod:`toolfactory.llm.prefixes`). Dialogues written for one tool set share their beginning up to
the dialogue, and are held back the same way.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable

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


def _decided(passes: int, fails: int, votes: int) -> bool:
    """Whether the votes cast so far fix the majority of `votes` (a tie fails)."""
    needed = votes // 2 + 1  # passes that make a majority
    return passes >= needed or fails > votes - needed


def _wave(passes: int, fails: int, votes: int) -> int:
    """How many more votes to cast at once: the fewest that could decide the majority.

    Never more than needed, so early stopping saves every vote it can; waves keep the latency
    at a few round trips (3 votes: 2, then 1 only on a split)."""
    needed = votes // 2 + 1
    return min(needed - passes, votes - needed + 1 - fails)


async def _cast(votes: int, stop: str, ask: Callable[[int], Awaitable[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The answers of samples 0.. in order, `ask(i)` each, in waves until the majority is
    decided (`stop="decided"`) or all at once (`"all"`). Sample i is the same request either
    way, so a decided majority is the one all the votes would give."""
    if stop == "all":
        return list(await asyncio.gather(*(ask(i) for i in range(votes))))
    answers: list[dict[str, Any]] = []
    passes = fails = 0
    while not _decided(passes, fails, votes):
        wave = await asyncio.gather(*(ask(len(answers) + i) for i in range(_wave(passes, fails, votes))))
        answers += wave
        passes = sum(_passes(a) for a in answers)
        fails = len(answers) - passes
    return answers


def _passes(answer: dict[str, Any]) -> bool:
    return bool(answer["passes"])


def _judgement(aspect: str, answers: list[dict[str, Any]], votes: int) -> Judgement:
    """The decided majority of `votes`; the record keeps the votes that were cast."""
    cast = [Vote(passes=a["passes"], reason=a["reason"], thought=a["thought"]) for a in answers]
    return Judgement(aspect=aspect, passes=sum(v.passes for v in cast) >= votes // 2 + 1, votes=cast)


def _messages(dialogue: Dialogue, aspect: str) -> list[dict[str, Any]]:
    """A judge's prompt: what every aspect shares first, its question last."""
    return [
        {"role": "system", "content": _INSTRUCTIONS},
        {"role": "user", "content": f"{render(dialogue)}\n\nQuestion: {ASPECTS[aspect]}"},
    ]


async def _ask(dialogue: Dialogue, aspect: str, gateway: LLMGateway, sample: int) -> dict[str, Any]:
    return dict(await gateway.structured("judge", _messages(dialogue, aspect), JUDGE_SCHEMA, name=f"judge_{aspect}", sample=sample))


async def judge(dialogue: Dialogue, aspect: str, gateway: LLMGateway, votes: int, stop: str = "decided") -> Judgement:
    """One aspect's majority over `votes` samples of its judge."""

    async def ask(i: int) -> dict[str, Any]:
        return await _ask(dialogue, aspect, gateway, i)

    return _judgement(aspect, await _cast(votes, stop, ask), votes)


async def judge_all(dialogue: Dialogue, aspects: list[str], gateway: LLMGateway, votes: int,
                    stop: str = "decided", call: str = "per_aspect") -> list[Judgement]:
    """Every aspect's judgement: one judge per aspect, or one combined judge (:func:`judge_combined`)."""
    if call == "combined":
        return await judge_combined(dialogue, aspects, gateway, votes, stop)
    return list(await asyncio.gather(*(judge(dialogue, aspect, gateway, votes, stop) for aspect in aspects)))


def combined_schema(aspects: list[str]) -> dict[str, Any]:
    """One object per aspect, each a judge's answer; the aspect's question is its description."""
    return {
        "type": "object",
        "properties": {aspect: {**JUDGE_SCHEMA, "description": ASPECTS[aspect]} for aspect in aspects},
        "required": list(aspects),
    }


_COMBINED_INSTRUCTIONS = (
    "You review one training dialogue in which an assistant uses tools. Judge each question below "
    "on its own. For each, think step by step in `thought`, answer `passes` (true when the dialogue "
    "is right on this point), and give a one-sentence `reason`."
)


async def judge_combined(dialogue: Dialogue, aspects: list[str], gateway: LLMGateway, votes: int,
                         stop: str = "decided") -> list[Judgement]:
    """Every aspect from one structured request per vote.

    A vote answers all the aspects; with `stop="decided"`, waves go on while some aspect's
    majority is undecided (so every aspect's decision, and every failure reason, is known)."""
    schema = combined_schema(aspects)
    questions = "\n".join(f"- {aspect}: {ASPECTS[aspect]}" for aspect in aspects)
    messages = [
        {"role": "system", "content": _COMBINED_INSTRUCTIONS},
        {"role": "user", "content": f"{render(dialogue)}\n\nQuestions:\n{questions}"},
    ]

    async def ask(i: int) -> dict[str, Any]:
        return await gateway.structured("judge", messages, schema, name="judge_aspects", sample=i)

    if stop == "all":
        answers = list(await asyncio.gather(*(ask(i) for i in range(votes))))
    else:
        answers = []
        while True:
            tallies = [(p, len(answers) - p) for p in (sum(_passes(a[x]) for a in answers) for x in aspects)]
            undecided = [(p, f) for p, f in tallies if not _decided(p, f, votes)]
            if not undecided:
                break
            wave = max(_wave(p, f, votes) for p, f in undecided)
            answers += await asyncio.gather(*(ask(len(answers) + i) for i in range(wave)))
    return [_judgement(aspect, [a[aspect] for a in answers], votes) for aspect in aspects]


def judge_requests(judgements: list[Judgement], call: str = "per_aspect") -> int:
    """The judge requests behind `judgements`: a vote each, or a vote for every aspect at once."""
    votes = [len(j.votes) for j in judgements]
    return (max(votes, default=0)) if call == "combined" else sum(votes)


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
