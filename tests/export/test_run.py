"""export_run itself: which shards it reads, its summary, skipped records, errors, streaming,
files that appear whole, and an S3 destination."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import toolfactory.export.run as run_module
from toolfactory.export import FORMATS, SPLITS, ExportError, OutputDir, export_run
from toolfactory.storage.shards import dataset_parts
from toolfactory.export.openai import OpenAIExporter
from toolfactory.models import Dialogue
from toolfactory.storage.shards import write_rows
from toolfactory.config import StorageConfig
from toolfactory.storage import ObjectStore

from .helpers import RUN, open_store, read_jsonl, write_run


def test_only_the_accepted_shards_are_read(run_store: ObjectStore) -> None:
    shards = dataset_parts(run_store, RUN)
    assert shards == [f"runs/{RUN}/verify/part-{n:05d}.parquet" for n in range(3)]


def test_the_summary_counts_splits_files_and_make_up(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    summary = export_run(run_store, RUN, "xlam", tmp_path)
    assert summary["run_id"] == RUN and summary["format"] == "xlam" and summary["shards"] == 3
    assert summary["records"] == len(dialogues)
    assert summary["exported"] + sum(summary["skipped"].values()) == len(dialogues)
    assert summary["files"] == {f"{s}.jsonl": summary["splits"][s] for s in SPLITS}
    assert all(len(read_jsonl(tmp_path / f"{s}.jsonl")) == summary["splits"][s] for s in SPLITS)
    assert {e["reason"] for e in summary["skipped_examples"]} == set(summary["skipped"]) == {"not_single_turn", "calls_in_several_turns"}
    assert set(summary["tool_sources"]) == {"catalog"}
    assert sum(summary["modes"].values()) == summary["exported"]


def test_a_record_the_model_refuses_is_skipped_with_its_reason(tmp_path: Path, dialogues: list[Dialogue]) -> None:
    store = open_store(tmp_path / "store")
    rows = [(d.id, d.to_json()) for d in dialogues[:3]] + [("broken", json.dumps({"id": "broken", "messages": "nope"}))]
    write_rows(store, f"runs/{RUN}/verify/part-00000.parquet", rows)
    summary = export_run(store, RUN, "openai", tmp_path / "out")
    assert summary["records"] == 4 and summary["exported"] == 3
    assert summary["skipped"] == {"invalid_record": 1}
    assert summary["skipped_examples"][0]["id"] == "broken" and summary["skipped_examples"][0]["detail"]


def test_unknown_format_and_missing_run_are_export_errors(run_store: ObjectStore, tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="unknown export format 'alpaca' .formats: " + ", ".join(FORMATS)):
        export_run(run_store, RUN, "alpaca", tmp_path / "out")
    with pytest.raises(ExportError, match="run 'nope' has no dataset"):
        export_run(run_store, "nope", "openai", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_records_are_written_as_each_shard_is_read(run_store: ObjectStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    read = run_module.read_records
    monkeypatch.setattr(run_module, "read_records", lambda store, path: events.append("read") or read(store, path))
    write = OpenAIExporter.write
    monkeypatch.setattr(OpenAIExporter, "write", lambda self, split, d: events.append("write") or write(self, split, d))
    export_run(run_store, RUN, "openai", tmp_path)
    reads = [i for i, e in enumerate(events) if e == "read"]
    assert len(reads) == 3
    # 25 records of a shard are written before the next shard is read
    assert events[reads[0] + 1: reads[1]] == ["write"] * 25 and events[reads[1] + 1: reads[2]] == ["write"] * 25


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_failed_export_leaves_no_files(run_store: ObjectStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    exporter = run_module.EXPORTERS[fmt]
    write = exporter.write
    seen: list[int] = []

    def failing(self: Any, split: str, dialogue: Dialogue) -> None:
        seen.append(1)
        if len(seen) == 40:
            raise RuntimeError("disk full")
        write(self, split, dialogue)

    monkeypatch.setattr(exporter, "write", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        export_run(run_store, RUN, fmt, tmp_path / "out")
    assert [p for p in (tmp_path / "out").rglob("*") if p.is_file()] == []


def test_a_new_toolbench_export_replaces_the_answers_of_the_last(run_store: ObjectStore, tmp_path: Path) -> None:
    stale = tmp_path / "answer/train/from-another-export.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    summary = export_run(run_store, RUN, "toolbench", tmp_path)
    assert not stale.exists()
    assert {s: len(list((tmp_path / "answer" / s).glob("*.json"))) for s in SPLITS} == summary["splits"]


def test_an_s3_destination(run_store: ObjectStore, s3_server: dict[str, str]) -> None:
    import boto3

    out = OutputDir("s3://toolfactory/exports/run-1", endpoint_url=s3_server["endpoint"])
    summary = export_run(run_store, RUN, "openai", out)
    client = boto3.client("s3", endpoint_url=s3_server["endpoint"], region_name="us-east-1")
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket="toolfactory", Prefix="exports/run-1/")["Contents"])
    assert keys == sorted([*(f"exports/run-1/{s}.jsonl" for s in SPLITS), "exports/run-1/PROVENANCE.md"])
    body = client.get_object(Bucket="toolfactory", Key="exports/run-1/train.jsonl")["Body"].read().decode()
    assert len(body.splitlines()) == summary["splits"]["train"] and summary["out"] == "s3://toolfactory/exports/run-1"


def test_the_export_command_writes_to_the_storage_s3_endpoint(tmp_path: Path, dialogues: list[Dialogue],
                                                              s3_server: dict[str, str]) -> None:
    import subprocess
    import sys

    import boto3

    # The run lives on the test's S3 server, named only by storage.endpoint_url (no AWS_ENDPOINT_URL).
    storage = ["--set", "storage.root=s3://toolfactory/data", "--set", f"storage.endpoint_url={s3_server['endpoint']}",
               "--set", "storage.region=eu-west-3", "--set", "storage.max_attempts=1", "--set", "storage.timeout_s=5"]
    write_run(ObjectStore.open(StorageConfig(root="s3://toolfactory/data", endpoint_url=s3_server["endpoint"])), dialogues)
    toolfactory = str(Path(sys.executable).with_name("toolfactory"))
    result = subprocess.run([toolfactory, "export", RUN, "--format", "openai", "--out", "s3://toolfactory/exports/cli", *storage],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    client = boto3.client("s3", endpoint_url=s3_server["endpoint"], region_name="us-east-1")
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket="toolfactory", Prefix="exports/cli/")["Contents"])
    assert keys == sorted([*(f"exports/cli/{s}.jsonl" for s in SPLITS), "exports/cli/PROVENANCE.md"])


def test_an_s3_destination_takes_the_storage_settings_or_its_own() -> None:
    storage = StorageConfig(root="s3://toolfactory/data", endpoint_url="http://127.0.0.1:1", region="eu-west-3", max_attempts=2)
    out = OutputDir("s3://other/exports", endpoint_url="http://127.0.0.1:2", region="us-west-2", storage=storage)
    assert out.store.s3 == ("http://127.0.0.1:2", "us-west-2", 2, storage.timeout_s)
    assert out.url == "s3://other/exports"


def test_the_export_command_takes_an_s3_endpoint_of_its_own(tmp_path: Path, dialogues: list[Dialogue],
                                                           s3_server: dict[str, str]) -> None:
    import subprocess
    import sys

    import boto3

    write_run(open_store(tmp_path / "store"), dialogues)  # a local run, exported to S3
    toolfactory = str(Path(sys.executable).with_name("toolfactory"))
    result = subprocess.run([toolfactory, "export", RUN, "--format", "xlam", "--out", "s3://toolfactory/exports/own",
                             "--out-endpoint-url", s3_server["endpoint"], "--out-region", "us-east-1",
                             "--set", f"storage.root={tmp_path / 'store'}"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    client = boto3.client("s3", endpoint_url=s3_server["endpoint"], region_name="us-east-1")
    assert client.list_objects_v2(Bucket="toolfactory", Prefix="exports/own/")["KeyCount"] == len(SPLITS) + 1  # and PROVENANCE.md
