"""The model layer of verification: LLM judges with majority vote (ToolACE §3.2).

Each aspect is an independent judge. It sees the dialogue and answers
``{thought, passes, reason}`` (a structured answer checked against its JSON Schema by the
gateway), up to `votes` times with distinct sample indices. The majority decides, and a tie
fails: a record is kept only when most judges say it passes. Judges run only on records that
passed the rule layer, so no LLM call is spent on a record the rules already reject.

Votes are cast in waves and stop once the majority is decided (ToolLLM A.5 votes too, but
every one of them): with 3 votes, two that agree settle it, and the third is asked only on a
split. The first wave is one request for its votes (``n`` choices, so the prompt is read and
billed once; the gateway asks them one by one where the endpoint has no ``n``), each later vote
a request of its own, whether voting stops early or not: the decision is exactly the one of
casting every vote. With ``verify.judge_call: combined`` one structured request answers every
aspect.

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


Ask = Callable[[int, int], Awaitable[list[dict[str, Any]]]]


async def _cast(votes: int, stop: str, ask: Ask, wave: Callable[[list[dict[str, Any]]], int]) -> list[dict[str, Any]]:
    """The answers of samples 0.. in order, in waves of `wave(answers so far)` more (0: decided),
    or all at once (`stop="all"`). `ask(first, count)` answers samples first..first+count-1.

    The first wave (the fewest votes that can decide) is one request for that many samples (the
    gateway asks it as one request with `n` choices where the endpoint allows it); every later
    vote is a request of its own. Sample i is thus the same request whether voting stops early
    or not, so a decided majority is the one all the votes would give."""
    opening = wave([])
    if stop == "all":
        rest = await asyncio.gather(ask(0, opening), *(ask(i, 1) for i in range(opening, votes)))
        return [answer for answers in rest for answer in answers]
    answers = list(await ask(0, opening)) if opening else []
    while more := wave(answers):
        for more_answers in await asyncio.gather(*(ask(len(answers) + i, 1) for i in range(more))):
            answers += more_answers
    return answers


def _aspect_wave(votes: int) -> Callable[[list[dict[str, Any]]], int]:
    """How many more votes one aspect needs after `answers` (0: its majority is decided)."""

    def wave(answers: list[dict[str, Any]]) -> int:
        passes = sum(_passes(a) for a in answers)
        fails = len(answers) - passes
        return 0 if _decided(passes, fails, votes) else _wave(passes, fails, votes)

    return wave


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


async def judge(dialogue: Dialogue, aspect: str, gateway: LLMGateway, votes: int, stop: str = "decided") -> Judgement:
    """One aspect's majority over `votes` samples of its judge."""

    async def ask(first: int, count: int) -> list[dict[str, Any]]:
        return await gateway.structured_samples("judge", _messages(dialogue, aspect), JUDGE_SCHEMA, name=f"judge_{aspect}",
                                                first=first, count=count)

    return _judgement(aspect, await _cast(votes, stop, ask, _aspect_wave(votes)), votes)


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

    async def ask(first: int, count: int) -> list[dict[str, Any]]:
        return await gateway.structured_samples("judge", messages, schema, name="judge_aspects", first=first, count=count)

    each = _aspect_wave(votes)

    def wave(answers: list[dict[str, Any]]) -> int:
        """Votes that could decide every aspect still undecided (0: all decided)."""
        return max((each([a[aspect] for a in answers]) for aspect in aspects), default=0)

    answers = await _cast(votes, stop, ask, wave)
    return [_judgement(aspect, [a[aspect] for a in answers], votes) for aspect in aspects]


def first_wave(votes: int) -> int:
    """The votes cast first: the fewest that can decide a majority of `votes`."""
    return _wave(0, 0, votes)


def judge_requests(judgements: list[Judgement], call: str = "per_aspect", opening: int = 1) -> int:
    """The judge requests behind `judgements`: a vote each, or a vote for every aspect at once;
    `opening` votes of each went as one request (``llm.multiple_choices``: :func:`first_wave`)."""
    requests = [len(j.votes) - min(len(j.votes), opening) + 1 if j.votes else 0 for j in judgements]
    return (max(requests, default=0)) if call == "combined" else sum(requests)


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
