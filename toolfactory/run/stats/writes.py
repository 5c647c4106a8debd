"""What the stats record: a run's start and end, each shard's outcome and each attempt's LLM use.

Every function writes within the caller's connection (and transaction, where it says so); the
driver of a run is the only writer of its rows (docs/architecture.md §4, rule 6), and
:mod:`toolfactory.run.stats_sync` writes the same rows from the files of the storage root.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

import duckdb

from toolfactory.run.metrics import AttemptFacts, AttemptUsage, ShardMetrics
from toolfactory.run.stats.schema import timestamp


def start_run(con: duckdb.DuckDBPyConnection, run_id: str, created_at: str, storage: str, config: dict[str, Any],
              versions: dict[str, str], started_at: str, made_by: str | None, simulated: bool | None) -> None:
    """A run starts (again: a re-run counts one more attempt and clears how it ended)."""
    con.execute(
        """INSERT INTO runs (run_id, created_at, started_at, finished_at, status, storage, config, versions, attempts,
                             made_by, simulated)
           VALUES (?, ?, ?, NULL, 'running', ?, ?, ?, 1, ?, ?)
           ON CONFLICT (run_id) DO UPDATE SET started_at = excluded.started_at,
           finished_at = NULL, status = 'running', reason = NULL, message = NULL, attempts = runs.attempts + 1,
           made_by = excluded.made_by, simulated = excluded.simulated""",
        [run_id, timestamp(created_at), timestamp(started_at), storage, json.dumps(config), json.dumps(versions),
         made_by, simulated],
    )


def finish_run(con: duckdb.DuckDBPyConnection, run_id: str, status: str, finished_at: str, reason: str | None) -> None:
    con.execute("UPDATE runs SET status = ?, finished_at = ?, reason = ? WHERE run_id = ?",
                [status, timestamp(finished_at), reason, run_id])


def record_message(con: duckdb.DuckDBPyConnection, run_id: str, message: str | None) -> None:
    con.execute("UPDATE runs SET message = ? WHERE run_id = ?", [message, run_id])


def insert_shard(con: duckdb.DuckDBPyConnection, metrics: ShardMetrics, attempts: int) -> None:
    """A completed shard from its metrics, replacing what was known of it (idempotent)."""
    key = [metrics.run_id, metrics.stage, metrics.shard]
    con.execute(
        "INSERT OR REPLACE INTO shards VALUES (?, ?, ?, 'completed', ?, NULL, ?, ?, ?, ?, ?, ?, ?)",
        [*key, attempts, metrics.fingerprint, timestamp(metrics.started_at), timestamp(metrics.finished_at),
         metrics.wall_s, metrics.items_in, metrics.items_out, metrics.rejected],
    )
    con.execute("DELETE FROM rejections WHERE run_id = ? AND stage = ? AND shard = ?", key)
    for reason, count in sorted(metrics.rejections.items()):
        con.execute("INSERT INTO rejections VALUES (?, ?, ?, ?, ?)", [*key, reason, count])
    con.execute("DELETE FROM layer_metrics WHERE run_id = ? AND stage = ? AND shard = ?", key)
    for layer, (items_in, passed) in sorted(metrics.layers.items()):
        con.execute("INSERT INTO layer_metrics VALUES (?, ?, ?, ?, ?, ?)", [*key, layer, items_in, passed])
    con.execute("DELETE FROM profiles WHERE run_id = ? AND stage = ? AND shard = ?", key)
    for dimension, counts in sorted(metrics.profile.items()):
        for value, count in sorted(counts.items()):
            con.execute("INSERT INTO profiles VALUES (?, ?, ?, ?, ?, ?)", [*key, dimension, value, count])
    con.execute("DELETE FROM shard_inputs WHERE run_id = ? AND stage = ? AND shard = ?", key)
    for path, read in [*((p, True) for p in metrics.inputs or ()), *((p, False) for p in metrics.missing_inputs)]:
        con.execute("INSERT OR REPLACE INTO shard_inputs VALUES (?, ?, ?, ?, ?)", [*key, path, read])
    insert_attempt(con, metrics, "completed")


def record_shard_status(con: duckdb.DuckDBPyConnection, run_id: str, stage: str, shard: int, status: str,
                        attempts: int, error: str | None, fingerprint: str) -> None:
    """A shard that did not complete (failed, or blocked by a failed input)."""
    con.execute(
        """INSERT INTO shards (run_id, stage, shard, status, attempts, error, fingerprint)
           VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (run_id, stage, shard) DO UPDATE SET status = excluded.status,
           attempts = shards.attempts + excluded.attempts, error = excluded.error""",
        [run_id, stage, shard, status, attempts, error, fingerprint],
    )


def record_attempts(con: duckdb.DuckDBPyConnection, attempts: Iterable[AttemptUsage]) -> int:
    """Attempts read from their usage files that the database lacks, within the caller's
    transaction; an attempt already recorded is left as it is, so reading the files again never
    counts an attempt twice. Returns how many were added."""
    added = 0
    shards: set[tuple[str, str, int]] = set()
    for attempt in attempts:
        shards.add((attempt.run_id, attempt.stage, attempt.shard))
        known = con.execute("SELECT 1 FROM shard_attempts WHERE attempt_id = ?", [attempt.attempt_id]).fetchone()
        if known is None:
            insert_attempt(con, attempt, attempt.outcome, replace=False)
            added += 1
    # A shard's attempts are at least its attempt files: Ray re-executes a task whose worker died
    # within one Prefect task run, whose run_count does not see it.
    for key in sorted(shards):
        con.execute(
            "UPDATE shards SET attempts = greatest(attempts, (SELECT count(*) FROM shard_attempts "
            "WHERE run_id = ? AND stage = ? AND shard = ?)) WHERE run_id = ? AND stage = ? AND shard = ?",
            [*key, *key],
        )
    return added


def insert_attempt(con: duckdb.DuckDBPyConnection, attempt: AttemptFacts, outcome: str, replace: bool = True) -> None:
    """One attempt's LLM use; with `replace`, the attempt's own final report replaces what its
    usage file said."""
    key = [attempt.attempt_id, attempt.run_id, attempt.stage, attempt.shard]
    llm = attempt.llm
    verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
    con.execute(
        # Columns named: those added by ALTER come last in an old file, first in a new one's order.
        f"""{verb} INTO shard_attempts (attempt_id, run_id, stage, shard, outcome, started_at, finished_at, llm_calls,
               cache_hits, retries, reasks, prompt_tokens, completion_tokens, llm_latency_s, cost_usd,
               cached_prompt_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [*key, outcome, timestamp(attempt.started_at), timestamp(attempt.finished_at), llm.calls, llm.cache_hits,
         llm.retries, llm.reasks, llm.prompt_tokens, llm.completion_tokens, llm.latency_s, llm.cost_usd,
         llm.cached_prompt_tokens],
    )
    for role, usage in sorted(attempt.llm_by_role.items()):
        con.execute(
            f"""{verb} INTO llm_usage (attempt_id, run_id, stage, shard, role, calls, cache_hits, retries, reasks,
                   prompt_tokens, completion_tokens, latency_s, failures, cost_usd, cached_prompt_tokens)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [*key, role, usage.calls, usage.cache_hits, usage.retries, usage.reasks, usage.prompt_tokens,
             usage.completion_tokens, usage.latency_s, json.dumps(usage.failures), usage.cost_usd,
             usage.cached_prompt_tokens],
        )
