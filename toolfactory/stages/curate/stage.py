"""The curate stage: the run's dataset from its accepted dialogues (ToolACE §4).

Curation takes three stages, so that no process holds the run's records at once:

* **measure** (one shard per verify shard): each dialogue's signatures, complexity, functions;
* **select** (one shard, fan-in over the measures): the run-wide decisions — exact and
  near-duplicates (MinHash LSH, within the run and against earlier runs), mode steering, the
  easy / medium / hard cut points of query complexity, the API clusters (the pool's k-means
  centroids in `<root>/pool/clusters/`, or the run's APIs with `curate.clusters_scope: run`) and
  the low / medium / high diversity subsets (see :mod:`toolfactory.stages.select.stage`);
* **curate** (one shard per verify shard, this one): applies them. Shard i reads verify shard i,
  measure shard i and, of the selection, its summary and the verdicts on its own dialogues (read
  record by record, so a shard's memory does not grow with the run), rejects the dialogues the selection rejects
  (`contaminated_<set>`, with the test item each overlaps; `duplicate_exact`, `duplicate_instruction`,
  `duplicate_dialogue`, `curate_mode_steering`, with what each duplicates)
  and writes the others with their `curation` (complexity and level, clusters, diversity subsets)
  and the loss mask of each assistant turn (:mod:`toolfactory.curation.turn_masks`).

Its output is the dataset: exports, retriever data and the report read it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from toolfactory.curation import turn_masks, turns
from toolfactory.curation.contamination import CONTAMINATED
from toolfactory.curation.measures import Measure
from toolfactory.curation.selection import Selection, Verdict, curation_of
from toolfactory.executable.counts import count_executed
from toolfactory.models import Dialogue
from toolfactory.stages.base import DECIDED, RECIPES, Inputs, Planning, ShardContext, ShardSpec, StageOutput, decided_inputs, upstream_of
from toolfactory.stages.select.stage import record_key

__all__ = ["CurateStage", "dataset_inputs", "record_key"]


def dataset_inputs(run_id: str, index: int, selection: str) -> tuple[str, str, str]:
    """What dataset shard `index` reads: its verify and measure shards and the selection that decided on them."""
    verify, measure, decision = decided_inputs(CurateStage.inputs, run_id, index, selection)
    return verify, measure, decision


class CurateStage:
    name: ClassVar[str] = "curate"
    streams_inputs: ClassVar[bool] = True
    inputs: ClassVar[Inputs] = Inputs("select", DECIDED, per=("verify", "measure"))

    def plan(self, planning: Planning) -> list[ShardSpec]:
        [selection] = planning.outputs(upstream_of(self.inputs)) or [None]
        if selection is None:
            return []
        return [ShardSpec(self.name, spec.index, decided_inputs(self.inputs, planning.run_id, spec.index, selection))
                for spec in planning.plans[self.inputs.per[-1]]]

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        *parts, selected = shard.inputs
        dialogues: list[Dialogue] = []
        measures: dict[str, Measure] = {}
        for record in (record for path in parts for record in ctx.iter(path)):
            if record.get("kind") == "measure":
                measure = Measure.model_validate(record)
                measures[measure.id] = measure
            else:
                dialogues.append(Dialogue.model_validate(record))
        mine = {d.id for d in dialogues}
        verdicts: dict[str, Verdict] = {}
        selection: Selection | None = None
        for record in ctx.iter(selected):  # the run's verdicts: only this shard's are kept
            if record.get("kind") == "selection":
                selection = Selection.model_validate(record)
            elif record.get("id") in mine:
                verdict = Verdict.model_validate(record)
                verdicts[verdict.id] = verdict
        if selection is None:
            raise ValueError(f"curate shard {shard.index}: no selection among its inputs {list(shard.inputs)}")
        out = StageOutput(items_in=len(dialogues))
        for d in sorted(dialogues, key=lambda d: d.id):
            verdict, measure = verdicts.get(d.id), measures.get(d.id)
            if measure is None:
                raise ValueError(f"curate shard {shard.index}: dialogue {d.id!r} has no measure")
            if verdict is not None and verdict.reasons:
                out.reject(self.name, d.id, verdict.reasons, d.model_dump(), verdict.detail)
                if verdict.duplicate:
                    out.count("duplicates", verdict.duplicate)
                for label in verdict.contaminated:
                    out.count(CONTAMINATED, label)
                continue
            d.curation = curation_of(measure.complexity, d.id, measure.used, selection, verdict)
            turn_masks.apply(d, ctx.config.curate.turn_masks)
            for dimension, counted in turn_masks.counts(d).items():
                for value, n in counted.items():
                    out.count(dimension, value, n)
            out.records.append(d)
            out.count("complexity_levels", str(d.curation["complexity_level"]))
            out.count("modes", d.mode)
            out.count("turns", turns(d))
            out.count(RECIPES, d.recipe)
            count_executed(out, d.generation)  # the dataset's dialogues that ran real tools
        return out
