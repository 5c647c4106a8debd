"""The stats database (DuckDB): runs, shard status and per-stage, per-rule metrics.

Workers return metrics; during a run its flow is the only writer of the run's rows. Each write
(or short burst of them, :meth:`StatsDB.burst`) opens the file, writes and closes it, so
`toolfactory stats` can read while a run goes on. Everything in it is derived from the storage
root (run records, shard metrics sidecars, attempt usage files): the file is a local cache,
rebuilt or brought up to date from the root by :mod:`toolfactory.run.stats_sync` wherever it is
read.

Times are ``TIMESTAMP`` columns in UTC, so a run's wall time, a stage's span or a trend over
nights is one query (``finished_at - started_at``). Files written before that kept them as ISO
text: the first write to such a file converts those columns in place (:func:`_migrate`), and
the readers cast, so an older file also opens read-only.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

import duckdb
from tenacity import retry, retry_if_exception, stop_after_delay, wait_random

from toolfactory.stages.base import CALLS_BY_RECIPE, RECIPES

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, created_at TIMESTAMP, started_at TIMESTAMP, finished_at TIMESTAMP,
    status VARCHAR, storage VARCHAR, config JSON, versions JSON, attempts INTEGER
);
-- Why a run failed when it is not a missing shard: an endpoint refusal, a floor not reached.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS reason VARCHAR;
-- Who made the data, as the endpoint identified itself (toolfactory/llm/identity.py).
ALTER TABLE runs ADD COLUMN IF NOT EXISTS made_by VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS simulated BOOLEAN;
-- The latest state of each shard.
CREATE TABLE IF NOT EXISTS shards (
    run_id VARCHAR, stage VARCHAR, shard INTEGER, status VARCHAR, attempts INTEGER, error VARCHAR,
    fingerprint VARCHAR, started_at TIMESTAMP, finished_at TIMESTAMP, wall_s DOUBLE,
    items_in INTEGER, items_out INTEGER, rejected INTEGER,
    PRIMARY KEY (run_id, stage, shard)
);
-- Checks in layers within a stage (verify: rules, then model): records in and passed.
CREATE TABLE IF NOT EXISTS layer_metrics (
    run_id VARCHAR, stage VARCHAR, shard INTEGER, layer VARCHAR, items_in INTEGER, passed INTEGER,
    PRIMARY KEY (run_id, stage, shard, layer)
);
-- What a shard's output is made of (tools by source, parameter types, modes, …).
CREATE TABLE IF NOT EXISTS profiles (
    run_id VARCHAR, stage VARCHAR, shard INTEGER, dimension VARCHAR, value VARCHAR, count BIGINT,
    PRIMARY KEY (run_id, stage, shard, dimension, value)
);
-- The input files of each shard: read, or missing when a fan-in shard proceeded without them.
CREATE TABLE IF NOT EXISTS shard_inputs (
    run_id VARCHAR, stage VARCHAR, shard INTEGER, input VARCHAR, read BOOLEAN,
    PRIMARY KEY (run_id, stage, shard, input)
);
CREATE TABLE IF NOT EXISTS rejections (
    run_id VARCHAR, stage VARCHAR, shard INTEGER, reason VARCHAR, count INTEGER,
    PRIMARY KEY (run_id, stage, shard, reason)
);
-- Every executed attempt that reported its LLM use, completed or not: what a run has spent.
CREATE TABLE IF NOT EXISTS shard_attempts (
    attempt_id VARCHAR PRIMARY KEY, run_id VARCHAR, stage VARCHAR, shard INTEGER, outcome VARCHAR,
    started_at TIMESTAMP, finished_at TIMESTAMP, llm_calls INTEGER, cache_hits INTEGER, retries INTEGER,
    reasks INTEGER, prompt_tokens BIGINT, completion_tokens BIGINT, llm_latency_s DOUBLE
);
CREATE TABLE IF NOT EXISTS llm_usage (
    attempt_id VARCHAR, run_id VARCHAR, stage VARCHAR, shard INTEGER, role VARCHAR, calls INTEGER,
    cache_hits INTEGER, retries INTEGER, reasks INTEGER, prompt_tokens BIGINT,
    completion_tokens BIGINT, latency_s DOUBLE, failures JSON,
    PRIMARY KEY (attempt_id, role)
);
-- Added after the tables above: ALTER keeps databases written before them readable.
-- Cost in USD from the configured prices; NULL where a role that used tokens has no price.
ALTER TABLE shard_attempts ADD COLUMN IF NOT EXISTS cost_usd DOUBLE;
ALTER TABLE llm_usage ADD COLUMN IF NOT EXISTS cost_usd DOUBLE;
-- Of the prompt tokens, those the endpoint served from its prompt cache (NULL: recorded before
-- they were counted), billed at the role's cached price.
ALTER TABLE shard_attempts ADD COLUMN IF NOT EXISTS cached_prompt_tokens BIGINT;
ALTER TABLE llm_usage ADD COLUMN IF NOT EXISTS cached_prompt_tokens BIGINT;
-- Why a run that did not complete stopped (e.g. its LLM budget), in the operator's words.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS message VARCHAR;
-- A run's stage totals as its run record in storage states them (toolfactory/run/record.py):
-- the trend across runs reads them, so a cache needs no shard detail of every run it lists.
CREATE TABLE IF NOT EXISTS run_stages (
    run_id VARCHAR, stage VARCHAR, shards_total INTEGER, shards_failed INTEGER, items_in BIGINT,
    items_out BIGINT, rejected BIGINT, llm_calls BIGINT, prompt_tokens BIGINT, completion_tokens BIGINT,
    cost_usd DOUBLE, PRIMARY KEY (run_id, stage)
);
-- What this file has read of the storage root (toolfactory/run/stats_sync.py): the version of each
-- run record, and of each sidecar, so that only what changed is read again; `source` 'driver'
-- when the run's own driver wrote the record from this file.
CREATE TABLE IF NOT EXISTS storage_runs (
    run_id VARCHAR PRIMARY KEY, record_version VARCHAR, source VARCHAR, detail_version VARCHAR
);
CREATE TABLE IF NOT EXISTS storage_files (path VARCHAR PRIMARY KEY, run_id VARCHAR, version VARCHAR);
-- Files of the root that could not be read (empty, not JSON, fields missing), with a reason code.
CREATE TABLE IF NOT EXISTS storage_problems (path VARCHAR PRIMARY KEY, run_id VARCHAR, reason VARCHAR, detail VARCHAR);
CREATE OR REPLACE VIEW stage_metrics AS
WITH usage AS (
    SELECT run_id, stage, sum(llm_calls) AS llm_calls, sum(cache_hits) AS cache_hits,
           sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,
           sum(coalesce(cached_prompt_tokens, 0)) AS cached_prompt_tokens,
           -- unknown (NULL) as soon as one attempt's cost is: an unpriced model never looks free
           CASE WHEN bool_or(cost_usd IS NULL) THEN NULL ELSE sum(cost_usd) END AS cost_usd
    FROM shard_attempts GROUP BY run_id, stage
)
SELECT s.run_id, s.stage,
       count(*) AS shards_total,
       count(*) FILTER (WHERE s.status = 'completed') AS shards_completed,
       count(*) FILTER (WHERE s.status IN ('failed', 'blocked')) AS shards_failed,
       coalesce(sum(s.items_in), 0) AS items_in,
       coalesce(sum(s.items_out), 0) AS items_out,
       coalesce(sum(s.rejected), 0) AS rejected,
       coalesce(any_value(u.llm_calls), 0) AS llm_calls,
       coalesce(any_value(u.cache_hits), 0) AS cache_hits,
       coalesce(any_value(u.prompt_tokens), 0) AS prompt_tokens,
       coalesce(any_value(u.completion_tokens), 0) AS completion_tokens,
       coalesce(any_value(u.cached_prompt_tokens), 0) AS cached_prompt_tokens,
       CASE WHEN any_value(u.llm_calls) IS NULL THEN 0.0 ELSE any_value(u.cost_usd) END AS cost_usd,
       coalesce(sum(s.wall_s), 0) AS wall_s
FROM shards s LEFT JOIN usage u USING (run_id, stage)
GROUP BY s.run_id, s.stage;
"""


# Columns that hold times (UTC): typed TIMESTAMP, ISO text in files from before.
TIMESTAMPS: dict[str, tuple[str, ...]] = {
    "runs": ("created_at", "started_at", "finished_at"),
    "shards": ("started_at", "finished_at"),
    "shard_attempts": ("started_at", "finished_at"),
}


def _timestamp(value: str | datetime | None) -> datetime | None:
    """An ISO time (any offset) as the naive UTC datetime a TIMESTAMP column holds."""
    if value is None or value == "":
        return None
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment


def iso_time(value: Any) -> str | None:
    """A time read back (a datetime, or text from an older file) as ISO text in UTC."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=timezone.utc).isoformat(timespec="milliseconds")
    return str(value)


def _ts(column: str) -> str:
    """SQL for a time column read as TIMESTAMP whether the file is migrated or not (the text of
    older files is UTC)."""
    return f"TRY_CAST({column} AS TIMESTAMP)"


def _migrate(con: duckdb.DuckDBPyConnection) -> None:
    """Turn the text time columns of an older file into TIMESTAMP (UTC), once."""
    for table, columns in TIMESTAMPS.items():
        for column in columns:
            row = con.execute(
                "SELECT data_type FROM information_schema.columns WHERE table_catalog = current_database() "
                "AND table_name = ? AND column_name = ?", [table, column]
            ).fetchone()
            if row is not None and row[0] == "VARCHAR":
                # The text is ISO 8601 with an offset (``+00:00``): read it as a zoned time, keep UTC.
                con.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE TIMESTAMP "
                            f"USING (TRY_CAST({column} AS TIMESTAMPTZ) AT TIME ZONE 'UTC')")


# Profile dimensions named `*_uses` count uses per item (a tool id, an API): the summary gives how
# many distinct items were used and how often, the coverage; the table keeps every item.
USES = "_uses"


# The file is attached to one in-memory DuckDB of this process, not opened as a DuckDB of its own:
# a new DuckDB costs about 15 ms of CPU whatever it opens (it registers every built-in function).
# Measured side by side on a small stats file: an open, a statement and a close took 17 ms as a
# DuckDB of its own, 3 ms as an attachment. DETACH closes the file as closing its own DuckDB did:
# checkpointed, and its lock released for other processes. A forked child makes its own.
_HOST: tuple[int, duckdb.DuckDBPyConnection] | None = None
_HOST_GUARD = threading.Lock()
_NAMES = itertools.count()


def _host() -> duckdb.DuckDBPyConnection:
    global _HOST
    with _HOST_GUARD:
        if _HOST is None or _HOST[0] != os.getpid():
            _HOST = (os.getpid(), duckdb.connect(":memory:"))
        return _HOST[1]


@retry(
    retry=retry_if_exception(lambda exc: isinstance(exc, duckdb.IOException) and "lock" in str(exc)),
    wait=wait_random(0.05, 0.25),
    stop=stop_after_delay(30),
    reraise=True,
)
def _attach(con: duckdb.DuckDBPyConnection, path: Path, name: str, read_only: bool) -> None:
    """Attach the file, waiting while another process holds it (the flow writes in short bursts)."""
    quoted = str(path).replace("'", "''")
    con.execute(f"ATTACH '{quoted}' AS {name}" + (" (READ_ONLY)" if read_only else ""))


@contextmanager
def _open(path: Path, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection whose default database is the file, attached until the block ends. The caller
    holds the file's lock, and reads and writes nested in a burst use the burst's connection, so
    a file is attached once at a time."""
    con = _host().cursor()
    name = f"stats_{next(_NAMES)}"
    try:
        _attach(con, path, name, read_only)
        try:
            con.execute(f"USE {name}")
            yield con
        finally:
            con.execute("USE memory")
            con.execute(f"DETACH {name}")
    finally:
        con.close()


def per_accepted(stages: list[dict[str, Any]]) -> dict[str, Any]:
    """LLM calls and tokens per dialogue of the dataset, per stage and per recipe.

    `stages` are a run's stage summaries in run order; the last one's output is the dataset (so
    a stage that spends calls on records later stages reject has them charged to the kept
    ones: the cost of a kept record). Per recipe, the calls the stages attribute to the records
    of that recipe (:data:`CALLS_BY_RECIPE`) over the recipe's records in the dataset."""
    if not stages:
        return {"accepted": 0, "llm_calls": None, "tokens": None, "by_stage": {}, "by_recipe": {}}
    accepted = int(stages[-1]["items_out"])

    def ratio(n: float) -> float | None:
        return round(n / accepted, 2) if accepted else None

    by_stage = {
        s["stage"]: {"llm_calls": ratio(s["llm_calls"]), "tokens": ratio(s["prompt_tokens"] + s["completion_tokens"])}
        for s in stages if s["llm_calls"] or s["prompt_tokens"] or s["completion_tokens"]
    }
    kept = stages[-1]["profile"].get(RECIPES, {})
    calls: dict[str, int] = {}
    for s in stages:
        for recipe, n in s["profile"].get(CALLS_BY_RECIPE, {}).items():
            calls[recipe] = calls.get(recipe, 0) + int(n)
    by_recipe = {
        recipe: {"accepted": int(kept.get(recipe, 0)), "llm_calls": n,
                 "llm_calls_per_accepted": round(n / kept[recipe], 2) if kept.get(recipe) else None}
        for recipe, n in sorted(calls.items())
    }
    return {
        "accepted": accepted,
        "llm_calls": ratio(sum(s["llm_calls"] for s in stages)),
        "tokens": ratio(sum(s["prompt_tokens"] + s["completion_tokens"] for s in stages)),
        "by_stage": by_stage,
        "by_recipe": by_recipe,
    }


# One connection per file at a time in a process: the stage flows of a run that run at once (in
# threads) write to one file, and a second connection of the same process would conflict with
# the first (a write-write conflict on the schema, or a read-only open beside a writable one).
# Other processes wait for the file's lock instead (see _open).
_FILE_LOCKS: dict[Path, threading.RLock] = {}
_FILE_LOCKS_GUARD = threading.Lock()


def _file_lock(path: Path) -> threading.RLock:
    with _FILE_LOCKS_GUARD:
        return _FILE_LOCKS.setdefault(path.resolve(), threading.RLock())


# Each file as this process's last write left it (device, inode, size, modification time): a
# write that finds it so skips the schema and the migration, which would find nothing to do
# (measured: a write's open went from 86 to 26 ms, and a small run's driver writes about 50 times).
# A file another process wrote, or deleted and made again, no longer matches, and gets them again.
_LEFT_BY_US: dict[Path, tuple[int, int, int, int]] = {}


def _state(path: Path) -> tuple[int, int, int, int] | None:
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


# The connection a thread holds open for a burst of writes to one file (StatsDB.burst).
_HELD = threading.local()


class StatsDB:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @contextmanager
    def burst(self) -> Iterator[None]:
        """Hold one connection open for every read and write of the block (in this thread), so
        that the driver's bookkeeping after a group of stages opens the file once, not once per
        statement (each open costs about 3 ms, see :func:`_open`); other processes wait for the block's end."""
        held: dict[Path, duckdb.DuckDBPyConnection] = _HELD.__dict__.setdefault("connections", {})
        if self.path in held:
            yield
            return
        with self._connect() as con:
            held[self.path] = con
            try:
                yield
            finally:
                del held[self.path]

    @contextmanager
    def _connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        held = getattr(_HELD, "connections", {}).get(self.path)
        if held is not None:
            yield held
            return
        with _file_lock(self.path):
            if not read_only:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            found = None if read_only else _state(self.path)
            as_we_left_it = found is not None and found == _LEFT_BY_US.get(self.path)
            try:
                with _open(self.path.resolve(), read_only) as con:
                    if not read_only and not as_we_left_it:
                        con.execute(_SCHEMA)
                        _migrate(con)
                    yield con
            finally:
                if not read_only:
                    _LEFT_BY_US[self.path] = _state(self.path)

    # --- writing (the flow only) --------------------------------------------------------------

    def start_run(self, run_id: str, created_at: str, storage: str, config: dict[str, Any], versions: dict[str, str], started_at: str,
                  made_by: str | None = None, simulated: bool | None = None) -> None:
        with self._connect() as con:
            con.execute(
                """INSERT INTO runs (run_id, created_at, started_at, finished_at, status, storage, config, versions, attempts,
                                     made_by, simulated)
                   VALUES (?, ?, ?, NULL, 'running', ?, ?, ?, 1, ?, ?)
                   ON CONFLICT (run_id) DO UPDATE SET started_at = excluded.started_at,
                   finished_at = NULL, status = 'running', reason = NULL, message = NULL, attempts = runs.attempts + 1,
                   made_by = excluded.made_by, simulated = excluded.simulated""",
                [run_id, _timestamp(created_at), _timestamp(started_at), storage, json.dumps(config), json.dumps(versions),
                 made_by, simulated],
            )

    def finish_run(self, run_id: str, status: str, finished_at: str, reason: str | None = None) -> None:
        with self._connect() as con:
            con.execute("UPDATE runs SET status = ?, finished_at = ?, reason = ? WHERE run_id = ?",
                        [status, _timestamp(finished_at), reason, run_id])

    def record_message(self, run_id: str, message: str | None) -> None:
        """The message a run's end shows (what failed and the command that finishes it)."""
        with self._connect() as con:
            con.execute("UPDATE runs SET message = ? WHERE run_id = ?", [message, run_id])

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One write transaction (committed when the block ends, rolled back if it raises)."""
        with self._connect() as con:
            con.execute("BEGIN")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    def record_shard(self, metrics: dict[str, Any], attempts: int) -> None:
        """Record a completed shard from the metrics its task returned (idempotent)."""
        with self.transaction() as con:
            self.insert_shard(con, metrics, attempts)

    @classmethod
    def insert_shard(cls, con: duckdb.DuckDBPyConnection, metrics: dict[str, Any], attempts: int) -> None:
        """:meth:`record_shard` within a transaction of the caller."""
        key = [metrics["run_id"], metrics["stage"], metrics["shard"]]
        con.execute(
            "INSERT OR REPLACE INTO shards VALUES (?, ?, ?, 'completed', ?, NULL, ?, ?, ?, ?, ?, ?, ?)",
            [*key, attempts, metrics["fingerprint"], _timestamp(metrics["started_at"]), _timestamp(metrics["finished_at"]),
             metrics["wall_s"], metrics["items_in"], metrics["items_out"], metrics["rejected"]],
        )
        con.execute("DELETE FROM rejections WHERE run_id = ? AND stage = ? AND shard = ?", key)
        for reason, count in sorted(metrics.get("rejections", {}).items()):
            con.execute("INSERT INTO rejections VALUES (?, ?, ?, ?, ?)", [*key, reason, count])
        con.execute("DELETE FROM layer_metrics WHERE run_id = ? AND stage = ? AND shard = ?", key)
        for layer, (items_in, passed) in sorted(metrics.get("layers", {}).items()):
            con.execute("INSERT INTO layer_metrics VALUES (?, ?, ?, ?, ?, ?)", [*key, layer, items_in, passed])
        con.execute("DELETE FROM profiles WHERE run_id = ? AND stage = ? AND shard = ?", key)
        for dimension, counts in sorted(metrics.get("profile", {}).items()):
            for value, count in sorted(counts.items()):
                con.execute("INSERT INTO profiles VALUES (?, ?, ?, ?, ?, ?)", [*key, dimension, value, count])
        con.execute("DELETE FROM shard_inputs WHERE run_id = ? AND stage = ? AND shard = ?", key)
        for path, read in [*((p, True) for p in metrics.get("inputs", [])), *((p, False) for p in metrics.get("missing_inputs", []))]:
            con.execute("INSERT OR REPLACE INTO shard_inputs VALUES (?, ?, ?, ?, ?)", [*key, path, read])
        cls._record_attempt(con, metrics, "completed")

    def record_shard_status(
        self, run_id: str, stage: str, shard: int, status: str, attempts: int, error: str | None,
        fingerprint: str, metrics: dict[str, Any] | None = None,
    ) -> None:
        """Record a shard that did not complete (failed, or blocked by a failed input), with the
        LLM use of its last attempt when the attempt reported it."""
        with self._connect() as con:
            con.execute("BEGIN")
            con.execute(
                """INSERT INTO shards (run_id, stage, shard, status, attempts, error, fingerprint)
                   VALUES (?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (run_id, stage, shard) DO UPDATE SET status = excluded.status,
                   attempts = shards.attempts + excluded.attempts, error = excluded.error""",
                [run_id, stage, shard, status, attempts, error, fingerprint],
            )
            if metrics is not None:
                self._record_attempt(con, metrics, status)
            con.execute("COMMIT")

    def record_attempts(self, attempts: Iterable[dict[str, Any]]) -> int:
        """Add attempts read from their usage files (:mod:`toolfactory.run.attempts`): those the
        database lacks, the killed ones among them. An attempt already recorded is left as it is,
        so reading the files again never counts an attempt twice. Returns how many were added."""
        added = 0
        shards: set[tuple[str, str, int]] = set()
        with self._connect() as con:
            con.execute("BEGIN")
            for attempt in attempts:
                shards.add((attempt["run_id"], attempt["stage"], attempt["shard"]))
                known = con.execute("SELECT 1 FROM shard_attempts WHERE attempt_id = ?", [attempt["attempt_id"]]).fetchone()
                if known is None:
                    self._record_attempt(con, attempt, attempt["outcome"], replace=False)
                    added += 1
            # A shard's attempts are at least its attempt files: Ray re-executes a task whose
            # worker died within one Prefect task run, whose run_count does not see it.
            for key in sorted(shards):
                con.execute(
                    "UPDATE shards SET attempts = greatest(attempts, (SELECT count(*) FROM shard_attempts "
                    "WHERE run_id = ? AND stage = ? AND shard = ?)) WHERE run_id = ? AND stage = ? AND shard = ?",
                    [*key, *key],
                )
            con.execute("COMMIT")
        return added

    @staticmethod
    def insert_attempt(con: duckdb.DuckDBPyConnection, attempt: dict[str, Any], outcome: str) -> None:
        """One attempt's LLM use (replacing what was known of it), within a transaction of the caller."""
        StatsDB._record_attempt(con, attempt, outcome)

    @staticmethod
    def _record_attempt(con: duckdb.DuckDBPyConnection, metrics: dict[str, Any], outcome: str, replace: bool = True) -> None:
        """One attempt's LLM use; the attempt's own final report replaces what its usage file said."""
        key = [metrics["attempt_id"], metrics["run_id"], metrics["stage"], metrics["shard"]]
        llm = metrics.get("llm", {})
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        con.execute(
            # Columns named: those added by ALTER come last in an old file, first in a new one's order.
            f"""{verb} INTO shard_attempts (attempt_id, run_id, stage, shard, outcome, started_at, finished_at, llm_calls,
                   cache_hits, retries, reasks, prompt_tokens, completion_tokens, llm_latency_s, cost_usd,
                   cached_prompt_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [*key, outcome, _timestamp(metrics["started_at"]), _timestamp(metrics["finished_at"]), llm.get("calls", 0),
             llm.get("cache_hits", 0),
             llm.get("retries", 0), llm.get("reasks", 0), llm.get("prompt_tokens", 0), llm.get("completion_tokens", 0),
             llm.get("latency_s", 0.0), llm.get("cost_usd"), llm.get("cached_prompt_tokens", 0)],
        )
        for role, usage in sorted(metrics.get("llm_by_role", {}).items()):
            con.execute(
                f"""{verb} INTO llm_usage (attempt_id, run_id, stage, shard, role, calls, cache_hits, retries, reasks,
                       prompt_tokens, completion_tokens, latency_s, failures, cost_usd, cached_prompt_tokens)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                [*key, role, usage["calls"], usage["cache_hits"], usage["retries"], usage["reasks"],
                 usage["prompt_tokens"], usage["completion_tokens"], usage["latency_s"], json.dumps(usage["failures"]),
                 usage.get("cost_usd"), usage.get("cached_prompt_tokens", 0)],
            )

    # --- reading ------------------------------------------------------------------------------

    def latest_run_id(self) -> str | None:
        if not self.path.exists():
            return None
        with self._connect(read_only=True) as con:
            row = con.execute(f"SELECT run_id FROM runs ORDER BY {_ts('started_at')} DESC, run_id DESC LIMIT 1").fetchone()
        return None if row is None else str(row[0])

    def run_facts(self, run_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The run's row (None if unknown) and its shards that did not complete, as a run record
        keeps them (:mod:`toolfactory.run.record`)."""
        with self._connect(read_only=True) as con:
            con.execute(f"""SELECT run_id, {_ts('created_at')} AS created_at, {_ts('started_at')} AS started_at,
                                   {_ts('finished_at')} AS finished_at, status, reason, message, storage, config,
                                   versions, attempts, made_by, simulated FROM runs WHERE run_id = ?""", [run_id])
            columns = [d[0] for d in con.description or ()]
            row = con.fetchone()
            shards = con.execute(
                """SELECT stage, shard, status, attempts, error, fingerprint FROM shards
                   WHERE run_id = ? AND status <> 'completed' ORDER BY stage, shard""", [run_id]).fetchall()
        if row is None:
            return None, []
        run = dict(zip(columns, row))
        for name in TIMESTAMPS["runs"]:
            run[name] = iso_time(run[name])
        run["config"], run["versions"] = json.loads(run["config"] or "{}"), json.loads(run["versions"] or "{}")
        keys = ("stage", "shard", "status", "attempts", "error", "fingerprint")
        return run, [dict(zip(keys, shard)) for shard in shards]

    def run_spend(self, run_id: str) -> tuple[int, int, float]:
        """(requests answered, tokens, USD) of every recorded attempt of the run, failed ones too:
        what a re-run's budget starts from."""
        if not self.path.exists():
            return 0, 0, 0.0
        with self._connect(read_only=True) as con:
            row = con.execute(
                """SELECT coalesce(sum(llm_calls), 0), coalesce(sum(prompt_tokens + completion_tokens), 0),
                          coalesce(sum(cost_usd), 0) FROM shard_attempts WHERE run_id = ?""", [run_id]).fetchone()
        return (int(row[0]), int(row[1]), float(row[2])) if row else (0, 0, 0.0)

    def run_summary(self, run_id: str, stage_order: tuple[str, ...]) -> dict[str, Any]:
        """`{run_id, status, reason, stages: [...]}`, one stage object per stage of the run, in run
        order; `reason` says why a run failed when it is not (only) a missing shard. `started_at`
        and `wall_s` are the run's, from its first execution's start to its last one's end;
        `attempts` counts its executions (the first and each re-run), `last_attempt` gives the
        start and wall time of the latest."""
        with self._connect(read_only=True) as con:
            # A run executed more than once (re-runs) started with its first execution, when it was
            # planned (`created_at`); `started_at` is its last execution's start.
            first = f"coalesce({_ts('created_at')}, {_ts('started_at')})"
            run = con.execute(
                f"""SELECT status, {first}, {_ts('finished_at')}, epoch({_ts('finished_at')} - {first}), reason, message,
                           made_by, simulated, coalesce(attempts, 1), {_ts('started_at')},
                           epoch({_ts('finished_at')} - {_ts('started_at')})
                    FROM runs WHERE run_id = ?""", [run_id]).fetchone()
            roles = con.execute(
                """SELECT role, sum(calls), sum(prompt_tokens), sum(completion_tokens), sum(cached_prompt_tokens),
                          CASE WHEN bool_or(cost_usd IS NULL AND prompt_tokens + completion_tokens > 0) THEN NULL
                               ELSE coalesce(sum(cost_usd), 0) END
                   FROM llm_usage WHERE run_id = ? GROUP BY role ORDER BY role""", [run_id]).fetchall()
            rows = con.execute("SELECT * FROM stage_metrics WHERE run_id = ?", [run_id]).fetchall()
            columns = [d[0] for d in con.description] if con.description else []
            reasons = con.execute(
                "SELECT stage, reason, sum(count) FROM rejections WHERE run_id = ? GROUP BY stage, reason ORDER BY 3 DESC, 2",
                [run_id],
            ).fetchall()
            layers = con.execute(
                """SELECT stage, layer, sum(items_in), sum(passed) FROM layer_metrics WHERE run_id = ?
                   GROUP BY stage, layer
                   ORDER BY stage, CASE layer WHEN 'rules' THEN 0 WHEN 'execution' THEN 1 WHEN 'model' THEN 2 ELSE 3 END,
                            sum(items_in) DESC, layer""",
                [run_id],
            ).fetchall()
            profiles = con.execute(
                """SELECT stage, dimension, value, sum(count) FROM profiles WHERE run_id = ?
                   GROUP BY stage, dimension, value ORDER BY stage, dimension, sum(count) DESC, value""",
                [run_id],
            ).fetchall()
            missing = con.execute(
                """SELECT stage, input FROM shard_inputs WHERE run_id = ? GROUP BY stage, input
                   HAVING NOT bool_or(read) ORDER BY stage, input""",
                [run_id],
            ).fetchall()
            errors = con.execute(
                "SELECT stage, shard, status, error FROM shards WHERE run_id = ? AND status <> 'completed' ORDER BY stage, shard",
                [run_id],
            ).fetchall()
        by_stage = {row[1]: dict(zip(columns, row)) for row in rows}
        stages = []
        for name in [s for s in stage_order if s in by_stage] + sorted(set(by_stage) - set(stage_order)):
            item = by_stage[name]
            item.pop("run_id")
            item["cost_usd"] = None if item["cost_usd"] is None else round(float(item["cost_usd"]), 6)
            # Accepted over judged: well defined for stages that expand (one tool, many tasks) too.
            judged = item["items_out"] + item["rejected"]
            item["pass_rate"] = round(item["items_out"] / judged, 4) if judged else None
            item["rejections"] = {reason: int(n) for stage, reason, n in reasons if stage == name}
            item["layers"] = {
                layer: {"in": int(n_in), "passed": int(n_ok), "pass_rate": round(n_ok / n_in, 4) if n_in else None}
                for stage, layer, n_in, n_ok in layers
                if stage == name
            }
            item["profile"] = {}
            for stage, dimension, value, count in profiles:
                if stage == name:
                    item["profile"].setdefault(dimension, {})[value] = int(count)
            for dimension, counts in item["profile"].items():
                if dimension.endswith(USES):  # one value per tool or API: how many, not which
                    item["profile"][dimension] = {"distinct": len(counts), "total": sum(counts.values())}
            # Inputs a fan-in stage proceeded without and no supplement has read yet (fan_in.py).
            item["missing_inputs"] = [path for stage, path in missing if stage == name]
            item["failed_shards"] = [
                {"shard": shard, "status": status, "error": error} for stage, shard, status, error in errors if stage == name
            ]
            stages.append(item)
        by_role = {
            str(role): {"calls": int(calls or 0), "prompt_tokens": int(p or 0), "cached_prompt_tokens": int(cached or 0),
                        "completion_tokens": int(c or 0), "cost_usd": None if cost is None else round(float(cost), 6)}
            for role, calls, p, c, cached, cost in roles
        }
        costs = [s["cost_usd"] for s in stages]
        return {
            "run_id": run_id,
            "status": run[0] if run else None,
            "per_accepted": per_accepted(stages),
            "started_at": iso_time(run[1]) if run else None,
            "finished_at": iso_time(run[2]) if run else None,
            "wall_s": None if not run or run[3] is None else round(float(run[3]), 3),
            "attempts": int(run[8]) if run else None,
            "last_attempt": None if not run else {
                "started_at": iso_time(run[9]), "wall_s": None if run[10] is None else round(float(run[10]), 3)},
            "reason": run[4] if run else None,
            "message": run[5] if run else None,
            "made_by": run[6] if run else None,
            "simulated": run[7] if run else None,
            "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 6),
            "cost_by_role": by_role,
            "stages": stages,
        }
