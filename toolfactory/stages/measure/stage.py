"""The measure stage: what curation needs of each accepted dialogue, shard by shard (ToolACE §4).

Shard i reads verify shard i and writes one :class:`~toolfactory.curation.measures.Measure` per
accepted dialogue: its MinHash signatures and exact hash, its query complexity (through the
endpoint's `/v1/embeddings`), the functions it uses and offers, its mode, and the evaluation sets
its user turns overlap (`curate.decontaminate`; the index is built once per worker process). This is the costly,
per-record half of curation; it runs in parallel like verify, and its compact rows are all the
select stage reads.
"""

from __future__ import annotations

from typing import Any, ClassVar

from toolfactory.curation.contamination import contamination_index
from toolfactory.curation.measures import measure
from toolfactory.models import Dialogue
from toolfactory.stages.base import ONE_TO_ONE, Inputs, Planning, ShardContext, ShardSpec, StageOutput, one_to_one, upstream_of


class MeasureStage:
    name: ClassVar[str] = "measure"
    inputs: ClassVar[Inputs] = Inputs("verify", ONE_TO_ONE)

    def plan(self, planning: Planning) -> list[ShardSpec]:
        return one_to_one(self.name, planning, upstream_of(self.inputs))

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        dialogues = [Dialogue.model_validate(r) for r in inputs]
        out = StageOutput(items_in=len(dialogues))
        settings = ctx.config.curate.decontaminate
        index = contamination_index(settings) if settings.enabled and dialogues else None
        out.records.extend(await measure(dialogues, ctx.gateway, ctx.config.llm.embedding_model, index))
        return out
