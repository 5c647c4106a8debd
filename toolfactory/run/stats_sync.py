"""The stats database as a cache of the storage root.

The storage root is the record of every run: its run record (:mod:`toolfactory.run.record`), the
metrics sidecar of each committed shard and the usage file of each attempt
(docs/architecture.md §3). A local DuckDB file holds what was read of them, and is brought up to
date from the root before it is read:

- every run's record, when its version (S3: its ETag; local: size and time of last write)
  differs from the one read last: one request per run, one read per run that changed (`runs`,
  `run_stages`, the shards that did not complete);
- a run's shard detail when it is asked for (`toolfactory stats RUN`, a run's report): one
  listing of the run's folder, then a read of each sidecar and usage file that is new or has a
  new version (`shards`, `rejections`, `profiles`, `shard_attempts`, …). A finished run whose
  record has not changed since is not listed again.

What the cache has read is kept in it (`storage_runs`, `storage_files`): a deleted cache is
rebuilt, a stale one (runs, run records or sidecars written elsewhere) brought up to date, and
nothing is read twice. A file that cannot be read (empty, cut short, fields missing) is skipped
with a reason code in `storage_problems` and read again once it changes; nothing stops. Runs whose
driver writes this very file (`storage_runs.source` 'driver') are left to it, so the driver stays
the only writer of its run's rows.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Sequence, TypeVar

import duckdb

from toolfactory.run.attempts import INTERRUPTED, RUNNING
from toolfactory.run.manifest import manifest_path
from toolfactory.run.metrics import AttemptUsage, ShardMetrics
from toolfactory.run.record import REQUIRED, STAGE_TOTALS, record_path, replace_stages
from toolfactory.stages import STAGE_NAMES
from toolfactory.run.stats import StatsDB
from toolfactory.run.stats.schema import timestamp as _timestamp
from toolfactory.errors import ToolfactoryError
from toolfactory.storage import ObjectStore

T = TypeVar("T")
R = TypeVar("R")
# Requests in flight at once against S3: one run's record, sidecar or usage file each.
_PARALLEL = 16
_SHARD_KEYS = ("attempt_id", "run_id", "stage", "shard", "started_at", "finished_at")
_METRICS = (*_SHARD_KEYS, "fingerprint", "wall_s", "items_in", "items_out", "rejected")
_USAGE = (*_SHARD_KEYS, "outcome", "llm")
_SHARD_TABLES = ("shards", "rejections", "layer_metrics", "profiles", "shard_inputs")


@dataclass(frozen=True)
class Problem:
    """A file of the root the stats skipped, with why (`<kind>_empty`, `<kind>_invalid_json`,
    `<kind>_invalid_fields`; kind: run_record, metrics, usage)."""

    path: str
    run_id: str
    reason: str
    detail: str


@dataclass(frozen=True)
class Synced:
    run_id: str | None  # the run asked for, or the latest one
    problems: tuple[Problem, ...]  # files skipped: the run's own, and run records of any run


class Unreadable(ToolfactoryError, ValueError):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason, detail)
        self.reason, self.detail = reason, detail


def sync_stats(store: ObjectStore, db: StatsDB, run_id: str | None = None) -> Synced:
    """Bring `db` up to date with `store`: every run's record, and the detail of `run_id` (None:
    of the latest run)."""
    _sync_records(store, db)
    run_id = run_id or db.latest_run_id()
    if run_id is not None:
        _sync_detail(store, db, run_id)
    return Synced(run_id, problems(db, run_id))


def problems(db: StatsDB, run_id: str | None) -> tuple[Problem, ...]:
    if not db.path.is_file():
        return ()
    with db.transaction() as con:
        rows = con.execute("""SELECT path, run_id, reason, detail FROM storage_problems
                              WHERE run_id = ? OR path LIKE '%/run.json' ORDER BY path""", [run_id]).fetchall()
    # A cache written by an earlier version holds the stored inputs' sidecars as unreadable shard
    # metrics; they are no problem of the stats, and are never read again (their version is kept).
    return tuple(Problem(*row) for row in rows if _stage_file(row[0]))


def _stage_file(path: str) -> bool:
    """Whether `path` is a run record, or a file of a stage's shard (a sidecar, a usage file)."""
    parts = path.split("/")
    return len(parts) < 4 or parts[-1] == "run.json" or parts[2] in STAGE_NAMES


# --- run records --------------------------------------------------------------------------


def _sync_records(store: ObjectStore, db: StatsDB) -> None:
    run_ids = store.folders("runs")
    if not run_ids:
        return
    versions = _each(store, run_ids, lambda run_id: store.version(record_path(run_id)))
    with db.transaction() as con:
        known = dict(con.execute("SELECT run_id, record_version FROM storage_runs").fetchall())
    changed = [(run_id, version) for run_id, version in zip(run_ids, versions)
               if version is not None and known.get(run_id) != version]
    if not changed:
        return
    texts = _each(store, changed, lambda item: store.read_bytes_or_none(record_path(item[0])))
    with db.transaction() as con:
        for (run_id, version), data in zip(changed, texts):
            path = record_path(run_id)
            try:
                record = _checked_record(parse_json(data, "run_record", REQUIRED), run_id)
            except Unreadable as exc:
                _note_problem(con, path, run_id, exc, version)
                con.execute("""INSERT INTO storage_runs VALUES (?, ?, 'storage', NULL) ON CONFLICT (run_id)
                               DO UPDATE SET record_version = excluded.record_version, source = 'storage'""", [run_id, version])
                continue
            _apply_record(con, record, store.url)
            con.execute("""INSERT INTO storage_runs VALUES (?, ?, 'storage', NULL) ON CONFLICT (run_id)
                           DO UPDATE SET record_version = excluded.record_version, source = 'storage'""", [run_id, version])
            con.execute("DELETE FROM storage_problems WHERE path = ?", [path])


def _apply_record(con: duckdb.DuckDBPyConnection, record: dict[str, Any], storage: str) -> None:
    """The run's row, its stage totals and its shards that did not complete, as the record says.
    `storage` is this root as the reader names it (a local root may be mounted elsewhere)."""
    con.execute(
        """INSERT OR REPLACE INTO runs (run_id, created_at, started_at, finished_at, status, storage, config, versions,
                                        attempts, reason, message, made_by, simulated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [record["run_id"], _timestamp(record.get("created_at")), _timestamp(record["started_at"]),
         _timestamp(record.get("finished_at")), record["status"], storage, json.dumps(record["config"]),
         json.dumps(record.get("versions") or {}), int(record.get("attempts") or 1), record.get("reason"),
         record.get("message"), record.get("made_by"), record.get("simulated")])
    replace_stages(con, record)
    con.execute("DELETE FROM shards WHERE run_id = ? AND status <> 'completed'", [record["run_id"]])
    for shard in record["shards"]:
        con.execute(
            "INSERT OR REPLACE INTO shards (run_id, stage, shard, status, attempts, error, fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [record["run_id"], shard["stage"], int(shard["shard"]), shard["status"], int(shard.get("attempts") or 0),
             shard.get("error"), shard.get("fingerprint")])


def _checked_record(record: dict[str, Any], run_id: str) -> dict[str, Any]:
    try:
        if record["run_id"] != run_id:
            raise ValueError(f"run_id {record['run_id']!r} in the folder of run {run_id!r}")
        for name in ("created_at", "started_at", "finished_at"):
            _timestamp(record.get(name))
        if not isinstance(record["config"], dict):
            raise ValueError("config is not an object")
        for shard in record["shards"]:
            int(shard["shard"]), str(shard["stage"]), str(shard["status"])
        for stage in record["stages"]:
            str(stage["stage"])
            for name in STAGE_TOTALS:
                if not isinstance(stage.get(name), (int, float, type(None))) or isinstance(stage.get(name), bool):
                    raise ValueError(f"{stage['stage']}.{name} is not a number")
    except (KeyError, TypeError, ValueError) as exc:
        raise Unreadable("run_record_invalid_fields", f"{type(exc).__name__}: {exc}") from None
    return record


# --- shard detail -------------------------------------------------------------------------


def _sync_detail(store: ObjectStore, db: StatsDB, run_id: str) -> None:
    state = row = None
    if db.path.is_file():  # else nothing is written unless the store holds the run
        with db.transaction() as con:
            state = con.execute("SELECT record_version, source, detail_version FROM storage_runs WHERE run_id = ?",
                                [run_id]).fetchone()
            row = con.execute("SELECT status FROM runs WHERE run_id = ?", [run_id]).fetchone()
    if state is None and row is not None:
        return  # recorded in this file by its driver before runs kept a record: nothing to read
    if state is not None:
        record_version, source, detail_version = state
        if record_version is not None and detail_version == record_version and (source == "driver" or row is None
                                                                                 or row[0] != "running"):
            return  # read since its record last changed, and finished (or its driver writes here)
    files = store.versions(f"runs/{run_id}/")
    if not files:
        return
    prefix = re.escape(f"runs/{run_id}/")
    main = re.compile(rf"{prefix}([^/]+)/part-(\d+)\.parquet")
    sidecar = re.compile(rf"{prefix}([^/]+)/_metrics/part-(\d+)\.json")
    usage = re.compile(rf"{prefix}([^/]+)/_usage/part-\d+/[0-9a-f]+\.json")
    committed = {(m[1], int(m[2])) for path in files if (m := main.fullmatch(path))}
    with db.transaction() as con:
        seen = dict(con.execute("SELECT path, version FROM storage_files WHERE run_id = ?", [run_id]).fetchall())
    # Only a stage shard's sidecar holds shard metrics: the run's stored inputs (sources,
    # documents) have sidecars of another shape, written when the run was planned.
    wanted = [path for path, version in sorted(files.items()) if seen.get(path) != version and (
        usage.fullmatch(path) or ((m := sidecar.fullmatch(path)) and m[1] in STAGE_NAMES and (m[1], int(m[2])) in committed))]
    texts = _each(store, wanted, store.read_bytes_or_none)
    # A run with stage shards' sidecars and no record was written before runs kept one; a run that
    # is just starting has neither: its driver records it.
    legacy = _legacy_run(store, run_id, committed) if (state is None or state[0] is None) and any(
        (m := sidecar.fullmatch(path)) and m[1] in STAGE_NAMES for path in files) else None
    with db.transaction() as con:
        if legacy is not None:
            _apply_record(con, legacy, store.url)
        _forget_uncommitted(con, run_id, committed)
        usage_files: list[AttemptUsage] = []
        for path, data in zip(wanted, texts):
            kind = "usage" if usage.fullmatch(path) else "metrics"
            try:
                item = _checked_shard_file(parse_json(data, kind, _USAGE if kind == "usage" else _METRICS), kind)
            except Unreadable as exc:
                _note_problem(con, path, run_id, exc, files[path])
                continue
            if isinstance(item, ShardMetrics):
                StatsDB.insert_shard(con, item, item.attempts or 1)
            else:
                usage_files.append(item)
            _note_read(con, path, run_id, files[path])
        for attempt in usage_files:  # after the sidecars: a completed attempt's own report wins
            known = con.execute("SELECT outcome FROM shard_attempts WHERE attempt_id = ?", [attempt.attempt_id]).fetchone()
            if known is None or known[0] != "completed":
                StatsDB.insert_attempt(con, attempt, INTERRUPTED if attempt.outcome == RUNNING else attempt.outcome)
        version = state[0] if state is not None and state[0] is not None else None
        con.execute("""INSERT INTO storage_runs VALUES (?, ?, 'storage', ?) ON CONFLICT (run_id)
                       DO UPDATE SET detail_version = excluded.detail_version, source = 'storage'""",
                    [run_id, version, version])


def _forget_uncommitted(con: duckdb.DuckDBPyConnection, run_id: str, committed: set[tuple[str, int]]) -> None:
    """Completed shards whose main part is no longer in storage (deleted to be run again) are
    forgotten, and their sidecar is read again when they are committed anew."""
    for stage, shard in con.execute("SELECT stage, shard FROM shards WHERE run_id = ? AND status = 'completed'",
                                    [run_id]).fetchall():
        if (stage, shard) not in committed:
            for table in _SHARD_TABLES:
                con.execute(f"DELETE FROM {table} WHERE run_id = ? AND stage = ? AND shard = ?", [run_id, stage, shard])
            con.execute("DELETE FROM storage_files WHERE path = ?", [f"runs/{run_id}/{stage}/_metrics/part-{shard:05d}.json"])


def _legacy_run(store: ObjectStore, run_id: str, committed: set[tuple[str, int]]) -> dict[str, Any] | None:
    """A run written before runs kept a record, from its manifest: completed when every planned
    shard is committed, failed otherwise (the shards missing are named)."""
    data = store.read_bytes_or_none(manifest_path(run_id))
    try:
        manifest = parse_json(data, "manifest", ("run_id", "created_at", "config", "plan"))
        planned = [(stage, int(spec["index"])) for stage, specs in manifest["plan"].items() for spec in specs]
    except (Unreadable, KeyError, TypeError, ValueError, AttributeError):
        return None
    missing = [(stage, index) for stage, index in planned if (stage, index) not in committed]
    return {
        "run_id": run_id, "created_at": manifest["created_at"], "started_at": manifest["created_at"],
        "status": "failed" if missing else "completed", "config": manifest["config"],
        "versions": manifest.get("versions") or {}, "attempts": 1, "stages": [],
        "shards": [{"stage": stage, "shard": index, "status": "failed", "error": "not committed"} for stage, index in missing],
    }


def _checked_shard_file(item: dict[str, Any], kind: str) -> ShardMetrics | AttemptUsage:
    """A sidecar (kind `metrics`) or usage file whose fields have the types the stats store, read
    into its record (else Unreadable, naming the field)."""
    try:
        for name in ("shard", *(("items_in", "items_out", "rejected") if kind == "metrics" else ())):
            if not isinstance(item[name], int) or isinstance(item[name], bool):
                raise TypeError(f"{name} is not an integer")
        for name in ("started_at", "finished_at"):
            datetime.fromisoformat(str(item[name]))
        for name in ("llm", "llm_by_role", "rejections", "layers", "profile"):
            if not isinstance(item.get(name, {}), dict):
                raise TypeError(f"{name} is not an object")
        for counts in item.get("profile", {}).values():
            if not isinstance(counts, dict) or not all(isinstance(n, int) for n in counts.values()):
                raise TypeError("a profile dimension is not counts")
        if not all(isinstance(n, int) for n in item.get("rejections", {}).values()):
            raise TypeError("a rejection count is not an integer")
        for layer in item.get("layers", {}).values():
            items_in, passed = layer
            int(items_in), int(passed)
        for usage in item.get("llm_by_role", {}).values():
            for name in ("calls", "cache_hits", "retries", "reasks", "prompt_tokens", "completion_tokens", "latency_s", "failures"):
                usage[name]
        # a ValidationError is a ValueError: a field of a type the record does not take
        return ShardMetrics.from_dict(item) if kind == "metrics" else AttemptUsage.from_dict(item)
    except (KeyError, TypeError, ValueError) as exc:
        raise Unreadable(f"{kind}_invalid_fields", f"{type(exc).__name__}: {' '.join(str(exc).split())}") from None


# --- reading files ------------------------------------------------------------------------


def parse_json(data: bytes | None, kind: str, required: Sequence[str]) -> dict[str, Any]:
    """A JSON object read from storage, or :class:`Unreadable` with a reason code."""
    if data is None:
        raise Unreadable(f"{kind}_missing", "the file was deleted while it was read")
    if not data.strip():
        raise Unreadable(f"{kind}_empty", "the file is empty")
    try:
        value = json.loads(data)
    except ValueError as exc:  # also a UnicodeDecodeError
        raise Unreadable(f"{kind}_invalid_json", str(exc)[:200]) from None
    if not isinstance(value, dict):
        raise Unreadable(f"{kind}_invalid_fields", "not a JSON object")
    missing = [name for name in required if name not in value]
    if missing:
        raise Unreadable(f"{kind}_invalid_fields", f"missing {', '.join(missing)}")
    return value


def _note_problem(con: duckdb.DuckDBPyConnection, path: str, run_id: str, exc: Unreadable, version: str | None) -> None:
    con.execute("INSERT OR REPLACE INTO storage_problems VALUES (?, ?, ?, ?)", [path, run_id, exc.reason, exc.detail])
    if version is not None:  # read again only once it changes
        con.execute("INSERT OR REPLACE INTO storage_files VALUES (?, ?, ?)", [path, run_id, version])


def _note_read(con: duckdb.DuckDBPyConnection, path: str, run_id: str, version: str) -> None:
    con.execute("INSERT OR REPLACE INTO storage_files VALUES (?, ?, ?)", [path, run_id, version])
    con.execute("DELETE FROM storage_problems WHERE path = ?", [path])


def _each(store: ObjectStore, items: Sequence[T], work: Callable[[T], R]) -> list[R]:
    """`work` on every item; on S3 several requests at once (each is a round trip)."""
    if store.s3 is None or len(items) < 2:
        return [work(item) for item in items]
    # The first alone: it creates the process's S3 client, which threads may not do at once.
    first = work(items[0])
    with ThreadPoolExecutor(min(_PARALLEL, len(items) - 1)) as pool:
        return [first, *pool.map(work, items[1:])]
