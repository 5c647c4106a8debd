"""Damaged committed files are found, named and rebuilt: shards, pool files and JSON sidecars,
on a local root and on moto's S3 server."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from typer.testing import CliRunner

from export.helpers import corpus
from toolfactory.run.attempts import attempt_usage
from toolfactory.storage.checksums import CHECKSUM_MISMATCH, MISSING, SIZE_MISMATCH, UNREADABLE, sum_path
from toolfactory.cli import app
from toolfactory.config import StorageConfig
from toolfactory.errors import TerminalError
from toolfactory.export import export_run
from toolfactory.run.integrity import check_run, pool_advice, pool_damage, shards_to_rebuild, uncommit
from toolfactory.run.manifest import Manifest, write_manifest
from toolfactory.run.pool import TOOLS, pool_files
from toolfactory.storage.shards import METRICS_UNREADABLE, ShardPaths, commit_shard, read_metrics, write_rows, write_summed_rows
from toolfactory.stages import ShardSpec
from toolfactory.run.stats import StatsDB
from toolfactory.storage import ObjectStore

RUN = "run-damaged"


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "local":
        return ObjectStore.open(StorageConfig(root=str(tmp_path / "data")))
    s3 = request.getfixturevalue("s3_server")
    return ObjectStore.open(StorageConfig(root=f"s3://{s3['bucket']}/{tmp_path.name}", endpoint_url=s3["endpoint"]))


def _plan() -> dict[str, list[ShardSpec]]:
    """Two one-to-one chains into a fan-in stage and a one-to-one stage after it."""
    main = lambda stage, i: ShardPaths(RUN, stage, i).main  # noqa: E731
    return {
        "dialogues": [ShardSpec("dialogues", i, (f"runs/{RUN}/sources/part-{i:05d}.parquet",)) for i in (0, 1)],
        "verify": [ShardSpec("verify", i, (main("dialogues", i),)) for i in (0, 1)],
        "select": [ShardSpec("select", 0, (main("verify", 0), main("verify", 1)), {"pool_tools": ["pool/tools/earlier.parquet"]})],
        "curate": [ShardSpec("curate", i, (main("verify", i), main("select", 0))) for i in (0, 1)],
    }


def _commit_all(store: ObjectStore, plan: dict[str, list[ShardSpec]]) -> None:
    write_summed_rows(store, "pool/tools/earlier.parquet", [("t0", "{}")])
    for i in (0, 1):
        commit_shard(store, ShardPaths(RUN, "sources", i), [(f"s{i}", "{}")], [], {"items": 1})
    for specs in plan.values():
        for spec in specs:
            rows = [(f"{spec.stage}-{spec.index}-{k}", json.dumps({"k": k})) for k in range(20)]
            commit_shard(store, ShardPaths(RUN, spec.stage, spec.index), rows, [], {"items_in": 20})


def _truncate(store: ObjectStore, path: str) -> None:
    data = store.read_bytes(path)
    store.write_bytes(path, data[: len(data) // 2])


def test_an_intact_run_checks_clean_and_each_committed_file_is_counted(store: ObjectStore) -> None:
    plan = _plan()
    _commit_all(store, plan)
    found = check_run(store, RUN, plan)
    assert found.ok
    assert found.checked == 3 * (7 + 2)  # metrics, rejected and main of 7 shards and 2 inputs


def test_a_truncated_shard_is_named_and_rebuilt_with_what_read_it(store: ObjectStore) -> None:
    plan = _plan()
    _commit_all(store, plan)
    damaged = ShardPaths(RUN, "dialogues", 1).main
    _truncate(store, damaged)
    found = check_run(store, RUN, plan)
    assert [(d.path, d.reason) for d in found.damaged] == [(damaged, SIZE_MISMATCH)]
    assert "bytes" in found.damaged[0].line(store) and store.uri(damaged) in found.damaged[0].line(store)
    rebuild = shards_to_rebuild(found, plan, RUN)
    # dialogues 1 -> verify 1 -> select 0 (fan-in) -> both curate shards; dialogues 0 and verify 0 are intact
    assert [(s.stage, s.index) for s in rebuild] == [("dialogues", 1), ("verify", 1), ("select", 0), ("curate", 0), ("curate", 1)]
    uncommit(store, RUN, rebuild)
    assert [store.exists(ShardPaths(RUN, s.stage, s.index).main) for s in rebuild] == [False] * 5
    assert store.exists(ShardPaths(RUN, "verify", 0).main)
    assert check_run(store, RUN, plan).ok  # not committed any more: nothing damaged, five shards to run


def test_a_changed_byte_is_found_only_by_the_checksum(store: ObjectStore) -> None:
    plan = _plan()
    _commit_all(store, plan)
    path = ShardPaths(RUN, "verify", 0).main
    data = bytearray(store.read_bytes(path))
    data[len(data) // 2] ^= 0xFF
    store.write_bytes(path, bytes(data))
    assert check_run(store, RUN, plan).ok  # the size is right
    assert [(d.path, d.reason) for d in check_run(store, RUN, plan, checksums=True).damaged] == [(path, CHECKSUM_MISMATCH)]


def test_a_shard_without_recorded_sums_must_open_as_parquet(tmp_path: Path) -> None:
    store = ObjectStore.open(StorageConfig(root=str(tmp_path)))
    plan = {"verify": [ShardSpec("verify", 0, ())]}
    paths = ShardPaths(RUN, "verify", 0)
    write_rows(store, paths.rejected, [])
    write_rows(store, paths.main, [("a", "{}")] * 50)
    store.write_bytes(paths.metrics, b'{"items_in": 50}')  # a sidecar from before sums were recorded
    assert check_run(store, RUN, plan).ok
    _truncate(store, paths.main)
    [damage] = check_run(store, RUN, plan).damaged
    assert (damage.path, damage.reason) == (paths.main, UNREADABLE)


def test_an_empty_metrics_sidecar_is_damage_and_never_an_error(store: ObjectStore) -> None:
    plan = _plan()
    _commit_all(store, plan)
    paths = ShardPaths(RUN, "curate", 0)
    store.write_bytes(paths.metrics, b"")
    assert read_metrics(store, paths) is None  # not done: running it again writes it anew
    found = check_run(store, RUN, plan)
    assert [(d.path, d.reason) for d in found.damaged] == [(paths.metrics, METRICS_UNREADABLE)]
    assert [(s.stage, s.index) for s in shards_to_rebuild(found, plan, RUN)] == [("curate", 0)]


def test_a_main_part_gone_under_a_committed_reader_is_missing(store: ObjectStore) -> None:
    plan = _plan()
    _commit_all(store, plan)
    path = ShardPaths(RUN, "dialogues", 0).main
    store.delete(path)
    found = check_run(store, RUN, plan)
    assert [(d.path, d.reason) for d in found.damaged] == [(path, MISSING)]
    assert ("verify", 0) in {(s.stage, s.index) for s in shards_to_rebuild(found, plan, RUN)}


def test_a_damaged_run_input_cannot_be_rebuilt_and_says_so(store: ObjectStore) -> None:
    plan = _plan()
    _commit_all(store, plan)
    path = ShardPaths(RUN, "sources", 1).main
    _truncate(store, path)
    found = check_run(store, RUN, plan)
    assert [d.path for d in found.beyond] == [path] and not found.shards


def test_a_truncated_pool_file_is_left_out_of_planning_and_named_with_advice_that_works(store: ObjectStore) -> None:
    good, bad = f"{TOOLS}/older.parquet", f"{TOOLS}/{RUN}.parquet"
    write_summed_rows(store, good, [("t1", "{}")])
    write_summed_rows(store, bad, [(f"t{k}", "{}") for k in range(100)])
    assert store.exists(sum_path(bad))
    assert pool_files(store, TOOLS) == (good, bad)
    _truncate(store, bad)
    assert pool_files(store, TOOLS) == (good,)
    [damage] = pool_damage(store)
    assert (damage.path, damage.reason) == (bad, SIZE_MISMATCH)
    # No run on the root wrote it: removing it is the advice; with its run there, a re-run of that run.
    assert pool_advice(store, bad).startswith(f"no run on this root wrote it: delete {store.uri(bad)}")
    write_manifest(store, Manifest(run_id=RUN, created_at="2026-01-01T00:00:00", config={}, versions={}, plan={}))
    assert pool_advice(store, bad) == f"`toolfactory rerun {RUN} --set storage.root={store.url}` writes it again"


def test_a_new_run_plans_without_a_damaged_pool_file(tmp_path: Path) -> None:
    from conftest import small_run_overrides
    from toolfactory.config import load_config
    from toolfactory.run.planning import plan_run

    config = load_config(None, small_run_overrides(tmp_path / "data"))
    store = ObjectStore.open(config.storage)
    good, bad = f"{TOOLS}/older.parquet", f"{TOOLS}/truncated.parquet"
    write_summed_rows(store, good, [("t1", "{}")])
    write_summed_rows(store, bad, [(f"t{k}", "{}") for k in range(100)])
    _truncate(store, bad)
    plan = plan_run(config, "next-night", store)
    named = {path for specs in plan.values() for spec in specs for path in spec.params.get("pool_tools", [])
             if path.startswith("pool/")}
    assert named == {good}


def test_the_run_that_wrote_a_pool_file_finds_it_damaged_and_rewrites_it(tmp_path: Path) -> None:
    """Its own pool files are checked with the run; a re-run publishes them again (flows/execute.py)."""
    store = ObjectStore.open(StorageConfig(root=str(tmp_path)))
    own = f"{TOOLS}/{RUN}.1.parquet"
    write_summed_rows(store, own, [(f"t{k}", "{}") for k in range(100)])
    _truncate(store, own)
    found = check_run(store, RUN, {})
    assert [d.path for d in found.damaged] == [own] and not found.beyond


def test_an_empty_usage_file_is_counted_and_stops_nothing(tmp_path: Path) -> None:
    store = ObjectStore.open(StorageConfig(root=str(tmp_path)))
    good = {"attempt_id": "a1", "run_id": RUN, "stage": "tasks", "shard": 0, "outcome": "completed",
            "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:00:01+00:00", "llm": {"calls": 3},
            "llm_by_role": {}}
    store.write_bytes(f"runs/{RUN}/tasks/_usage/part-00000/a1.json", json.dumps(good).encode())
    store.write_bytes(f"runs/{RUN}/tasks/_usage/part-00001/b2.json", b"")
    attempts = list(attempt_usage(store, RUN, "tasks"))
    assert [(a.attempt_id, a.shard, a.outcome) for a in attempts] == [("a1", 0, "completed"), ("b2", 1, "unreadable")]
    stats = StatsDB(tmp_path / "stats.duckdb")
    assert stats.record_attempts(attempts) == 2
    import duckdb

    with duckdb.connect(str(stats.path), read_only=True) as con:
        assert con.execute("SELECT outcome, llm_calls FROM shard_attempts ORDER BY attempt_id").fetchall() == [
            ("completed", 3), ("unreadable", 0)]


def test_export_of_a_damaged_run_names_the_file_in_one_line(store: ObjectStore, tmp_path: Path) -> None:
    dialogues = corpus(6)
    for i, part in enumerate((dialogues[:3], dialogues[3:])):
        commit_shard(store, ShardPaths(RUN, "curate", i), [(d.id, d.to_json()) for d in part], [], {})
    damaged = ShardPaths(RUN, "curate", 1).main
    _truncate(store, damaged)
    with pytest.raises(TerminalError) as caught:
        export_run(store, RUN, "openai", tmp_path / "out")
    message = str(caught.value)
    assert "\n" not in message and store.uri(damaged) in message and SIZE_MISMATCH in message
    assert not (tmp_path / "out").exists()  # refused before writing anything


def test_check_run_cli_names_each_damaged_file_and_exits_1(tmp_path: Path) -> None:
    root = tmp_path / "data"
    store = ObjectStore.open(StorageConfig(root=str(root)))
    plan = _plan()
    write_manifest(store, Manifest(run_id=RUN, created_at="2026-01-01T00:00:00", config={}, versions={},
                                   plan={stage: [s.to_dict() for s in specs] for stage, specs in plan.items()}))
    _commit_all(store, plan)
    runner = CliRunner()
    clean = runner.invoke(app, ["check-run", RUN, "--set", f"storage.root={root}"])
    assert clean.exit_code == 0, clean.output
    assert "27 committed files intact" in clean.output
    damaged = ShardPaths(RUN, "verify", 1).main
    _truncate(store, damaged)
    before = {p: (root / p).read_bytes() for p in store.list("runs")}
    result = runner.invoke(app, ["check-run", RUN, "--set", f"storage.root={root}"])
    assert result.exit_code == 1
    assert f"damaged: {SIZE_MISMATCH}: {store.uri(damaged)}" in result.output
    assert f"toolfactory rerun {RUN} --set storage.root={store.url}" in result.output
    assert {p: (root / p).read_bytes() for p in store.list("runs")} == before  # read-only


def test_s3_listing_gives_the_sizes_the_check_compares(tmp_path: Path, s3_server: dict[str, str]) -> None:
    store = ObjectStore.open(StorageConfig(root=f"s3://{s3_server['bucket']}/{tmp_path.name}", endpoint_url=s3_server["endpoint"]))
    store.write_bytes("runs/r/x.parquet", b"12345")
    s3 = boto3.client("s3", endpoint_url=s3_server["endpoint"], region_name="us-east-1")
    [listed] = s3.list_objects_v2(Bucket=s3_server["bucket"], Prefix=f"{tmp_path.name}/runs/r/")["Contents"]
    assert store.sizes("runs/r/") == {"runs/r/x.parquet": listed["Size"]} == {"runs/r/x.parquet": 5}


def _metrics(run_dir: Path, stage: str, index: int) -> dict[str, object]:
    return dict(json.loads((run_dir / stage / "_metrics" / f"part-{index:05d}.json").read_text()))


def _dataset(run_dir: Path) -> list[tuple[str, str]]:
    import pyarrow.parquet as pq

    return sorted(row for path in sorted(run_dir.glob("curate/part-*.parquet"))
                  for row in zip(*pq.read_table(path).to_pydict().values()))


@pytest.mark.e2e
def test_a_truncated_shard_of_a_finished_run_is_rebuilt_downstream_and_the_dataset_is_the_same(
    prefect_api: str, ray_cluster: None, tmp_path: Path
) -> None:
    """One finished run: a dialogues part and the run's pool file are truncated; check-run names
    both; rerun builds the part again with verify, measure, select and curate after it, writes the
    pool file again, and the dataset is the one the clean run made."""
    from conftest import small_run_overrides
    from flows.execute import summary_of
    from flows.generate import generate
    from flows.rerun import rerun

    root, run_id = tmp_path / "data", "integrity-e2e"
    first = summary_of(generate(overrides=small_run_overrides(root, **{"run.run_id": run_id, "tools.tools_per_shard": 4}), return_state=True))
    assert first["status"] == "completed"
    run_dir = root / "runs" / run_id
    clean = _dataset(run_dir)
    assert clean
    parts = sorted(run_dir.glob("dialogues/part-*.parquet"))
    assert len(parts) >= 2
    damaged, pool_file = parts[-1], root / "pool" / "tools" / f"{run_id}.parquet"
    index = int(damaged.stem.removeprefix("part-"))
    before = {(stage, i): _metrics(run_dir, stage, i)["attempt_id"] for stage in ("dialogues", "verify", "measure", "curate")
              for i in (0, index)}
    for path in (damaged, pool_file):
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    checked = CliRunner().invoke(app, ["check-run", run_id, "--set", f"storage.root={root}"])
    assert checked.exit_code == 1
    assert f"damaged: {SIZE_MISMATCH}: {damaged}" in checked.output and f"{SIZE_MISMATCH}: {pool_file}" in checked.output
    # `stats` reports the damage too (a completed run whose files changed since), changing nothing
    shown = CliRunner().invoke(app, ["stats", run_id, "--json", "--set", f"storage.root={root}"])
    assert shown.exit_code == 0 and f"warning: damaged: {SIZE_MISMATCH}: {damaged}" in shown.stderr
    assert any(str(damaged) in line for line in json.loads(shown.stdout)["damaged"])

    again = summary_of(rerun(run_id=run_id, overrides=[f"storage.root={root}"], return_state=True))
    assert again["status"] == "completed"
    store = ObjectStore.open(StorageConfig(root=str(root)))
    assert check_run(store, run_id, {}).ok and pool_files(store, TOOLS) == (f"{TOOLS}/{run_id}.parquet",)
    after = {key: _metrics(run_dir, *key)["attempt_id"] for key in before}
    rebuilt = {key for key in before if after[key] != before[key]}
    # the damaged chain and every curate shard (after the fan-in select); the other chain untouched
    assert rebuilt == {("dialogues", index), ("verify", index), ("measure", index), ("curate", 0), ("curate", index)}
    assert _dataset(run_dir) == clean
    assert CliRunner().invoke(app, ["check-run", run_id, "--set", f"storage.root={root}"]).exit_code == 0


def _keys(s3_server: dict[str, str], prefix: str) -> list[str]:
    client = boto3.client("s3", endpoint_url=s3_server["endpoint"], region_name="us-east-1")
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=s3_server["bucket"], Prefix=prefix)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def _mirror(s3_server: dict[str, str], prefix: str, into: Path) -> int:
    """A plain boto3 mirror of the keys under `prefix`: each key a file of the same path."""
    client = boto3.client("s3", endpoint_url=s3_server["endpoint"], region_name="us-east-1")
    keys = _keys(s3_server, prefix)
    for key in keys:
        target = into / key
        target.parent.mkdir(parents=True, exist_ok=True)
        client.download_file(s3_server["bucket"], key, str(target))
    return len(keys)


def test_a_rebuild_on_s3_leaves_no_folder_objects_and_mirrors_to_files(tmp_path: Path, s3_server: dict[str, str]) -> None:
    store = ObjectStore.open(StorageConfig(root=f"s3://{s3_server['bucket']}/{tmp_path.name}", endpoint_url=s3_server["endpoint"]))
    plan = _plan()
    _commit_all(store, plan)
    _truncate(store, ShardPaths(RUN, "dialogues", 1).main)
    rebuild = shards_to_rebuild(check_run(store, RUN, plan), plan, RUN)
    uncommit(store, RUN, rebuild)  # each shard's main part was the only file of its name in its folder
    assert [key for key in _keys(s3_server, tmp_path.name) if key.endswith("/")] == []
    for spec in rebuild:
        commit_shard(store, ShardPaths(RUN, spec.stage, spec.index), [(f"{spec.stage}-{spec.index}", "{}")], [], {"items_in": 1})
    store.write_bytes(f"runs/{RUN}/report/stale.png", b"png")
    store.delete(f"runs/{RUN}/report/stale.png")  # the report's only file, deleted
    store.write_bytes(f"runs/{RUN}/export/bfcl/train/a.json", b"{}")
    store.delete_tree(f"runs/{RUN}/export/bfcl/train")
    keys = _keys(s3_server, tmp_path.name)
    assert [key for key in keys if key.endswith("/")] == []
    assert _mirror(s3_server, tmp_path.name, tmp_path / "mirror") == len(keys)
    assert check_run(store, RUN, plan).ok


def test_a_run_start_removes_the_folder_objects_an_older_delete_left(tmp_path: Path, s3_server: dict[str, str]) -> None:
    store = ObjectStore.open(StorageConfig(root=f"s3://{s3_server['bucket']}/{tmp_path.name}", endpoint_url=s3_server["endpoint"]))
    plan = _plan()
    _commit_all(store, plan)
    neighbour = f"runs/{RUN}-2/dialogues/part-00000.parquet"
    store.write_bytes(neighbour, b"x")
    for path in (ShardPaths(RUN, "curate", 1).main, neighbour):
        store.fs.delete_file(f"{store.base}/{path}")  # pyarrow's delete: it writes the parent's folder object
    ours, theirs = f"{tmp_path.name}/runs/{RUN}/curate/", f"{tmp_path.name}/runs/{RUN}-2/dialogues/"
    assert {key for key in _keys(s3_server, tmp_path.name) if key.endswith("/")} == {ours, theirs}
    assert store.remove_temporary(f"runs/{RUN}") == 1  # what every run and re-run does first
    assert [key for key in _keys(s3_server, tmp_path.name) if key.endswith("/")] == [theirs]  # another run's: left
    assert store.exists(ShardPaths(RUN, "curate", 0).main) and store.exists(ShardPaths(RUN, "dialogues", 1).main)
