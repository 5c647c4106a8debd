"""The judge role against a fixed referee set, before a night is paid for.

``toolfactory check`` on a configuration with executable sources and judges also puts a small set
of dialogues shipped with the package (``catalog/referee_set.jsonl``, made by
``python -m benchmarks.referee_set`` from BFCL's multi-turn ground truths) to the judge role,
with the run's aspects, votes and call shape, and prints how often the judges agree with
execution's verdict on them. Half of them are ground truths whose replay reaches BFCL's state; half
have one call dropped or one argument changed, which BFCL's checker and the execution layer both
reject. Every dialogue ends each turn with the assistant claiming the request is done, so a judge
has to read the calls to tell them apart. Comparing judge models is then one ``check`` each.

The set's dialogues offer BFCL's function documentation (17 to 32 functions): about 5,000 prompt
tokens per judge request, 16 requests or more per check.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass
from importlib import resources

from toolfactory.config import Config
from toolfactory.errors import LLMFailure
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue
from toolfactory.stages.verify.judges import judge_all
from toolfactory.stages.verify.referee import ACCEPTED, ALL, CHANGED_ARGUMENT, DROPPED_CALL, Figure, figures, tally

REFEREE_SET = "referee_set.jsonl"
#: The set's origins as the referee's (a ground truth passes like an accepted executed dialogue).
_ORIGINS = {"ground_truth": ACCEPTED, "dropped_call": DROPPED_CALL, "changed_argument": CHANGED_ARGUMENT}


def referee_set() -> list[tuple[Dialogue, str]]:
    """(dialogue, referee origin) of every record of the shipped set."""
    text = resources.files("toolfactory.catalog").joinpath(REFEREE_SET).read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [(Dialogue.model_validate(row["dialogue"]), _ORIGINS[row["origin"]]) for row in rows]


def wanted(config: Config) -> bool:
    """Whether `check` puts the set to the judges: judges are on and the run executes tools."""
    return bool(config.verify.judges) and bool(config.tools.environments or config.tools.mcp)


@dataclass
class JudgeCheck:
    """The judges' figures on the set, and the records they did not answer (by reason)."""

    figures: list[Figure]
    unanswered: Counter[str]

    def lines(self) -> list[str]:
        overall = [f for f in self.figures if f.aspect == ALL]
        out = [f"judge referee: {f.model} agreed with execution on {f.agree}/{f.records} dialogues of the referee set "
               f"({'-' if f.agreement is None else f'{f.agreement:.1%}'}; {f.false_accepts} false accept(s), "
               f"{f.false_rejects} false reject(s))" for f in overall]
        out += [f"judge referee:   {f.aspect}: {f.agree}/{f.records} agree, {f.false_accepts} false accept(s), "
                f"{f.false_rejects} false reject(s)" for f in self.figures if f.aspect != ALL]
        if self.unanswered:
            out.append("judge referee: not answered: " + ", ".join(f"{reason} {n}" for reason, n in sorted(self.unanswered.items())))
        return out


async def check_judges(config: Config, endpoint: Endpoint) -> JudgeCheck:
    """The judge role's agreement with execution on the shipped set (see the module doc)."""
    settings = config.verify
    cases = referee_set()
    async with LLMGateway(endpoint, config.llm) as gateway:
        model = gateway.model_for("judge")
        answers = await asyncio.gather(*(judge_all(d, list(settings.judges), gateway, settings.judge_votes, settings.judge_stop,
                                                   settings.judge_call) for d, _ in cases), return_exceptions=True)
    counts: Counter[str] = Counter()
    unanswered: Counter[str] = Counter()
    for (_, origin), answer in zip(cases, answers):
        if isinstance(answer, LLMFailure):
            unanswered[answer.reason] += 1
        elif isinstance(answer, BaseException):
            raise answer
        else:
            counts.update(tally(model, origin, answer))
    return JudgeCheck(figures(counts), unanswered)

