"""ToolEval (ToolLLM §3, Appendix A.5): pass rate and win rate of solution paths, judged by an LLM.

Pass rate: the judge first decides whether the instruction is solvable with the tools offered,
then labels the path pass / fail / unsure by the A.5 rules for its finish type (a final answer,
or giving up). Win rate: two paths for one instruction are first compared by their pass labels
(A.5: "a passing candidate is better than a failing one", and only paths labelled pass or fail
are compared), and only when both pass or both fail does the judge compare them on the A.5
criteria; the order of the two is swapped between votes to cancel the judge's position bias.
Every decision is a majority of `votes` structured answers, at least :data:`MIN_VOTES` (A.5 uses
≥ 4); a tie is "unsure" for pass and "tie" for win. Judges run through the gateway's `judge`
role, so any OpenAI-compatible model works.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from toolfactory.llm import LLMGateway
from toolfactory.models import Dialogue
from toolfactory.stages.verify.judges import render

FinishType = Literal["give_answer", "give_up"]
PassLabel = Literal["pass", "fail", "unsure"]
WinOutcome = Literal["win", "tie", "lose", "not_compared"]

# A.5: "we generate multiple (≥ 4) predictions for each solution path and take a majority vote".
MIN_VOTES = 4


def check_votes(votes: int) -> None:
    """Refuse a vote count below A.5's minimum, with the one message every entry point shows."""
    if votes < MIN_VOTES:
        raise ValueError(f"--votes must be at least {MIN_VOTES} (ToolEval takes a majority of at least "
                         f"{MIN_VOTES} judge answers per decision), got {votes}")

_SYSTEM = "You evaluate how an AI assistant used tools to handle a user's instruction. Answer in the JSON asked for."

_SOLVABLE = """\
Instruction: {instruction}
Tools offered: {tools}
Is this instruction solvable with these tools? It is unsolvable when no tool is relevant to it or
when it gives invalid information (for example an invalid e-mail address)."""

_PASS_RULES = """\
{path}

The instruction was judged {solvability}. The assistant ended by {finish}. Label the solution path:
- solvable, gave up: pass only if it tried all the tools and none gave useful information; fail
  if it called only a few of them or had obtained useful information.
- solvable, final answer: pass if the answer fully solves the instruction; also pass if the tools
  gave no useful information after all were tried and the answer says so; fail if the tools gave
  useful information but the answer does not fully solve the instruction or refuses; unsure if the
  answer does not let you tell.
- unsolvable, final answer: pass if the answer solves it anyway or refuses; fail if it claims
  success without grounds (a hallucinated positive answer).
- unsolvable, gave up: pass."""

_WIN_CRITERIA = """\
Instruction: {instruction}

Solution A:
{first}

Solution B:
{second}

Which solution is better? Compare, in order: information richness of the final answer (all the
information needed; similar richness is a tie); factuality (does it describe accurately what was
done and why it failed); reasoning (a detailed, accurate reason when unsolved); milestones reached;
exploration (more potentially useful tools tried is better); cost (for as many tools, fewer
redundant calls is better)."""

SOLVABLE_SCHEMA = {"type": "object", "properties": {"thought": {"type": "string"}, "solvable": {"type": "boolean"}}, "required": ["thought", "solvable"]}
PASS_SCHEMA = {"type": "object", "properties": {"thought": {"type": "string"}, "label": {"enum": ["pass", "fail", "unsure"]}}, "required": ["thought", "label"]}
WIN_SCHEMA = {"type": "object", "properties": {"thought": {"type": "string"}, "better": {"enum": ["A", "B", "tie"]}}, "required": ["thought", "better"]}


@dataclass
class PassResult:
    id: str
    solvable: bool
    finish: FinishType
    label: Literal["pass", "fail", "unsure"]
    votes: list[str] = field(default_factory=list)


@dataclass
class WinResult:
    id: str
    outcome: WinOutcome  # for the first path
    votes: list[str] = field(default_factory=list)  # per judge vote, for the first path
    decided_by: Literal["judge", "pass_label"] = "judge"


def precondition(first: PassLabel, second: PassLabel) -> WinOutcome | None:
    """A.5's rule before any comparison, for the first path: a passing path wins over a failing
    one; a pair with an "unsure" path is not compared (A.5 compares only paths labelled pass or
    fail); None when both pass or both fail, which is the judge's to decide."""
    if "unsure" in (first, second):
        return "not_compared"
    if first != second:
        return "win" if first == "pass" else "lose"
    return None


def instruction_of(dialogue: Dialogue) -> str:
    return next((m.content or "" for m in dialogue.messages if m.role == "user"), "")


def finish_type(dialogue: Dialogue) -> FinishType:
    """How a path ended: ToolLLM's Finish call when there is one, else a final answer or not."""
    for message in reversed(dialogue.messages):
        for call in reversed(message.tool_calls or []):
            if call.name == "Finish":
                try:
                    kind = json.loads(call.arguments or "{}").get("return_type")
                except (json.JSONDecodeError, AttributeError):
                    kind = None
                return "give_answer" if kind == "give_answer" else "give_up"
    last = dialogue.messages[-1] if dialogue.messages else None
    answered = last is not None and last.role == "assistant" and not last.tool_calls and bool((last.content or "").strip())
    return "give_answer" if answered else "give_up"


def majority(labels: list[str], tie: str) -> str:
    counts = Counter(labels).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return tie
    return counts[0][0]


async def _votes(gateway: LLMGateway, prompt: str, schema: dict[str, Any], name: str, votes: int) -> list[dict[str, Any]]:
    messages = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": prompt}]
    return list(await asyncio.gather(*(gateway.structured("judge", messages, schema, name=name, sample=i) for i in range(votes))))


async def pass_label(dialogue: Dialogue, gateway: LLMGateway, votes: int = MIN_VOTES) -> PassResult:
    tools = ", ".join(f.name for f in dialogue.tools if f.name != "Finish")
    solvable_votes = await _votes(gateway, _SOLVABLE.format(instruction=instruction_of(dialogue), tools=tools), SOLVABLE_SCHEMA, "tooleval_solvable", votes)
    solvable = majority(["yes" if v["solvable"] else "no" for v in solvable_votes], tie="yes") == "yes"
    finish = finish_type(dialogue)
    prompt = _PASS_RULES.format(
        path=render(dialogue),
        solvability="solvable" if solvable else "unsolvable",
        finish="giving a final answer" if finish == "give_answer" else "giving up",
    )
    labels = [v["label"] for v in await _votes(gateway, prompt, PASS_SCHEMA, "tooleval_pass", votes)]
    return PassResult(dialogue.id, solvable, finish, majority(labels, tie="unsure"), labels)  # type: ignore[arg-type]


async def win_label(
    first: Dialogue, second: Dialogue, gateway: LLMGateway, votes: int = MIN_VOTES,
    labels: tuple[PassLabel, PassLabel] | None = None,
) -> WinResult:
    """Compare two paths for one instruction; even votes see the first path as A, odd ones as B.

    With `labels` (the pass labels of the two paths) A.5's :func:`precondition` decides first, and
    the judge is asked only when both paths pass or both fail."""
    if labels is not None:
        decided = precondition(*labels)
        if decided is not None:
            return WinResult(first.id, decided, [], "pass_label")
    instruction = instruction_of(first)
    prompts = [
        _WIN_CRITERIA.format(instruction=instruction, first=render(a), second=render(b))
        for a, b in ((first, second), (second, first))
    ]
    messages = [[{"role": "system", "content": _SYSTEM}, {"role": "user", "content": p}] for p in prompts]
    answers = await asyncio.gather(
        *(gateway.structured("judge", messages[i % 2], WIN_SCHEMA, name="tooleval_win", sample=i // 2) for i in range(votes))
    )
    as_first = []
    for i, answer in enumerate(answers):
        first_is = "A" if i % 2 == 0 else "B"
        better = answer["better"]
        as_first.append("tie" if better == "tie" else ("win" if better == first_is else "lose"))
    return WinResult(first.id, majority(as_first, tie="tie"), as_first)  # type: ignore[arg-type]


def pass_rate(results: list[PassResult]) -> dict[str, Any]:
    counts = Counter(r.label for r in results)
    return {"paths": len(results), **{k: counts.get(k, 0) for k in ("pass", "fail", "unsure")},
            "pass_rate": round(counts.get("pass", 0) / len(results), 4) if results else None}


def win_rate(results: list[WinResult]) -> dict[str, Any]:
    """Win rate over the compared pairs; pairs with an "unsure" path are counted apart."""
    counts = Counter(r.outcome for r in results)
    total = len(results) - counts.get("not_compared", 0)
    # As ToolLLM's Table 4: a tie counts half as a win.
    return {"pairs": total, **{k: counts.get(k, 0) for k in ("win", "tie", "lose")},
            "not_compared": counts.get("not_compared", 0),
            "by_pass_label": sum(r.decided_by == "pass_label" and r.outcome != "not_compared" for r in results),
            "win_rate": round((counts.get("win", 0) + counts.get("tie", 0) / 2) / total, 4) if total else None}
