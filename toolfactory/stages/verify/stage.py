"""The verify stage: the rule layer on every dialogue, then the execution layer (a replay of the
calls that ran on executable sources, :mod:`.execution`) on those that pass it, then LLM judges
on those that pass both (ToolACE §3 dual-layer verification, with APIGen's execution check in
between); accepted and rejected records. The judges spend no votes on what execution rejected.

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

from collections import Counter
from typing import Any, ClassVar

from pydantic import ValidationError

from toolfactory.errors import ConfigError
from toolfactory.formats.base import INVALID_RECORD, RECORD_UNREADABLE, exception_line, validation_message
from toolfactory.executable.registry import environments, source_settings
from toolfactory.models import Dialogue, Record, Rejected
from toolfactory.stages.base import CALLS_BY_RECIPE, RECIPES, Planning, ShardContext, ShardSpec, StageOutput, one_to_one
from toolfactory.stages.records import map_records
from toolfactory.stages.verify.execution import ExecutionLayer, applies
from toolfactory.stages.verify.judges import failed_verdicts, first_wave, judge_all, judge_requests
from toolfactory.stages.verify.limits import Limits
from toolfactory.stages.verify.policy import for_recipe
from toolfactory.stages.verify.rules import RULES, check, errors


#: Dialogues the execution layer replayed (the others passed it untouched), counted even when 0.
REPLAYED = "execution_replayed"


class VerifyStage:
    name: ClassVar[str] = "verify"

    def plan(self, planning: Planning) -> list[ShardSpec]:
        unknown = sorted(set(planning.config.verify.disabled_rules) - set(RULES))
        if unknown:
            raise ConfigError(f"verify.disabled_rules: unknown rule codes {unknown} (allowed: {', '.join(sorted(RULES))})")
        return one_to_one(self.name, planning, "dialogues")

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        settings = ctx.config.verify
        disabled = frozenset(settings.disabled_rules)
        limits = Limits(max_depth=settings.max_depth, max_chars=settings.max_record_chars)
        max_steps = {str(k): v for k, v in settings.max_steps.items()}
        recovery = [str(recipe) for recipe in settings.keep_error_recovery]
        aspects, votes = list(ctx.config.verify.judges), ctx.config.verify.judge_votes
        passed: Counter[str] = Counter()
        spent: Counter[str] = Counter()  # judge requests per recipe
        layer = None
        if settings.execution:
            built = environments(ctx.config.tools)
            layer = ExecutionLayer({name: (built[name], s) for name, s in source_settings(ctx.config.tools).items()
                                    if name in built}, disabled)

        async def verify(dialogue: Dialogue) -> list[Record | Rejected]:
            policy = for_recipe(dialogue.recipe, max_steps, recovery)
            dialogue.verdicts = check(dialogue, disabled, limits, policy)
            rejecting = errors(dialogue.verdicts)
            if not rejecting:
                passed["rules"] += 1
                if layer is not None:
                    passed["replayed"] += applies(dialogue)
                    dialogue.verdicts += await layer.verdicts(dialogue, policy)
                    rejecting = errors(dialogue.verdicts)
                passed["execution"] += not rejecting
            if not rejecting and aspects:  # the judges see only what the rules and execution passed
                dialogue.judgements = await judge_all(dialogue, aspects, ctx.gateway, votes,
                                                      settings.judge_stop, settings.judge_call)
                rejecting = failed_verdicts(dialogue.judgements)
                spent[dialogue.recipe] += judge_requests(dialogue.judgements, settings.judge_call,
                                                         first_wave(votes) if ctx.gateway.groups_samples("judge") else 1)
                dialogue.verdicts += rejecting
                passed["model"] += not rejecting
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
        if aspects:
            out.layers["model"] = (passed["execution"], passed["model"])
        for record in out.records:
            out.count(RECIPES, record.recipe)  # type: ignore[attr-defined]
        for recipe, n in sorted(spent.items()):
            out.count(CALLS_BY_RECIPE, recipe, n)
        return out


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
