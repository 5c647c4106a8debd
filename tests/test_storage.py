from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from toolfactory.config import StorageConfig
from toolfactory.models import Rejected, Tool
from toolfactory.storage.shards import ShardPaths, commit_shard, encode_records, read_metrics, read_records, read_rejected
from toolfactory.errors import ConfigError
from toolfactory.storage import ObjectStore, check_root


def _stores(tmp_path: Path, s3: dict[str, str] | None) -> ObjectStore:
    if s3 is None:
        return ObjectStore.open(StorageConfig(root=str(tmp_path / "data")))
    return ObjectStore.open(StorageConfig(root=f"s3://{s3['bucket']}/{tmp_path.name}", endpoint_url=s3["endpoint"]))


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    s3 = request.getfixturevalue("s3_server") if request.param == "s3" else None
    return _stores(tmp_path, s3)


def test_write_read_list_delete(store: ObjectStore) -> None:
    store.write_bytes("a/b/c.json", b"{}")
    store.write_bytes("a/d.json", b"[]")
    assert store.read_bytes("a/b/c.json") == b"{}"
    assert store.list("a") == ["a/b/c.json", "a/d.json"]
    assert store.read_bytes_or_none("a/missing.json") is None
    store.delete("a/d.json")
    assert not store.exists("a/d.json")


def test_shard_round_trip_with_rejections_and_metrics(store: ObjectStore) -> None:
    paths = ShardPaths("run-1", "tools", 3)
    tool = Tool(name="Weather", functions=[])
    rejected = Rejected(id="x", stage="tools", reasons=["tool_no_functions"], record={"name": "x"})
    rows, unstorable = encode_records([tool], "tools")
    assert unstorable == []
    commit_shard(store, paths, rows, [rejected], {"items_in": 2})
    assert paths.main == "runs/run-1/tools/part-00003.parquet"
    assert read_records(store, paths.main) == [tool.model_dump(exclude_none=True, mode="json")]
    [row] = read_rejected(store, paths.rejected)
    assert row["reasons"] == ["tool_no_functions"]
    assert read_metrics(store, paths) == {"items_in": 2}


def test_local_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    store = _stores(tmp_path, None)
    store.write_bytes("x/part-00000.parquet", b"data")
    assert [p.name for p in (tmp_path / "data" / "x").iterdir()] == ["part-00000.parquet"]


def test_s3_objects_are_real_objects_in_the_bucket(tmp_path: Path, s3_server: dict[str, str]) -> None:
    store = _stores(tmp_path, s3_server)
    store.write_bytes("runs/r/manifest.json", b"{}")
    client = boto3.client("s3", endpoint_url=s3_server["endpoint"], region_name="us-east-1")
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="toolfactory", Prefix=tmp_path.name)["Contents"]]
    assert keys == [f"{tmp_path.name}/runs/r/manifest.json"]


def test_temporary_files_of_a_killed_write_are_removed(tmp_path: Path) -> None:
    store = _stores(tmp_path, None)
    store.write_bytes("runs/r/tools/part-00000.parquet", b"done")
    (tmp_path / "data/runs/r/tools/.tmp-deadbeef").write_bytes(b"half")
    assert store.list("runs/r") == ["runs/r/tools/part-00000.parquet"]
    assert store.remove_temporary("runs/r") == 1
    assert [p.name for p in (tmp_path / "data/runs/r/tools").iterdir()] == ["part-00000.parquet"]


def test_a_record_no_file_can_hold_is_rejected_not_fatal(tmp_path: Path) -> None:
    store = _stores(tmp_path, None)
    lone_surrogate = json.loads('"weather \\ud800 report"')
    good, bad = Tool(name="Good"), Tool(name="Bad", description=lone_surrogate)
    rows, unstorable = encode_records([good, bad], "tools")
    assert [r[0] for r in rows] == [good.id]
    assert [(r.id, r.reasons) for r in unstorable] == [(bad.id, ["record_unserializable"])]
    unstorable[0].record = {"description": lone_surrogate}  # even the rejected copy can be written
    paths = ShardPaths("run-1", "tools", 0)
    commit_shard(store, paths, rows, unstorable, {})
    [row] = read_rejected(store, paths.rejected)
    assert json.loads(row["record"]) == {"description": lone_surrogate}


def test_a_root_that_is_a_file_is_a_config_error_naming_the_field(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("")
    for config in (StorageConfig(root=str(blocker)), StorageConfig(root=str(blocker / "inside"))):
        with pytest.raises(ConfigError, match=r"^storage\.root: ") as err:
            check_root(config)
        assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        ObjectStore.open(StorageConfig(root=str(blocker)))


def test_a_read_only_root_is_refused_by_a_real_write(small_tmpfs: Any) -> None:
    with pytest.raises(ConfigError, match=r"^storage\.root: cannot write in .*Read-only file system"):
        check_root(StorageConfig(root=str(small_tmpfs(read_only=True))))


def test_a_writable_root_passes_and_keeps_no_probe(tmp_path: Path) -> None:
    check_root(StorageConfig(root=str(tmp_path / "data")))
    assert list((tmp_path / "data").iterdir()) == []


def test_s3_exports_written_discarded_and_cleared_leave_no_folder_objects(tmp_path: Path, s3_server: dict[str, str]) -> None:
    from toolfactory.export.output import OutputDir

    out = OutputDir(f"s3://{s3_server['bucket']}/{tmp_path.name}/export", endpoint_url=s3_server["endpoint"])
    kept = out.open("train/kept.json")
    kept.write(b"{}")
    kept.commit()
    failed = out.open("test/failed.json")  # the only file of its folder
    failed.write(b"{")
    failed.discard()
    out.write_bytes("answers/a.json", b"{}")
    out.clear("answers")
    client = boto3.client("s3", endpoint_url=s3_server["endpoint"], region_name="us-east-1")
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=s3_server["bucket"], Prefix=tmp_path.name)["Contents"]]
    assert keys == [f"{tmp_path.name}/export/train/kept.json"]


def test_delete_tree_deletes_every_file_under_the_folder_only(store: ObjectStore) -> None:
    for path in ("a/b/1.json", "a/b/c/2.json", "a/bc/3.json", "a/4.json"):
        store.write_bytes(path, b"{}")
    store.delete_tree("a/b")
    store.delete_tree("a/missing")
    assert store.list("a") == ["a/4.json", "a/bc/3.json"]
