"""The stats database (DuckDB): runs, shard status and per-stage, per-rule metrics.

Workers return metrics; during a run its flow is the only writer of the run's rows. Everything in
it is derived from the storage root (run records, shard metrics sidecars, attempt usage files):
the file is a local cache, rebuilt or brought up to date from the root by
:mod:`toolfactory.run.stats_sync` wherever it is read.

One concern per module:

- :mod:`.schema`: the tables, and the migration of a file an older version wrote;
- :mod:`.connection`: opening the file briefly, one connection per file and thread;
- :mod:`.writes`: what a run's driver records (runs, shards, attempts);
- :mod:`.queries`: what the stats answer (a run's :class:`~toolfactory.run.summary.RunSummary`).

:class:`StatsDB` puts them behind one object named by its file.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Iterable

import duckdb

from toolfactory.run.metrics import AttemptFacts, AttemptUsage, ShardMetrics
from toolfactory.run.stats import connection, queries, writes
from toolfactory.run.stats.schema import TIMESTAMPS, iso_time
from toolfactory.run.summary import RunSummary


class StatsDB:
    """The stats file at `path`: each call opens it briefly (see :meth:`burst` for several)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    # --- connections --------------------------------------------------------------------------

    def burst(self) -> AbstractContextManager[None]:
        """Hold one connection open for every read and write of the block (in this thread)."""
        return connection.burst(self.path)

    def reading(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A read-only connection, for a query of its own (the report's charts)."""
        return connection.connect(self.path, read_only=True)

    def transaction(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """One write transaction (committed when the block ends, rolled back if it raises)."""
        return connection.transaction(self.path)

    # --- writing (the flow only) --------------------------------------------------------------

    def start_run(self, run_id: str, created_at: str, storage: str, config: dict[str, Any], versions: dict[str, str],
                  started_at: str, made_by: str | None = None, simulated: bool | None = None) -> None:
        with connection.connect(self.path) as con:
            writes.start_run(con, run_id, created_at, storage, config, versions, started_at, made_by, simulated)

    def finish_run(self, run_id: str, status: str, finished_at: str, reason: str | None = None) -> None:
        with connection.connect(self.path) as con:
            writes.finish_run(con, run_id, status, finished_at, reason)

    def record_message(self, run_id: str, message: str | None) -> None:
        """The message a run's end shows (what failed and the command that finishes it)."""
        with connection.connect(self.path) as con:
            writes.record_message(con, run_id, message)

    def record_shard(self, metrics: ShardMetrics, attempts: int) -> None:
        """Record a completed shard from the metrics its task returned (idempotent)."""
        with self.transaction() as con:
            writes.insert_shard(con, metrics, attempts)

    @staticmethod
    def insert_shard(con: duckdb.DuckDBPyConnection, metrics: ShardMetrics, attempts: int) -> None:
        """:meth:`record_shard` within a transaction of the caller."""
        writes.insert_shard(con, metrics, attempts)

    def record_shard_status(
        self, run_id: str, stage: str, shard: int, status: str, attempts: int, error: str | None,
        fingerprint: str, metrics: AttemptFacts | None = None,
    ) -> None:
        """Record a shard that did not complete (failed, or blocked by a failed input), with the
        LLM use of its last attempt when the attempt reported it."""
        with self.transaction() as con:
            writes.record_shard_status(con, run_id, stage, shard, status, attempts, error, fingerprint)
            if metrics is not None:
                writes.insert_attempt(con, metrics, status)

    def record_attempts(self, attempts: Iterable[AttemptUsage]) -> int:
        """Add attempts read from their usage files (:mod:`toolfactory.run.attempts`) that the
        database lacks, the killed ones among them. Returns how many were added."""
        with self.transaction() as con:
            return writes.record_attempts(con, attempts)

    @staticmethod
    def insert_attempt(con: duckdb.DuckDBPyConnection, attempt: AttemptFacts, outcome: str) -> None:
        """One attempt's LLM use (replacing what was known of it), within a transaction of the caller."""
        writes.insert_attempt(con, attempt, outcome)

    # --- reading ------------------------------------------------------------------------------

    def latest_run_id(self) -> str | None:
        if not self.path.exists():
            return None
        with self.reading() as con:
            return queries.latest_run_id(con)

    def run_facts(self, run_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The run's row (None if unknown) and its shards that did not complete, as a run record
        keeps them (:mod:`toolfactory.run.record`)."""
        with self.reading() as con:
            return queries.run_facts(con, run_id)

    def run_spend(self, run_id: str) -> tuple[int, int, float]:
        """(requests answered, tokens, USD) of every recorded attempt of the run, failed ones too:
        what a re-run's budget starts from."""
        if not self.path.exists():
            return 0, 0, 0.0
        with self.reading() as con:
            return queries.run_spend(con, run_id)

    def run_summary(self, run_id: str, stage_order: tuple[str, ...]) -> RunSummary:
        """The run's summary, its stages in `stage_order` (see :class:`RunSummary`)."""
        with self.reading() as con:
            return queries.run_summary(con, run_id, stage_order)

    def usage_by_role(self, run_id: str) -> list[tuple[str, int, int, int, int, int]]:
        """Per role: (role, calls, cache hits, prompt, completion and cached prompt tokens)."""
        with self.reading() as con:
            return queries.usage_by_role(con, run_id)


__all__ = ["TIMESTAMPS", "StatsDB", "iso_time"]
