"""The run record: a run's own facts, kept in the run's folder of the storage root.

    runs/<run_id>/run.json

Its status, times, reason and message, config and versions, how many times it was executed, the
shards that did not complete (blocked or failed, with their error) and its stage totals. The
driver writes it from its stats database, whole or not at all like every object
(:mod:`toolfactory.storage`), when the run starts, after each group of stages and at the end.
With the shards' metric sidecars and the attempts' usage files it holds everything the stats
database holds, so any machine that reads the root can rebuild the stats
(:mod:`toolfactory.run.stats_sync`); the stage totals alone give the trend across runs.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Sequence

import duckdb

from toolfactory.run.stats import StatsDB
from toolfactory.storage import ObjectStore

FORMAT = 1
# The numbers of a stage the trend across runs shows: fields of its
# :class:`~toolfactory.run.summary.StageSummary`, and the keys of a record's `stages`.
STAGE_TOTALS = ("shards_total", "shards_failed", "items_in", "items_out", "rejected", "llm_calls", "prompt_tokens",
                "completion_tokens", "cost_usd")
# What a record must hold to be applied; the rest has defaults.
REQUIRED = ("run_id", "status", "started_at", "config", "shards", "stages")


def record_path(run_id: str) -> str:
    return f"runs/{run_id}/run.json"


def run_record(db: StatsDB, run_id: str, stage_order: Sequence[str]) -> dict[str, Any] | None:
    """The run's record as `db` knows it now; None when `db` does not know the run."""
    run, shards = db.run_facts(run_id)
    if run is None:
        return None
    summary = db.run_summary(run_id, tuple(stage_order))
    stages = [{"stage": s.stage, **{name: getattr(s, name) for name in STAGE_TOTALS}} for s in summary.stages]
    return {"format": FORMAT, **run, "shards": shards, "stages": stages,
            "written_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds")}


def write_run_record(store: ObjectStore, record: dict[str, Any]) -> str | None:
    """Write the record into the run's folder; the version of the object written (see
    :meth:`ObjectStore.version`)."""
    path = record_path(str(record["run_id"]))
    store.write_bytes(path, json.dumps(record, sort_keys=True, indent=1, default=str).encode())
    return store.version(path)


def publish_run_record(store: ObjectStore, db: StatsDB, run_id: str, stage_order: Sequence[str]) -> None:
    """Write the run's record from `db`, the database its driver writes, and note in `db` that it
    holds that version already (nothing of it is read back: :mod:`toolfactory.run.stats_sync`)."""
    record = run_record(db, run_id, stage_order)
    if record is None:
        return
    version = write_run_record(store, record)
    with db.transaction() as con:
        replace_stages(con, record)
        con.execute("INSERT OR REPLACE INTO storage_runs VALUES (?, ?, 'driver', ?)", [run_id, version, version])


def replace_stages(con: duckdb.DuckDBPyConnection, record: dict[str, Any]) -> None:
    """The run's stage totals in `run_stages`, as `record` states them."""
    con.execute("DELETE FROM run_stages WHERE run_id = ?", [record["run_id"]])
    for stage in record["stages"]:
        con.execute(f"INSERT INTO run_stages VALUES (?, ?, {', '.join('?' * len(STAGE_TOTALS))})",
                    [record["run_id"], stage["stage"], *(stage.get(name) for name in STAGE_TOTALS)])
