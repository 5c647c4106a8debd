"""The verify stage: rule checks of every dialogue; accepted and rejected records (ToolACE §3).

Every failed verdict (errors and warnings) is kept in ``dialogue.verdicts``; a record is rejected
only when at least one verdict has severity "error", with the error codes as the reasons.
"""

from __future__ import annotations

from typing import Any, ClassVar

from toolfactory.config import Config
from toolfactory.errors import ConfigError
from toolfactory.models import Dialogue
from toolfactory.stages.base import ShardContext, ShardSpec, StageOutput, one_to_one
from toolfactory.stages.verify.rules import RULES, check, errors


class VerifyStage:
    name: ClassVar[str] = "verify"

    def plan(self, config: Config, run_id: str, upstream: list[ShardSpec]) -> list[ShardSpec]:
        unknown = sorted(set(config.verify.disabled_rules) - set(RULES))
        if unknown:
            raise ConfigError(f"verify.disabled_rules: unknown rule codes {unknown} (allowed: {', '.join(sorted(RULES))})")
        return one_to_one(self.name, run_id, upstream)

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        disabled = frozenset(ctx.config.verify.disabled_rules)
        out = StageOutput(items_in=len(inputs))
        for data in inputs:
            dialogue = Dialogue.model_validate(data)
            failures = check(dialogue, disabled)
            dialogue.verdicts = failures
            rejecting = errors(failures)
            if rejecting:
                detail = "; ".join(f"{v.code} at {v.path}: {v.message}" for v in rejecting)
                out.reject(self.name, dialogue.id, sorted({v.code for v in rejecting}), dialogue.model_dump(), detail)
            else:
                out.records.append(dialogue)
        return out
