"""The select stage: the curate stage's run-wide decisions, from the measures alone (ToolACE §4).

One shard reads every measure shard (fan-in), record by record, into DuckDB tables on disk under one
memory limit (never the run's dialogues, nor its signatures in memory at once), plus the dialogue
signatures of earlier runs (`<root>/pool/dialogues`, the files that existed when the run was
planned). Every decision is relative to all the records it reads, so a selection made without some
measure parts is made again once they exist, never completed by another (toolfactory/run/fan_in.py).
It decides

* which records overlap an evaluation set (the findings of the measure stage,
  :mod:`toolfactory.curation.contamination`): rejected as ``contaminated_<set>`` before any other
  decision, so that none of them is kept as the first of its duplicates or counted in a subset;
* exact and near-duplicates (MinHash LSH as SQL, :mod:`toolfactory.curation.duplicate_pairs`):
  of duplicates the record indexed first is kept, earlier runs' first, then the run's by dialogue
  id (:mod:`toolfactory.curation.duplicate_rule`);
* mode steering toward `curate.mode_targets`, if set;
* the easy / medium / hard cut points of query complexity (by rank);
* the API clusters (the pool's k-means centroids, :mod:`toolfactory.curation.pool_clusters`, or
  the run's APIs alone with `curate.clusters_scope: run`) and the low / medium / high diversity
  subsets;

and writes them as a :class:`~toolfactory.curation.selection.Selection` and one
:class:`~toolfactory.curation.selection.Verdict` per rejected or sampled dialogue. The curate
stage applies them shard by shard.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any, ClassVar, Iterator, NamedTuple, Sequence

import pyarrow as pa

from toolfactory.curation import cluster_apis, coverage, diversity_subsets, duplicate_pairs, steer
from toolfactory.curation.contamination import Finding, Thresholds, checked, detail, evaluation_sets, reasons
from toolfactory.curation.duplicate_pairs import SignatureTable
from toolfactory.curation.duplicate_rule import first_kept
from toolfactory.curation.measures import Measure
from toolfactory.curation.pool_clusters import assign_clusters, function_texts, pool_centroids
from toolfactory.curation.selection import Selection, Verdict, cut_ranks, record_clusters
from toolfactory.models import Tool
from toolfactory.stages.base import DECIDE_AGAIN, FAN_IN, Inputs, Planning, ShardContext, ShardSpec, StageOutput, upstream_of

_BATCH = 5_000
log = logging.getLogger(__name__)


def record_key(run_id: str, dialogue_id: str) -> str:
    """A dialogue's key in the signature pool (ids repeat between runs of one seed)."""
    return f"{run_id}/{dialogue_id}"


class _Moded(NamedTuple):  # what steering reads of a record
    id: str
    mode: str


class _ClusterSets(Sequence[frozenset[int]]):
    """The cluster sets of the kept records by position, stored as indices into the few distinct sets."""

    def __init__(self) -> None:
        self.distinct: dict[frozenset[int], int] = {}
        self.sets: list[frozenset[int]] = []
        self.of: list[int] = []

    def append(self, clusters: frozenset[int]) -> None:
        if clusters not in self.distinct:
            self.distinct[clusters] = len(self.sets)
            self.sets.append(clusters)
        self.of.append(self.distinct[clusters])

    def __len__(self) -> int:
        return len(self.of)

    def __getitem__(self, i: int) -> frozenset[int]:  # type: ignore[override]
        return self.sets[self.of[i]]

    def __iter__(self) -> Iterator[frozenset[int]]:
        return (self.sets[s] for s in self.of)


class _MeasureTable:
    """id, complexity, mode and used functions of the run's records, in DuckDB on disk (the
    signatures go to the same database, so that one memory limit bounds the shard)."""

    def __init__(self) -> None:
        import duckdb

        self._folder = tempfile.TemporaryDirectory(prefix="toolfactory-select-")
        self.db = duckdb.connect(str(Path(self._folder.name) / "measures.duckdb"))
        self.limit = 0  # the step of MEMORY_LIMITS in force
        self.set_limit(0)
        self.db.execute("CREATE TABLE measures (id VARCHAR, complexity DOUBLE, mode VARCHAR, used VARCHAR[])")

    def set_limit(self, step: int) -> None:
        """DuckDB's memory limit: step i of :data:`.duplicate_pairs.MEMORY_LIMITS`."""
        self.limit = step
        self.db.execute(f"SET memory_limit = '{duplicate_pairs.MEMORY_LIMITS[step]}'")

    def add(self, rows: list[Measure]) -> None:
        batch = pa.table({"id": [m.id for m in rows], "complexity": [m.complexity for m in rows],
                          "mode": [m.mode for m in rows], "used": [m.used for m in rows]})
        self.db.register("batch", batch)
        self.db.execute("INSERT INTO measures SELECT id, complexity, mode, used FROM batch")
        self.db.unregister("batch")

    def drop(self, ids: Sequence[str]) -> None:
        if ids:
            self.db.register("dropped", pa.table({"id": list(ids)}))
            self.db.execute("DELETE FROM measures WHERE id IN (SELECT id FROM dropped)")
            self.db.unregister("dropped")

    def count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM measures").fetchone()[0])  # type: ignore[index]

    def close(self) -> None:
        self.db.close()
        self._folder.cleanup()


class SelectStage:
    name: ClassVar[str] = "select"
    streams_inputs: ClassVar[bool] = True
    # Its decisions are relative to the whole dataset: late measures have it decide again.
    inputs: ClassVar[Inputs] = Inputs("measure", FAN_IN, late=DECIDE_AGAIN)

    def plan(self, planning: Planning) -> list[ShardSpec]:
        measured = planning.outputs(upstream_of(self.inputs))
        # The whole pool's tools: earlier runs' files and this run's pool shard.
        pool_tools = [*planning.pool_tools, *planning.outputs("pool")]
        params = {"pool_dialogues": list(planning.pool_dialogues), "pool_tools": pool_tools}
        return [ShardSpec(self.name, 0, measured, params)] if measured else []

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        settings = ctx.config.curate
        out = StageOutput()
        verdicts: dict[str, Verdict] = {}
        measures = _MeasureTable()
        try:
            with SignatureTable(settings.dedup_threshold, db=measures.db) as signatures:  # one memory limit
                if settings.dedup:
                    self._index_earlier(shard, ctx, signatures)
                for batch in self._measures(shard.inputs, ctx):
                    out.items_in += len(batch)
                    batch = self._decontaminate(batch, verdicts)
                    if batch:
                        measures.add(batch)
                    if settings.dedup:
                        signatures.add_run(m.signature_row(record_key(ctx.run_id, m.id)) for m in batch)
                if settings.dedup:
                    self._deduplicate(signatures, measures, verdicts, ctx)
            if settings.mode_targets:
                self._steer(measures, verdicts, ctx)
            selection = await self._score(shard, measures, verdicts, ctx, out)
        finally:
            measures.close()
        if settings.decontaminate.enabled:  # what was checked: once per run, here
            sets = evaluation_sets(settings.decontaminate)
            for dimension, counts in checked(sets, Thresholds.of(settings.decontaminate)).items():
                for value, n in counts.items():
                    out.count(dimension, value, n)
        out.records.append(selection)
        out.records.extend(verdicts[key] for key in sorted(verdicts))
        # Its pass rate in the stats: the share of the measured dialogues the selection keeps.
        out.items_out = out.items_in - sum(1 for verdict in verdicts.values() if verdict.reasons)
        return out

    def _measures(self, paths: Sequence[str], ctx: ShardContext, skip: set[str] | None = None) -> Iterator[list[Measure]]:
        batch: list[Measure] = []
        for path in paths:
            for row in ctx.iter(path):
                if skip and row["id"] in skip:
                    continue
                batch.append(Measure.model_validate(row))
                if len(batch) == _BATCH:
                    yield batch
                    batch = []
        if batch:
            yield batch

    @staticmethod
    def _decontaminate(batch: list[Measure], verdicts: dict[str, Verdict]) -> list[Measure]:
        """The measures of `batch` that overlap no evaluation set; the others get their verdict."""
        clean = []
        for m in batch:
            if not m.contamination:
                clean.append(m)
                continue
            findings = [Finding(*f) for f in m.contamination]
            verdicts[m.id] = Verdict(id=m.id, reasons=reasons(findings), detail=detail(findings),
                                     contaminated=[f.label for f in findings])
        return clean

    def _index_earlier(self, shard: ShardSpec, ctx: ShardContext, signatures: SignatureTable) -> None:
        """Earlier runs' signatures."""
        for path in shard.params.get("pool_dialogues", []):
            signatures.index(ctx.iter(path))

    def _deduplicate(self, signatures: SignatureTable, measures: _MeasureTable, verdicts: dict[str, Verdict], ctx: ShardContext) -> None:
        import duckdb

        while True:  # the pairs are all read before anything is decided, so a retry starts afresh
            try:
                found = first_kept(signatures.pairs(), ctx.config.curate.dedup_kinds)
                break
            except duckdb.OutOfMemoryException:
                if measures.limit + 1 == len(duplicate_pairs.MEMORY_LIMITS):
                    raise
                measures.set_limit(measures.limit + 1)
                log.warning("select: the duplicate join ran out of DuckDB memory; again under %s",
                            duplicate_pairs.MEMORY_LIMITS[measures.limit])
        prefix = record_key(ctx.run_id, "")
        for key, matches in found.items():
            first = matches[0]
            dialogue_id = key.removeprefix(prefix)
            verdicts[dialogue_id] = Verdict(
                id=dialogue_id, reasons=sorted({f"duplicate_{m.kind}" for m in matches}), duplicate=first.kind,
                detail=f"duplicates {first.key} ({first.kind}, similarity {first.similarity:.2f})")
        measures.drop([v.id for v in verdicts.values()])

    def _steer(self, measures: _MeasureTable, verdicts: dict[str, Verdict], ctx: ShardContext) -> None:
        rows = [_Moded(*row) for row in measures.db.execute("SELECT id, mode FROM measures ORDER BY id").fetchall()]
        kept = {r.id for r in steer(rows, ctx.config.curate.mode_targets, ctx.config.run.seed or 0,  # type: ignore[arg-type]
                                    key=lambda r: r.mode)}  # type: ignore[attr-defined]
        dropped = [r for r in rows if r.id not in kept]
        for r in dropped:
            verdicts[r.id] = Verdict(id=r.id, reasons=["curate_mode_steering"],
                                     detail=f"mode {r.mode} above its share of curate.mode_targets")
        measures.drop([r.id for r in dropped])

    async def _score(self, shard: ShardSpec, measures: _MeasureTable, verdicts: dict[str, Verdict], ctx: ShardContext,
                     out: StageOutput) -> Selection:
        settings, model, seed = ctx.config.curate, ctx.config.llm.embedding_model, ctx.config.run.seed or 0
        measured = list(shard.inputs)
        if measures.count() == 0:
            return Selection(measured=measured, cuts=[None, None], clusters={}, k=1)
        finite = int(measures.db.execute("SELECT count(*) FROM measures WHERE complexity IS NOT NULL").fetchone()[0])  # type: ignore[index]
        cuts = []
        for rank in cut_ranks(finite, (settings.complexity_quantiles[0], settings.complexity_quantiles[1])):
            row = measures.db.execute("SELECT complexity, id FROM measures WHERE complexity IS NOT NULL "
                                      "ORDER BY complexity, id LIMIT 1 OFFSET ?", [rank]).fetchone() if rank < finite else None
            cuts.append(None if row is None else (float(row[0]), str(row[1])))
        functions = self._kept_functions(shard.inputs, ctx, {i for i, v in verdicts.items() if v.reasons})
        if settings.clusters_scope == "pool":
            clusters, k = await self._pool_clusters(functions, shard, ctx)
        else:
            clusters = await cluster_apis(functions, ctx.gateway, model, settings.clusters, seed)
            k = len(set(clusters.values())) or 1
        ids, sets = [], _ClusterSets()
        cursor = measures.db.execute("SELECT id, used FROM measures ORDER BY id")
        while chunk := cursor.fetchmany(_BATCH):
            for dialogue_id, used in chunk:
                ids.append(dialogue_id)
                sets.append(record_clusters(used, clusters))
        members = diversity_subsets(sets, k, seed)
        id_array = pa.array(ids)
        del ids
        for level, positions in members.items():
            for dialogue_id in id_array.take(pa.array(positions, type=pa.int64())).to_pylist():
                verdict = verdicts.setdefault(dialogue_id, Verdict(id=dialogue_id))
                verdict.diversity.append(level)
            out.count("diversity_subsets", level, len(positions))
        out.count("clusters", "k", k)
        out.count("clusters", "used", coverage(sets, k).used)
        return Selection(measured=measured, cuts=cuts, clusters=clusters, k=k)

    def _kept_functions(self, paths: Sequence[str], ctx: ShardContext, rejected: set[str]) -> dict[str, str]:
        """{key: text} of every function the kept records offer, sorted by key."""
        functions: dict[str, str] = {}
        for batch in self._measures(paths, ctx, skip=rejected):
            for m in batch:
                functions.update(m.functions)
        return {key: functions[key] for key in sorted(functions)}

    async def _pool_clusters(self, functions: dict[str, str], shard: ShardSpec, ctx: ShardContext) -> tuple[dict[str, int], int]:
        """The run's functions assigned to the pool's clusters, and their number."""
        settings, model = ctx.config.curate, ctx.config.llm.embedding_model

        def whole_pool() -> dict[str, str]:  # read only when the pool has no centroids yet
            pool = [fn for path in shard.params.get("pool_tools", []) if ctx.store is not None
                    for r in ctx.iter(path) for fn in Tool.model_validate(r).functions]
            return {**function_texts(pool), **functions}

        centroids = await pool_centroids(ctx.store, whole_pool, ctx.gateway, model=model, k=settings.clusters,
                                         seed=ctx.config.run.seed or 0, run_id=ctx.run_id)
        if centroids is None:
            return {}, 1
        return await assign_clusters(functions, centroids, ctx.gateway), centroids.k
