from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

from toolfactory.run.metrics import ShardMetrics
from toolfactory.run.stats import TIMESTAMPS, StatsDB
from toolfactory.run.stats.schema import SCHEMA


def test_a_reader_waits_while_another_process_writes(tmp_path: Path) -> None:
    db = StatsDB(tmp_path / "stats.duckdb")
    db.start_run("r1", "2026-01-01", "/data", {}, {}, "2026-01-01T00:00:00")
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, time\ncon = duckdb.connect({str(db.path)!r})\nprint('held', flush=True)\ntime.sleep(1.0)\ncon.close()"],
        stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    assert db.latest_run_id() == "r1"  # would raise "Could not set lock" without waiting
    assert holder.wait(10) == 0
    assert time.monotonic() - started > 0.3


def test_two_files_are_attached_at_once_and_each_is_released_after_its_open(tmp_path: Path) -> None:
    """Every open attaches the file to this process's one in-memory DuckDB: a read in a burst
    uses the burst's attachment, two files are attached at once from two threads, and each file
    is free for another process as soon as its open ends."""
    from concurrent.futures import ThreadPoolExecutor

    first, second = StatsDB(tmp_path / "a" / "stats.duckdb"), StatsDB(tmp_path / "b" / "stats.duckdb")
    with first.burst():
        first.start_run("r1", "2026-01-01", "/a", {}, {}, "2026-01-01T00:00:00")
        assert first.latest_run_id() == "r1"  # a read nested in the burst's open

        def write_second() -> str | None:
            second.start_run("r2", "2026-01-01", "/b", {}, {}, "2026-01-01T00:00:00")
            return second.latest_run_id()

        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(write_second).result(30) == "r2"  # while the first file is attached
    for db, run_id in ((first, "r1"), (second, "r2")):
        read = subprocess.run([sys.executable, "-c", f"import duckdb; print(duckdb.connect({str(db.path)!r}).execute('SELECT run_id FROM runs').fetchall())"],
                              capture_output=True, text=True, timeout=60)
        assert read.stdout.strip() == f"[('{run_id}',)]", read.stderr[-2000:]


def _shard(stage: str, shard: int, *, out: int, calls: int, started: str, finished: str,
           profile: dict[str, dict[str, int]] | None = None, **more: Any) -> ShardMetrics:
    return ShardMetrics.from_dict({
        "attempt_id": f"{stage}-{shard}", "run_id": "r1", "stage": stage, "shard": shard, "fingerprint": "f",
        "started_at": started, "finished_at": finished, "wall_s": 1.0, "items_in": out, "items_out": out, "rejected": 0,
        "llm": {"calls": calls, "prompt_tokens": 10 * calls, "completion_tokens": calls}, "profile": profile or {}, **more,
    })


def test_times_are_timestamps_so_a_run_wall_time_is_one_query(tmp_path: Path) -> None:
    db = StatsDB(tmp_path / "stats.duckdb")
    db.start_run("r1", "2026-01-01T00:00:00+00:00", "/data", {}, {}, "2026-01-01T01:00:00+01:00")  # 00:00 UTC
    db.record_shard(_shard("verify", 0, out=1, calls=0, started="2026-01-01T00:00:05.500+00:00",
                           finished="2026-01-01T00:00:07+00:00"), attempts=1)
    db.finish_run("r1", "completed", "2026-01-01T00:01:30+00:00")
    con = duckdb.connect(str(db.path), read_only=True)
    types = dict(con.execute("SELECT table_name || '.' || column_name, data_type FROM information_schema.columns").fetchall())
    assert {types[f"{t}.{c}"] for t, cs in TIMESTAMPS.items() for c in cs} == {"TIMESTAMP"}
    assert con.execute("SELECT epoch(finished_at - started_at) FROM runs").fetchone() == (90.0,)
    assert con.execute("SELECT epoch(max(finished_at) - min(started_at)) FROM shards").fetchone() == (1.5,)
    con.close()
    summary = db.run_summary("r1", ("verify",))
    assert summary.started_at == "2026-01-01T00:00:00.000+00:00" and summary.wall_s == 90.0


def test_an_older_file_with_text_times_opens_and_is_migrated_on_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "stats.duckdb"
    con = duckdb.connect(str(path))
    con.execute(SCHEMA.replace("TIMESTAMP", "VARCHAR"))  # the schema before times were typed
    con.execute("""INSERT INTO runs (run_id, created_at, started_at, finished_at, status, storage, config, versions, attempts)
                   VALUES ('old', '2025-12-31T23:00:00+00:00', '2025-12-31T23:00:00.250+00:00',
                   '2026-01-01T01:00:00.250+02:00', 'completed', '/data', '{}', '{}', 1)""")
    con.close()
    db = StatsDB(path)
    assert db.latest_run_id() == "old"  # read-only, before any migration
    assert db.run_summary("old", ()).status == "completed"
    db.start_run("new", "2026-01-02T00:00:00+00:00", "/data", {}, {}, "2026-01-02T00:00:00+00:00")
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT data_type FROM information_schema.columns WHERE table_name = 'runs' "
                       "AND column_name = 'finished_at'").fetchone() == ("TIMESTAMP",)
    # the offset is honoured: 01:00:00.250+02:00 is 23:00:00.250 UTC, an hour after the start
    assert con.execute("SELECT epoch(finished_at - started_at) FROM runs WHERE run_id = 'old'").fetchone() == (0.0,)
    assert [r[0] for r in con.execute("SELECT run_id FROM runs ORDER BY started_at").fetchall()] == ["old", "new"]
    con.close()
    assert db.latest_run_id() == "new"


def test_llm_calls_per_accepted_dialogue_per_stage_and_recipe(tmp_path: Path) -> None:
    db = StatsDB(tmp_path / "stats.duckdb")
    db.start_run("r1", "2026-01-01T00:00:00+00:00", "/data", {}, {}, "2026-01-01T00:00:00+00:00")
    t = "2026-01-01T00:00:00+00:00"
    db.record_shard(_shard("dialogues", 0, out=8, calls=40, started=t, finished=t,
                           profile={"llm_calls": {"toolace": 30, "toolalpaca": 10}}), attempts=1)
    db.record_shard(_shard("verify", 0, out=5, calls=20, started=t, finished=t,
                           profile={"llm_calls": {"toolace": 12, "toolalpaca": 8}, "recipes": {"toolace": 3, "toolalpaca": 2}}), attempts=1)
    db.record_shard(_shard("curate", 0, out=4, calls=0, started=t, finished=t,
                           profile={"recipes": {"toolace": 3, "toolalpaca": 1}}), attempts=1)
    cost = db.run_summary("r1", ("dialogues", "verify", "curate")).per_accepted.model_dump()
    assert cost["accepted"] == 4 and cost["llm_calls"] == 15.0 and cost["tokens"] == 165.0
    assert cost["by_stage"] == {"dialogues": {"llm_calls": 10.0, "tokens": 110.0}, "verify": {"llm_calls": 5.0, "tokens": 55.0}}
    assert cost["by_recipe"] == {
        "toolace": {"accepted": 3, "llm_calls": 42, "llm_calls_per_accepted": 14.0},
        "toolalpaca": {"accepted": 1, "llm_calls": 18, "llm_calls_per_accepted": 18.0},
    }


def test_the_stats_command_prints_calls_per_accepted_dialogue(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolfactory.cli import app

    db = StatsDB(tmp_path / "stats.duckdb")
    db.start_run("r1", "2026-01-01T00:00:00+00:00", str(tmp_path), {}, {}, "2026-01-01T00:00:00+00:00")
    t = "2026-01-01T00:00:00+00:00"
    db.record_shard(_shard("dialogues", 0, out=8, calls=40, started=t, finished=t,
                           profile={"llm_calls": {"toolace": 30, "toolalpaca": 10}}), attempts=1)
    db.record_shard(_shard("verify", 0, out=4, calls=20, started=t, finished=t,
                           profile={"llm_calls": {"toolace": 12, "toolalpaca": 8}, "recipes": {"toolace": 3, "toolalpaca": 1}}), attempts=1)
    result = CliRunner().invoke(app, ["stats", "r1", "--set", f"storage.root={tmp_path}"])
    assert result.exit_code == 0, result.output
    assert "llm calls per accepted dialogue: 15.0 (165.0 tokens) = dialogues 10.0, verify 5.0" in result.output
    assert "by recipe (dialogues + verify): toolace 14.0 (3 accepted), toolalpaca 18.0 (1 accepted)" in result.output


def test_a_stage_s_layers_are_listed_in_the_order_they_run(tmp_path: Path) -> None:
    # Only one of two verify shards replayed something, so the execution layer's summed input is
    # the smallest: the order must still be rules, execution, model.
    db = StatsDB(tmp_path / "stats.duckdb")
    db.start_run("r1", "2026-01-01T00:00:00+00:00", "/data", {}, {}, "2026-01-01T00:00:00+00:00")
    times = {"started": "2026-01-01T00:00:01+00:00", "finished": "2026-01-01T00:00:02+00:00"}
    db.record_shard(_shard("verify", 0, out=5, calls=0, **times,
                           layers={"rules": (9, 7), "execution": (2, 2), "model": (7, 5)}), attempts=1)
    db.record_shard(_shard("verify", 1, out=6, calls=0, **times, layers={"rules": (9, 8), "model": (8, 6)}), attempts=1)
    (verify,) = db.run_summary("r1", ("verify",)).stages
    assert list(verify.layers) == ["rules", "execution", "model"]
    assert verify.layers["rules"].items_in == 18 and verify.layers["execution"].items_in == 2
