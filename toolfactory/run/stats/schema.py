"""The stats database's tables, and the one change an older file needs (docs/architecture.md §8).

Every table is created with ``IF NOT EXISTS`` and every column added later with ``ALTER … ADD
COLUMN IF NOT EXISTS``, so a file written by any earlier version opens and gains what it lacks on
its first write. Times are ``TIMESTAMP`` columns in UTC, so a run's wall time, a stage's span or a
trend over nights is one query (``finished_at - started_at``). Files written before that kept them
as ISO text: the first write to such a file converts those columns in place (:func:`migrate`), and
the readers cast (:func:`ts`), so an older file also opens read-only.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import duckdb

SCHEMA = """
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

# Profile dimensions named `*_uses` count uses per item (a tool id, an API): the summary gives how
# many distinct items were used and how often, the coverage; the table keeps every item.
USES = "_uses"


def timestamp(value: str | datetime | None) -> datetime | None:
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


def ts(column: str) -> str:
    """SQL for a time column read as TIMESTAMP whether the file is migrated or not (the text of
    older files is UTC)."""
    return f"TRY_CAST({column} AS TIMESTAMP)"


def migrate(con: duckdb.DuckDBPyConnection) -> None:
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


def create(con: duckdb.DuckDBPyConnection) -> None:
    """Every table, view and column, and the migration of an older file (idempotent)."""
    con.execute(SCHEMA)
    migrate(con)
