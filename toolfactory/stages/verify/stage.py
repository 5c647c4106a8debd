"""The verify stage: the rule layer on every dialogue, then the execution layer (a replay of the
calls that ran on executable sources, :mod:`.execution`) on those that pass it, then LLM judges
on those that pass both (ToolACE §3 dual-layer verification, with APIGen's execution check in
between); accepted and rejected records. The judges spend no votes on what execution rejected,
nor, on a record execution accepted whose every call ran, on the aspects execution answers
(``verify.execution_answers``). On a seeded sample of the dialogues execution decided, and on
labelled corruptions of them, the judges vote anyway and are measured against execution
(:mod:`.referee`); those votes decide nothing.

Every failed verdict (errors and warnings) is kept in ``dialogue.verdicts`` and every judge's
votes in ``dialogue.judgements``; a record is rejected when a rule of severity "error" fails or
a judge's majority fails it, with those codes as the reasons. Per-layer counts go to the stats.
The policy rules apply each dialogue's recipe policy (:mod:`.policy`, with the config's
``max_steps`` and ``keep_error_recovery``); a record over ``max_depth`` / ``max_record_chars`` is
rejected as ``record_too_deep`` / ``record_too_large``. One bad record never fails the shard: a
stored record the model refuses is ``invalid_record``, one that cannot be read at all
``record_unreadable``, and one whose judging raises ``record_check_error`` (the rule layer's
guard, :func:`~toolfactory.stages.verify.rules.check`), each with the one-line reason.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, ClassVar

from pydantic import ValidationError

from toolfactory.definitions.finish import FINISH_FUNCTION
from toolfactory.errors import ConfigError, LLMFailure
from toolfactory.formats.base import INVALID_RECORD, RECORD_UNREADABLE, exception_line, validation_message
from toolfactory.executable.registry import environments, source_settings
from toolfactory.models import Dialogue, Judgement, Record, Rejected
from toolfactory.stages.base import CALLS_BY_RECIPE, ONE_TO_ONE, RECIPES, Inputs, Planning, ShardContext, ShardSpec, StageOutput, one_to_one, upstream_of
from toolfactory.stages.records import map_records
from toolfactory.executable.counts import SESSIONS_REUSED, SESSIONS_STARTED
from toolfactory.stages.verify.execution import EXECUTION, ExecutionLayer, applies
from toolfactory.stages.verify.judges import failed_verdicts, first_wave, judge_all, judge_requests
from toolfactory.stages.verify.limits import Limits
from toolfactory.stages.verify.policy import Policy, for_recipe
from toolfactory.stages.verify.referee import ACCEPTED, JUDGED_ALONE, REFEREE, corrupt, draw, origin_of, tally
from toolfactory.stages.verify.rules import RULES, check, errors


#: Dialogues the execution layer replayed (the others passed it untouched), counted even when 0.
REPLAYED = "execution_replayed"
#: Per source: records replayed live, records checked from the record because a source could not
#: start (``verify.execution_unavailable: record``), and records whose live replay found the
#: source drifted (``exec_source_drifted``).
REPLAYED_LIVE = "execution_replayed_live"
CHECKED_FROM_RECORD = "execution_checked_from_record"
SOURCE_DRIFTED = "execution_source_drifted"
#: Refereed records the judges did not answer (an LLM failure), by reason: left out of the figures.
REFEREE_UNANSWERED = "referee_unanswered"


class VerifyStage:
    name: ClassVar[str] = "verify"
    inputs: ClassVar[Inputs] = Inputs("dialogues", ONE_TO_ONE)

    def plan(self, planning: Planning) -> list[ShardSpec]:
        unknown = sorted(set(planning.config.verify.disabled_rules) - set(RULES))
        if unknown:
            raise ConfigError(f"verify.disabled_rules: unknown rule codes {unknown} (allowed: {', '.join(sorted(RULES))})")
        warnings = sorted(code for code, registered in RULES.items() if registered.severity == "warning")
        unknown = sorted(set(planning.config.verify.rejecting_warnings) - set(warnings))
        if unknown:
            raise ConfigError(f"verify.rejecting_warnings: {unknown} are not warning rules (allowed: {', '.join(warnings)})")
        return one_to_one(self.name, planning, upstream_of(self.inputs))

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        settings = ctx.config.verify
        disabled = frozenset(settings.disabled_rules)
        limits = Limits(max_depth=settings.max_depth, max_chars=settings.max_record_chars)
        max_steps = {str(k): v for k, v in settings.max_steps.items()}
        recovery = [str(recipe) for recipe in settings.keep_error_recovery]
        aspects, votes = list(ctx.config.verify.judges), ctx.config.verify.judge_votes
        answered = frozenset(settings.execution_answers)
        passed: Counter[str] = Counter()
        spent: Counter[str] = Counter()  # judge requests per recipe
        alone: Counter[str] = Counter()  # records the judges decided with nothing executed
        sample = Sample(ctx.config.run.seed or 0, settings.referee_share if aspects else 0.0)
        layer = None
        if settings.execution:
            built = environments(ctx.config.tools)
            layer = ExecutionLayer({name: (built[name], s) for name, s in source_settings(ctx.config.tools).items()
                                    if name in built}, disabled, unavailable=settings.execution_unavailable)
        opening = first_wave(votes) if aspects and ctx.gateway.groups_samples("judge") else 1

        async def verify(dialogue: Dialogue) -> list[Record | Rejected]:
            policy = for_recipe(dialogue.recipe, max_steps, recovery, settings.rejecting_warnings)
            dialogue.verdicts = check(dialogue, disabled, limits, policy)
            rejecting = errors(dialogue.verdicts)
            executed = False
            if not rejecting:
                passed["rules"] += 1
                if layer is not None:
                    executed = applies(dialogue)
                    passed["replayed"] += executed
                    dialogue.verdicts += await layer.verdicts(dialogue, policy)
                    rejecting = errors(dialogue.verdicts)
                    sample.consider(dialogue, origin_of(v.code for v in rejecting) if executed else None)
                passed["execution"] += not rejecting
            if not rejecting and aspects:  # the judges see only what the rules and execution passed
                asked = [a for a in aspects if not (executed and a in answered and fully_executed(dialogue, policy))]
                # A dialogue drawn for the referee is asked every aspect in the same requests: the
                # asked aspects decide it, the others are only counted (:func:`referee`).
                everything = sample.drawn(dialogue)
                judgements = await judge_all(dialogue, aspects if everything else asked, ctx.gateway, votes,
                                             settings.judge_stop, settings.judge_call) if asked or everything else []
                if everything:
                    sample.judged(dialogue, judgements)
                dialogue.judgements = [j for j in judgements if j.aspect in asked]
                rejecting = failed_verdicts(dialogue.judgements)
                spent[dialogue.recipe] += judge_requests(judgements, settings.judge_call, opening)
                dialogue.verdicts += rejecting
                passed["model"] += not rejecting
                if not executed:
                    alone["rejected" if rejecting else "accepted"] += 1
            if not rejecting:
                return [dialogue]
            detail = "; ".join(f"{v.code} at {v.path}: {v.message}" for v in rejecting)
            reasons = sorted({v.code for v in rejecting})
            return [Rejected(id=dialogue.id, stage=self.name, reasons=reasons, detail=detail, record=dialogue.model_dump())]

        dialogues, unreadable = readable(self.name, inputs)
        out = await map_records(self.name, dialogues, verify, lambda d: (d.id, d.model_dump()))
        out.items_in += len(unreadable)
        out.rejected += unreadable
        out.layers = {"rules": (len(inputs), passed["rules"])}
        # Every shard of a run with executable sources reports the layer, so the run's sum covers
        # every record the rules passed (a shard that replayed nothing passed them all, and says
        # so); a run without them reports it only where a record named its own environments.
        if layer is not None and (layer.configured or passed["replayed"]):
            out.layers["execution"] = (passed["rules"], passed["execution"])
            out.count(REPLAYED, "dialogues", passed["replayed"])
            for (source, began), n in sorted(layer.sessions.items()):
                out.count(SESSIONS_REUSED if began == "reused" else SESSIONS_STARTED, source, n)
            for name, counts in ((REPLAYED_LIVE, layer.tally.live), (CHECKED_FROM_RECORD, layer.tally.from_record),
                                 (SOURCE_DRIFTED, layer.tally.drifted)):
                for source, n in sorted(counts.items()):
                    out.count(name, source, n)
        if aspects:
            out.layers["model"] = (passed["execution"], passed["model"])
            for verdict, n in sorted(alone.items()):
                out.count(JUDGED_ALONE, verdict, n)
            await referee(sample, ctx, out)
        for record in out.records:
            out.count(RECIPES, record.recipe)  # type: ignore[attr-defined]
        for recipe, n in sorted(spent.items()):
            out.count(CALLS_BY_RECIPE, recipe, n)
        return out


def fully_executed(dialogue: Dialogue, policy: Policy) -> bool:
    """Whether every call of `dialogue` went to an executable source (apart from the recipe's own
    actions and ToolLLM's Finish): then no tool response of it was played by an LLM."""
    executed = {str(c.get("name")) for c in (dialogue.generation.get(EXECUTION) or {}).get("calls") or [] if isinstance(c, dict)}
    own = policy.builtin_functions | {FINISH_FUNCTION.name}
    return all(call.name in executed or call.name in own for m in dialogue.messages for call in m.tool_calls or [])


class Sample:
    """The shard's referee sample as the records go by (:mod:`.referee`): a dialogue execution
    decided is drawn when its draw is below `share`; those not drawn may top the sample up to
    ``verify.referee_min`` at the end. A drawn dialogue execution accepted is judged on every
    aspect by its own deciding requests; the others are judged by :func:`referee`."""

    def __init__(self, seed: int, share: float) -> None:
        self.seed, self.share = seed, share
        self.cases: dict[str, tuple[Dialogue, str, list[Judgement] | None]] = {}  # drawn: id -> case
        self.spare: list[tuple[Dialogue, str]] = []  # decided, not drawn

    def consider(self, dialogue: Dialogue, origin: str | None) -> None:
        if origin is None:
            return
        kept = dialogue.model_copy(deep=True)
        if draw(self.seed, dialogue.id) < self.share:
            self.cases[dialogue.id] = (kept, origin, None)
        else:
            self.spare.append((kept, origin))

    def drawn(self, dialogue: Dialogue) -> bool:
        return dialogue.id in self.cases

    def judged(self, dialogue: Dialogue, judgements: list[Judgement]) -> None:
        kept, origin, _ = self.cases[dialogue.id]
        self.cases[dialogue.id] = (kept, origin, judgements)

    def chosen(self, minimum: int) -> list[tuple[Dialogue, str, list[Judgement] | None]]:
        """The drawn cases, then the spare ones of lowest draw up to `minimum` in all."""
        spare = sorted(self.spare, key=lambda case: (draw(self.seed, case[0].id), case[0].id))
        return [*self.cases.values(), *((d, origin, None) for d, origin in spare[:max(0, minimum - len(self.cases))])]


async def referee(sample: Sample, ctx: ShardContext, out: StageOutput) -> None:
    """The judges' votes on the shard's refereed sample and a corruption of each accepted one,
    counted in `out`'s profile (:mod:`.referee`); nothing here decides a record. A vote the
    endpoint did not give is counted under ``referee_unanswered`` by its reason, and that record
    is left out."""
    settings = ctx.config.verify
    cases: list[tuple[Dialogue, str, list[Judgement] | None]] = []
    for dialogue, origin, judgements in sample.chosen(settings.referee_min):
        dialogue.judgements, dialogue.verdicts = [], []
        cases.append((dialogue, origin, judgements))
        if origin == ACCEPTED and (made := corrupt(dialogue, sample.seed)) is not None:
            cases.append((made[1], made[0], None))
    if not cases:
        return
    model = ctx.gateway.model_for("judge")
    aspects = list(settings.judges)

    async def ask(dialogue: Dialogue, known: list[Judgement] | None) -> list[Judgement]:
        if known is not None:
            return known
        return await judge_all(dialogue, aspects, ctx.gateway, settings.judge_votes, settings.judge_stop, settings.judge_call)

    answers = await asyncio.gather(*(ask(d, known) for d, _, known in cases), return_exceptions=True)
    for (_, origin, _), answer in zip(cases, answers):
        if isinstance(answer, LLMFailure):
            out.count(REFEREE_UNANSWERED, answer.reason)
        elif isinstance(answer, BaseException):
            raise answer
        else:
            for value, n in tally(model, origin, answer).items():
                out.count(REFEREE, value, n)


def readable(stage: str, inputs: list[dict[str, Any]]) -> tuple[list[Dialogue], list[Rejected]]:
    """The inputs as Dialogues, and a rejection for each the model refuses (``invalid_record``) or
    that cannot be read at all (``record_unreadable``: any other exception, e.g. a RecursionError):
    one bad record is a rejection with its reason, never the end of the shard."""
    dialogues: list[Dialogue] = []
    unreadable: list[Rejected] = []
    for data in inputs:
        try:
            dialogues.append(Dialogue.model_validate(data))
        except Exception as exc:  # noqa: BLE001 - whatever one record holds, the others are judged
            reason, detail = ((INVALID_RECORD, validation_message(exc)) if isinstance(exc, ValidationError)
                              else (RECORD_UNREADABLE, exception_line(exc)))
            record_id = str(data.get("id") or "") if isinstance(data, dict) else ""
            unreadable.append(Rejected(id=record_id, stage=stage, reasons=[reason], detail=detail,
                                       record=data if isinstance(data, dict) else {"value": data}))
    return dialogues, unreadable
