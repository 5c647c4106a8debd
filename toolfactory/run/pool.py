"""The tool pool in `<root>/pool/`: what every run adds to, night after night.

    pool/tools/<run_id>.parquet   the tools that run added (none already in the pool)
    pool/tree/<run_id>.parquet    the context-tree nodes that run added
    pool/dialogues/<run_id>.parquet  MinHash signatures of the dialogues that run kept (dedup)
    pool/<kind>/<run_id>.<k>.parquet what supplement shard k of a run added (toolfactory/run/fan_in.py)

Files are immutable and named by the run that wrote them; the pool is their union. A run plans
against the files that exist when it is planned (recorded in its shard plan), so its shards see
the same pool on a re-run, and a file is written whole (atomically) from the run's committed
shards, so a killed run leaves no partial file and publishing again writes the same bytes. Each
file's size and checksum are recorded beside it before it is written (``pool/<kind>/_sums/``,
:mod:`toolfactory.storage.checksums`); a file found damaged is left out of the runs planned after it
(:func:`pool_files`), and a re-run of the run that wrote it writes it again.
"""

from __future__ import annotations

import json

from toolfactory.storage.checksums import check_file, read_sum
from toolfactory.models import Dialogue, DomainNode, Tool
from toolfactory.storage.shards import ShardPaths, iter_records, read_ids, read_records, write_summed_rows
from toolfactory.storage import ObjectStore

TOOLS = "pool/tools"
TREE = "pool/tree"
DIALOGUES = "pool/dialogues"


def pool_files(store: ObjectStore, kind: str) -> tuple[str, ...]:
    """The pool's intact files of `kind` (TOOLS, TREE or DIALOGUES), in run order: a file whose
    size is not the one recorded, or that does not open, is left out (a later run must not break
    on it; :func:`toolfactory.run.integrity.pool_damage` names it)."""
    sizes = store.sizes(f"{kind}/")
    return tuple(
        path for path in sorted(sizes)
        if path.endswith(".parquet") and "/" not in path[len(kind) + 1:]
        and check_file(store, path, sizes[path], read_sum(store, path), checksums=False) is None
    )


def _name(kind: str, run_id: str, shard: ShardPaths) -> str:
    """One file per shard that adds to the pool: shard 0 is the run's, a supplement has its own."""
    return f"{kind}/{run_id}.parquet" if shard.index == 0 else f"{kind}/{run_id}.{shard.index}.parquet"


def publish(store: ObjectStore, run_id: str, pool_shard: ShardPaths, domain_shards: list[ShardPaths]) -> dict[str, int]:
    """Add a run's new tools and tree nodes to the pool (idempotent); how many of each."""
    added = {"tools": 0, "nodes": 0}
    if store.exists(pool_shard.main):
        new = [r for r in read_records(store, pool_shard.main) if Tool.model_validate(r).provenance.get("pool") == "new"]
        write_summed_rows(store, _name(TOOLS, run_id, pool_shard), [(r["id"], _pooled(r, run_id)) for r in new])
        added["tools"] = len(new)
    nodes = [r for paths in domain_shards if store.exists(paths.main) for r in read_records(store, paths.main)]
    if nodes:
        write_summed_rows(store, f"{TREE}/{run_id}.parquet", [(r["id"], DomainNode.model_validate(r).to_json()) for r in nodes])
        added["nodes"] = len(nodes)
    return added


def publish_dialogues(store: ObjectStore, run_id: str, dataset_shard: ShardPaths, measure_shard: ShardPaths) -> int:
    """Add the signatures of a run's dataset to the pool (idempotent); how many.

    They are the measure stage's, of the dialogues the dataset part kept: computed once, in the
    shard that measured them. A dataset part without its measure part (a run made before the
    measure stage existed) has them computed from its dialogues."""
    from toolfactory.curation import signature_row
    from toolfactory.curation.measures import Measure
    from toolfactory.stages.curate.stage import record_key

    if not store.exists(dataset_shard.main):
        return 0
    if store.exists(measure_shard.main):
        kept = set(read_ids(store, dataset_shard.main))
        rows = [Measure.model_validate(r).signature_row(record_key(run_id, r["id"]))
                for r in iter_records(store, measure_shard.main) if r["id"] in kept]
    else:
        rows = [signature_row(record_key(run_id, r["id"]), Dialogue.model_validate(r))
                for r in iter_records(store, dataset_shard.main)]
    write_summed_rows(store, _name(DIALOGUES, run_id, dataset_shard), [(row["key"], json.dumps(row)) for row in rows])
    return len(rows)


def _pooled(record: dict[str, object], run_id: str) -> str:
    tool = Tool.model_validate(record)
    tool.provenance = {**tool.provenance, "pool": "known", "pool_run": run_id}
    return tool.to_json()
