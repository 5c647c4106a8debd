"""The stats live with the data: a run's driver leaves its run record, shard sidecars and usage
files in the storage root (written here by the real writers: StatsDB, publish_run_record,
commit_shard, AttemptLog), and any other machine reads the stats from the root alone, through a
local cache that is rebuilt or brought up to date (local root and moto's S3 server)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolfactory.run.attempts import AttemptLog, attempt_usage
from toolfactory.cli import app
from toolfactory.config import StorageConfig, load_config
from toolfactory.llm.usage import UsageMeter
from toolfactory.report.context import load_context
from toolfactory.run.metrics import ShardMetrics
from toolfactory.run.record import publish_run_record, record_path
from toolfactory.run.summary import RunSummary
from toolfactory.storage.shards import ShardPaths, commit_shard
from toolfactory.stages import STAGE_NAMES
from toolfactory.run.stats import StatsDB
from toolfactory.run.stats_sync import sync_stats
from toolfactory.storage import ObjectStore

FIRST, SECOND = "20261123-030000-night", "20261124-030000-night"


def _metrics(run_id: str, stage: str, shard: int, items_in: int, items_out: int, calls: int) -> dict[str, Any]:
    """A shard's metrics shaped as toolfactory.run.execution returns them, its LLM use from a real meter."""
    meter = UsageMeter()
    usage = meter.role("assistant")
    usage.calls, usage.prompt_tokens, usage.completion_tokens = calls, 100 * calls, 10 * calls
    rejected = items_in - items_out if items_in > items_out else 0
    return {
        "attempt_id": uuid.uuid4().hex, "run_id": run_id, "stage": stage, "shard": shard, "fingerprint": f"fp-{stage}-{shard}",
        "inputs": [], "missing_inputs": [], "items_in": items_in, "items_out": items_out, "rejected": rejected,
        "rejections": {"call_unknown_function": rejected} if rejected else {}, "layers": {},
        "profile": {"recipes": {"toolalpaca": items_out}}, "llm": meter.totals(), "llm_by_role": meter.to_dict(),
        "started_at": "2026-11-23T03:00:00.000+00:00", "finished_at": "2026-11-23T03:00:04.000+00:00", "wall_s": 4.0,
    }


def _commit(store: ObjectStore, db: StatsDB, metrics: dict[str, Any]) -> None:
    paths = ShardPaths(metrics["run_id"], metrics["stage"], metrics["shard"])
    commit_shard(store, paths, [(f"r{k}", "{}") for k in range(metrics["items_out"])], [], metrics)
    db.record_shard(ShardMetrics.from_dict(metrics), 1)


def drive_run(store: ObjectStore, db: StatsDB, run_id: str, accepted: int, fail_verify_1: bool = True) -> None:
    """What a run's driver leaves in storage and in its own (soon lost) cache `db`: two verify
    shards, the second failed after 3 attempts unless told otherwise, and a killed attempt."""
    db.start_run(run_id, "2026-11-23T03:00:00+00:00", store.url, {"storage": {"root": store.url}}, {"toolfactory": "0"},
                 "2026-11-23T03:00:00+00:00")
    publish_run_record(store, db, run_id, STAGE_NAMES)
    _commit(store, db, _metrics(run_id, "dialogues", 0, 10, 10, 30))
    _commit(store, db, _metrics(run_id, "verify", 0, 10, accepted, 5))
    killed = AttemptLog(store, ShardPaths(run_id, "verify", 1), uuid.uuid4().hex, _meter(calls=7), "2026-11-23T03:00:01+00:00")
    killed.flush("running")  # its worker died: the file stays `running`
    if fail_verify_1:
        db.record_shard_status(run_id, "verify", 1, "failed", 3, "ShardIncomplete: 4 of 10 records failed", "fp-verify-1")
    else:
        _commit(store, db, _metrics(run_id, "verify", 1, 10, 6, 5))
    db.record_attempts(attempt_usage(store, run_id, "verify"))  # as the flow does after each stage
    db.finish_run(run_id, "failed" if fail_verify_1 else "completed", "2026-11-23T03:05:00+00:00")
    publish_run_record(store, db, run_id, STAGE_NAMES)


def _meter(calls: int) -> UsageMeter:
    meter = UsageMeter()
    usage = meter.role("judge")
    usage.calls, usage.prompt_tokens, usage.completion_tokens = calls, 50 * calls, 5 * calls
    return meter


def _stats_json(args: list[str]) -> tuple[dict[str, Any], str]:
    result = CliRunner().invoke(app, ["stats", *args, "--json"])
    assert result.exit_code == 0, result.output + result.stderr
    return json.loads(result.stdout), result.stderr


def _same(summary: dict[str, Any], expected: RunSummary) -> None:
    assert summary.pop("damaged") == []  # what the command adds: files changed since their commit, and
    summary = {k: v for k, v in summary.items() if k != "problems"}  # files the stats skipped
    assert json.loads(json.dumps(summary, default=str)) == json.loads(json.dumps(expected.to_dict(), default=str))


@pytest.fixture
def local_root(tmp_path: Path) -> tuple[Path, StatsDB]:
    """A local root whose run was driven on another machine (its cache there: machine-a/)."""
    root = tmp_path / "data"
    driver = StatsDB(tmp_path / "machine-a" / "stats.duckdb")
    drive_run(ObjectStore.open(StorageConfig(root=str(root))), driver, FIRST, accepted=8)
    return root, driver


def test_stats_of_a_local_root_from_another_folder_with_only_storage_settings(
        local_root: tuple[Path, StatsDB], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, driver = local_root
    elsewhere = tmp_path / "machine-b"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    summary, _ = _stats_json([FIRST, "--set", f"storage.root={root}"])
    _same(summary, driver.run_summary(FIRST, STAGE_NAMES))
    assert summary["status"] == "failed"
    assert summary["stages"][1]["failed_shards"] == [
        {"shard": 1, "status": "failed", "error": "ShardIncomplete: 4 of 10 records failed"}]
    assert (root / "stats.duckdb").is_file()  # the cache of a local root lives with the data


def test_stats_of_an_s3_root_from_another_folder_with_only_storage_settings(
        s3_server: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = [f"storage.root=s3://{s3_server['bucket']}/{uuid.uuid4().hex}", f"storage.endpoint_url={s3_server['endpoint']}"]
    config = load_config(None, settings)
    driver = StatsDB(tmp_path / "worker" / "toolfactory-stats.duckdb")  # a container's disk, lost after the run
    drive_run(ObjectStore.open(config.storage), driver, FIRST, accepted=8)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "laptop-cache"))
    monkeypatch.chdir(tmp_path)
    summary, _ = _stats_json([FIRST, *(arg for s in settings for arg in ("--set", s))])
    _same(summary, driver.run_summary(FIRST, STAGE_NAMES))
    [cache] = (tmp_path / "laptop-cache" / "toolfactory" / "stats").glob("*.duckdb")
    assert str(cache) == load_config(None, settings).stats_path()


def test_a_deleted_cache_is_rebuilt_with_the_same_summary(local_root: tuple[Path, StatsDB]) -> None:
    root, _ = local_root
    first, _ = _stats_json([FIRST, "--set", f"storage.root={root}"])
    assert [(s["stage"], s["items_out"], s["llm_calls"]) for s in first["stages"]] == [("dialogues", 10, 30), ("verify", 8, 12)]
    (root / "stats.duckdb").unlink()
    again, _ = _stats_json([FIRST, "--set", f"storage.root={root}"])
    assert again == first


def test_a_stale_cache_is_brought_up_to_date_with_runs_written_elsewhere(local_root: tuple[Path, StatsDB], tmp_path: Path) -> None:
    root, _ = local_root
    store = ObjectStore.open(StorageConfig(root=str(root)))
    cache = StatsDB(tmp_path / "machine-b" / "cache.duckdb")
    assert sync_stats(store, cache).run_id == FIRST
    # Another machine (its own cache) runs the next night, and finishes the first run's failed shard.
    other = StatsDB(tmp_path / "machine-c" / "stats.duckdb")
    drive_run(store, other, SECOND, accepted=9)
    other.start_run(FIRST, "2026-11-23T03:00:00+00:00", store.url, {}, {}, "2026-11-24T04:00:00+00:00")
    _commit(store, other, _metrics(FIRST, "verify", 1, 10, 6, 5))
    other.finish_run(FIRST, "completed", "2026-11-24T04:01:00+00:00")
    publish_run_record(store, other, FIRST, STAGE_NAMES)

    assert sync_stats(store, cache).run_id == FIRST  # the re-run started last
    summary = cache.run_summary(FIRST, STAGE_NAMES)
    verify = summary.stage("verify")
    assert summary.status == "completed" and verify is not None and verify.failed_shards == () and verify.items_out == 14
    assert sync_stats(store, cache, SECOND).run_id == SECOND
    assert cache.run_summary(SECOND, STAGE_NAMES).status == "failed"


def test_the_report_trend_across_two_nights_needs_only_their_run_records(tmp_path: Path) -> None:
    store = ObjectStore.open(StorageConfig(root=str(tmp_path / "data")))
    drive_run(store, StatsDB(tmp_path / "night-1" / "stats.duckdb"), FIRST, accepted=8)
    drive_run(store, StatsDB(tmp_path / "night-2" / "stats.duckdb"), SECOND, accepted=9)
    cache = StatsDB(tmp_path / "reader" / "cache.duckdb")
    sync_stats(store, cache, SECOND)
    context = load_context(store, cache.path, SECOND, failed=False)
    assert [(p.run_id, p.accepted, p.rejected_in_verify) for p in context.previous] == [(FIRST, 8, 2), (SECOND, 9, 1)]
    with cache.transaction() as con:  # the first night's sidecars were never read
        assert con.execute("SELECT count(*) FROM storage_files WHERE run_id = ?", [FIRST]).fetchone() == (0,)


def test_a_damaged_sidecar_is_reported_with_a_reason_code_and_skipped(local_root: tuple[Path, StatsDB]) -> None:
    root, _ = local_root
    sidecar = root / ShardPaths(FIRST, "verify", 0).metrics
    sidecar.write_bytes(sidecar.read_bytes()[:40])  # cut short
    summary, stderr = _stats_json([FIRST, "--set", f"storage.root={root}"])
    assert summary["problems"] == [{"path": ShardPaths(FIRST, "verify", 0).metrics, "reason": "metrics_invalid_json",
                                    "detail": summary["problems"][0]["detail"]}]
    assert f"warning: {ShardPaths(FIRST, 'verify', 0).metrics} skipped: metrics_invalid_json" in stderr
    assert [s["stage"] for s in summary["stages"]] == ["dialogues", "verify"]
    assert next(s for s in summary["stages"] if s["stage"] == "verify")["items_out"] == 0  # its shard is not counted


def test_an_empty_run_record_is_reported_and_the_other_runs_still_read(local_root: tuple[Path, StatsDB], tmp_path: Path) -> None:
    root, _ = local_root
    store = ObjectStore.open(StorageConfig(root=str(root)))
    drive_run(store, StatsDB(tmp_path / "machine-c" / "stats.duckdb"), SECOND, accepted=9)
    (root / record_path(SECOND)).write_bytes(b"")
    summary, stderr = _stats_json([FIRST, "--set", f"storage.root={root}"])
    assert summary["status"] == "failed"
    assert [(p["path"], p["reason"]) for p in summary["problems"]] == [(record_path(SECOND), "run_record_empty")]
    assert "run_record_empty" in stderr


def test_the_drivers_own_cache_reads_nothing_of_its_run_back(tmp_path: Path) -> None:
    store = ObjectStore.open(StorageConfig(root=str(tmp_path / "data")))
    driver = StatsDB(tmp_path / "data" / "stats.duckdb")
    drive_run(store, driver, FIRST, accepted=8)
    sync_stats(store, driver, FIRST)
    with driver.transaction() as con:
        assert con.execute("SELECT source, count(*) FROM storage_runs JOIN storage_files USING (run_id) GROUP BY 1").fetchall() == []
        assert con.execute("SELECT source FROM storage_runs WHERE run_id = ?", [FIRST]).fetchone() == ("driver",)


def test_an_s3_stats_path_is_one_config_error_naming_the_field() -> None:
    from toolfactory.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^invalid config: stats\.path: .*not a local file"):
        load_config(None, ["storage.root=s3://bucket/prefix", "stats.path=s3://bucket/stats.duckdb"])


def test_each_s3_root_has_its_own_cache_in_the_users_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    paths = {load_config(None, [f"storage.root=s3://bucket/{name}"]).stats_path() for name in ("a", "b", "b/")}
    assert len(paths) == 2 and all(Path(p).parent == tmp_path / "toolfactory" / "stats" for p in paths)
