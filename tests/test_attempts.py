"""Each attempt's LLM usage reaches storage while it runs, and the stats once."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from toolfactory.run.attempts import AttemptLog, attempt_usage
from toolfactory.config import load_config
from toolfactory.errors import DriverGone
from toolfactory.llm.usage import UsageMeter
from toolfactory.storage.shards import ShardPaths
from toolfactory.run.metrics import ShardMetrics
from toolfactory.run.stats import StatsDB
from toolfactory.storage import ObjectStore


def _store(tmp_path: Path) -> ObjectStore:
    return ObjectStore.open(load_config(None, [f"storage.root={tmp_path}"], environ={}).storage)


def test_a_running_attempt_keeps_its_usage_file_current(tmp_path: Path) -> None:
    store, meter = _store(tmp_path), UsageMeter()
    log = AttemptLog(store, ShardPaths("r1", "dialogues", 3), "a1", meter, "2026-01-01T00:00:00", every_s=0.05)
    with log:
        meter.role("assistant").calls += 2
        meter.role("assistant").prompt_tokens += 40
        path = tmp_path / "runs/r1/dialogues/_usage/part-00003/a1.json"
        deadline = time.monotonic() + 10
        while json.loads(path.read_text())["llm"]["calls"] != 2:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert json.loads(path.read_text())["outcome"] == "running"
        log.close("completed")
    record = json.loads(path.read_text())
    assert (record["outcome"], record["llm_by_role"]["assistant"]["prompt_tokens"]) == ("completed", 40)


def test_an_attempt_that_never_ended_is_read_as_interrupted_and_counted_once(tmp_path: Path) -> None:
    store, meter = _store(tmp_path), UsageMeter()
    killed = AttemptLog(store, ShardPaths("r1", "tasks", 0), "dead", meter, "2026-01-01T00:00:00", every_s=60)
    meter.role("user").calls += 5
    killed.flush("running")  # what a killed worker leaves: its last flush, never a final one
    stats = StatsDB(tmp_path / "stats.duckdb")
    assert stats.record_attempts(attempt_usage(store, "r1", "tasks")) == 1
    assert stats.record_attempts(attempt_usage(store, "r1", "tasks")) == 0  # a re-run reads it again
    summary = stats.run_summary("r1", ("tasks",))
    assert summary.stages == ()  # usage alone makes no shard: the view counts per shard row
    import duckdb

    with duckdb.connect(str(stats.path), read_only=True) as con:
        assert con.execute("SELECT outcome, llm_calls FROM shard_attempts").fetchall() == [("interrupted", 5)]


def test_an_attempt_stopped_with_its_driver_is_interrupted_not_failed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    outcomes = {}
    for attempt_id, error in (("gone", DriverGone("its driver is gone")), ("broken", ValueError("a bug"))):
        with pytest.raises(type(error)):
            with AttemptLog(store, ShardPaths("r1", "verify", 0), attempt_id, UsageMeter(), "2026-01-01T00:00:00", every_s=60):
                raise error
        outcomes[attempt_id] = json.loads((tmp_path / f"runs/r1/verify/_usage/part-00000/{attempt_id}.json").read_text())["outcome"]
    assert outcomes == {"gone": "interrupted", "broken": "failed"}


def test_a_shard_counts_every_attempt_file_also_those_its_task_did_not_see(tmp_path: Path) -> None:
    # Ray ran the task again after its worker died: one Prefect task run (attempts 1), two attempts.
    store, meter = _store(tmp_path), UsageMeter()
    AttemptLog(store, ShardPaths("r1", "tasks", 0), "dead0", meter, "2026-01-01T00:00:00").flush("running")
    AttemptLog(store, ShardPaths("r1", "tasks", 0), "d0e1", meter, "2026-01-01T00:00:01").flush("completed")
    stats = StatsDB(tmp_path / "stats.duckdb")
    metrics = {"run_id": "r1", "stage": "tasks", "shard": 0, "fingerprint": "f", "attempt_id": "d0e1",
               "started_at": "2026-01-01T00:00:01", "finished_at": "2026-01-01T00:00:02", "wall_s": 1.0,
               "items_in": 1, "items_out": 1, "rejected": 0, "llm": {}}
    stats.record_shard(ShardMetrics.from_dict(metrics), 1)
    stats.record_attempts(attempt_usage(store, "r1", "tasks"))
    import duckdb

    with duckdb.connect(str(stats.path), read_only=True) as con:
        assert con.execute("SELECT status, attempts FROM shards").fetchall() == [("completed", 2)]
