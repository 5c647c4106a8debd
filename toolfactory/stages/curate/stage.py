"""The curate stage: the run's dataset from its accepted dialogues (ToolACE §4).

One shard sees every accepted dialogue (sorted by id, so the result does not depend on shard
order) and the dialogue signatures of earlier runs (`<root>/pool/dialogues`, the files that
existed when the run was planned). It

* rejects exact and near-duplicates (`duplicate_exact`, `duplicate_instruction`,
  `duplicate_dialogue`; MinHash LSH), within the run and against earlier runs;
* scores query complexity (1 − cosine between the query and the tools it uses, through the
  endpoint's `/v1/embeddings`) with easy / medium / hard levels by quantile;
* assigns the run's APIs to clusters of the whole pool (k-means centroids fitted once on every
  function of the pool and kept in `<root>/pool/clusters/`, :mod:`toolfactory.curation.pool_clusters`;
  `curate.clusters_scope: run` clusters the run's APIs alone) and records each dialogue's
  clusters, the coverage, and the low / medium / high diversity subsets it belongs to;
* optionally down-samples toward a target mode mix (`curate_mode_steering` for the rest).

Its output is the dataset: exports, retriever data and the report read it.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from toolfactory.curation import (
    DialogueIndex,
    cluster_apis,
    coverage,
    deduplicate,
    dialogue_clusters,
    diversity_subsets,
    offered_functions,
    query_complexity,
    signature_row,
    steer,
    subsets,
    turns,
)
from toolfactory.curation.pool_clusters import assign_clusters, pool_centroids
from toolfactory.models import Dialogue, Function, Tool
from toolfactory.stages.base import RECIPES, Planning, ShardContext, ShardSpec, StageOutput


def record_key(run_id: str, dialogue_id: str) -> str:
    """A dialogue's key in the signature pool (ids repeat between runs of one seed)."""
    return f"{run_id}/{dialogue_id}"


class CurateStage:
    name: ClassVar[str] = "curate"

    def plan(self, planning: Planning) -> list[ShardSpec]:
        accepted = planning.outputs("verify")
        # The whole pool's tools: earlier runs' files and this run's pool shard.
        pool_tools = [*planning.pool_tools, *planning.outputs("pool")]
        params = {"pool_dialogues": list(planning.pool_dialogues), "pool_tools": pool_tools}
        return [ShardSpec(self.name, 0, accepted, params)] if accepted else []

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        settings = ctx.config.curate
        dialogues = sorted((Dialogue.model_validate(r) for r in inputs), key=lambda d: d.id)
        out = StageOutput(items_in=len(dialogues))
        if settings.dedup:
            dialogues = self._deduplicate(dialogues, shard, ctx, out)
        if settings.mode_targets:
            kept = steer(dialogues, settings.mode_targets, ctx.config.run.seed or 0)
            chosen = {d.id for d in kept}
            for d in dialogues:
                if d.id not in chosen:
                    out.reject(self.name, d.id, ["curate_mode_steering"], d.model_dump(),
                               f"mode {d.mode} above its share of curate.mode_targets")
            dialogues = kept
        if dialogues:
            await self._score(dialogues, shard, ctx, out)
        out.records.extend(dialogues)
        for d in dialogues:
            out.count("modes", d.mode)
            out.count("turns", turns(d))
            out.count(RECIPES, d.recipe)
        return out

    def _deduplicate(self, dialogues: list[Dialogue], shard: ShardSpec, ctx: ShardContext, out: StageOutput) -> list[Dialogue]:
        settings = ctx.config.curate
        index = DialogueIndex(settings.dedup_threshold)
        for path in shard.params.get("pool_dialogues", []):
            for row in ctx.read(path):
                index.add_row(row)
        # A supplement shard (toolfactory/fan_in.py): the dataset's earlier parts come first.
        for path in shard.params.get("prior", []):
            for record in ctx.read(path):
                prior = Dialogue.model_validate(record)
                index.add_row(signature_row(record_key(ctx.run_id, prior.id), prior))
        found = deduplicate(((record_key(ctx.run_id, d.id), d) for d in dialogues), index)
        kept = []
        for d in dialogues:
            matches = [m for m in found.duplicates.get(record_key(ctx.run_id, d.id), []) if m.kind in settings.dedup_kinds]
            if matches:
                first = matches[0]
                out.reject(self.name, d.id, sorted({f"duplicate_{m.kind}" for m in matches}), d.model_dump(),
                           f"duplicates {first.key} ({first.kind}, similarity {first.similarity:.2f})")
                out.count("duplicates", first.kind)
            else:
                kept.append(d)
        return kept

    async def _pool_clusters(self, dialogues: list[Dialogue], shard: ShardSpec, ctx: ShardContext) -> tuple[dict[str, int], int]:
        """The run's functions assigned to the pool's clusters, and their number."""
        settings, model = ctx.config.curate, ctx.config.llm.embedding_model
        functions = offered_functions(dialogues)

        def whole_pool() -> list[Function]:  # read only when the pool has no centroids yet
            pool = [fn for path in shard.params.get("pool_tools", []) if ctx.store is not None
                    for r in ctx.read(path) for fn in Tool.model_validate(r).functions]
            return [*pool, *functions]

        centroids = await pool_centroids(ctx.store, whole_pool, ctx.gateway, model=model, k=settings.clusters,
                                         seed=ctx.config.run.seed or 0, run_id=ctx.run_id)
        if centroids is None:
            return {}, 1
        return await assign_clusters(functions, centroids, ctx.gateway), centroids.k

    async def _score(self, dialogues: list[Dialogue], shard: ShardSpec, ctx: ShardContext, out: StageOutput) -> None:
        settings, model, seed = ctx.config.curate, ctx.config.llm.embedding_model, ctx.config.run.seed or 0
        values = await query_complexity(dialogues, ctx.gateway, model)
        low, high = settings.complexity_quantiles
        levels = subsets(values, (low, high), keys=[d.id for d in dialogues])
        if settings.clusters_scope == "pool":
            clusters, k = await self._pool_clusters(dialogues, shard, ctx)
        else:
            clusters = await cluster_apis(offered_functions(dialogues), ctx.gateway, model, settings.clusters, seed)
            k = len(set(clusters.values())) or 1
        cluster_sets = [dialogue_clusters(d, clusters) for d in dialogues]
        subsets_of = diversity_subsets(cluster_sets, k, seed)
        for i, d in enumerate(dialogues):
            d.curation = {
                "complexity": None if math.isnan(values[i]) else round(values[i], 4),
                "complexity_level": levels[i],
                "clusters": sorted(cluster_sets[i]),
                "diversity": [level for level, members in subsets_of.items() if i in members],
            }
            out.count("complexity_levels", str(levels[i]))
        spread = coverage(cluster_sets, k)
        out.count("clusters", "k", k)
        out.count("clusters", "used", spread.used)
        for level, members in subsets_of.items():
            out.count("diversity_subsets", level, len(members))
