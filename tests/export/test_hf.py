"""The ``hf`` export, loaded by Hugging Face ``datasets`` itself (offline): typed nested features,
the same records, and a dataset card whose ``configs`` ``load_dataset(<folder>)`` follows."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from toolfactory.export import SPLITS, ExportOptions, SplitSpec, export_run, record_split
from toolfactory.models import Dialogue
from toolfactory.storage import ObjectStore

from .helpers import RUN, by_id

# Offline, before `datasets` is imported: no hub access, ever.
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
datasets = pytest.importorskip("datasets", reason="the hf export is checked with Hugging Face datasets (pip install datasets)")


def card(path: Path) -> tuple[dict[str, Any], str]:
    text = path.read_text()
    _, front, body = text.split("---\n", 2)
    return yaml.safe_load(front), body


def test_load_dataset_reads_typed_nested_features(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    export_run(run_store, RUN, "hf", tmp_path / "out")
    files = {s: str(tmp_path / f"out/data/{s}.parquet") for s in SPLITS}
    loaded = datasets.load_dataset("parquet", data_files=files, cache_dir=str(tmp_path / "cache"))
    features = loaded["train"].features
    message = features["messages"].feature
    assert isinstance(features["messages"], datasets.List)
    assert {k: message[k].dtype for k in ("role", "content", "tool_call_id", "name")} == dict.fromkeys(("role", "content", "tool_call_id", "name"), "string")
    assert message["tool_calls"].feature["function"]["arguments"].dtype == "string"
    assert features["tools"].feature["parameters"].dtype == "string" and features["llm_calls"].dtype == "int64"
    assert "reasoning" not in message and message["masked"].dtype == "bool"
    originals = by_id(dialogues)
    for split in SPLITS:
        assert all(record_split(originals[row["id"]], SplitSpec(), 0)[0] == split for row in loaded[split])
        for row in loaded[split]:
            original = originals[row["id"]]
            assert [m["role"] for m in row["messages"]] == [m.role for m in original.messages]
            assert [m["content"] for m in row["messages"]] == [m.content for m in original.messages]
            assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for m in row["messages"] for c in m["tool_calls"] or []] == [
                (c.id, c.name, c.arguments) for m in original.messages for c in m.tool_calls or []]
            assert [json.loads(t["parameters"]) for t in row["tools"]] == [f.parameters for f in original.tools]
            assert [t["id"] for t in row["source_tools"]] == [t.id for t in original.source_tools]
    assert sum(len(loaded[s]) for s in SPLITS) == len(dialogues)


def test_the_card_declares_the_splits_and_load_dataset_follows_it(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    summary = export_run(run_store, RUN, "hf", tmp_path / "out")
    front, body = card(tmp_path / "out/README.md")
    assert front["configs"] == [{"config_name": "default", "data_files": [
        {"split": s, "path": f"data/{s}.parquet"} for s in SPLITS]}]
    assert front["license"] == "other" and front["size_categories"] == ["n<1K"]
    loaded = datasets.load_dataset(str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"))
    assert {s: len(loaded[s]) for s in SPLITS} == summary["splits"]
    for split, count in summary["splits"].items():
        assert f"| {split} | {count} |" in body
    # the models that wrote the data and the terms that come with them
    assert "| assistant: sim-assistant | 70 |" in body and "terms of use" in body
    assert "toolfactory's seed catalog" in body and "I1-Tool" in body


def test_the_card_names_the_licences_of_imported_data(real_store: ObjectStore, tmp_path: Path) -> None:
    export_run(real_store, RUN, "hf", tmp_path / "out", splits=SplitSpec(by="category"))
    front, body = card(tmp_path / "out/README.md")
    assert "| dialogues (recipe toolbench) | imported from ToolBench's released data | Apache-2.0 |" in body
    assert "| dialogues (recipe toolalpaca) | imported from ToolAlpaca's released data | Apache-2.0 |" in body
    assert "No model was recorded" in body and "I1-Cat" in body
    # splits without records are not declared: `datasets` cannot load an empty split
    declared = [f["split"] for f in front["configs"][0]["data_files"]]
    loaded = datasets.load_dataset(str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"))
    assert sorted(loaded) == sorted(declared) and all(len(loaded[s]) for s in declared)


def test_reasoning_is_a_feature_only_when_asked(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    export_run(run_store, RUN, "hf", tmp_path / "out", options=ExportOptions(include_reasoning=True))
    loaded = datasets.load_dataset(str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"))
    assert loaded["train"].features["messages"].feature["reasoning"].dtype == "string"
    exported = [m["reasoning"] for s in SPLITS for row in loaded[s] for m in row["messages"] if m["reasoning"]]
    assert sorted(exported) == sorted(m.reasoning for d in dialogues for m in d.messages if m.reasoning)


def test_an_empty_split_keeps_its_file_but_is_not_declared(run_store: ObjectStore, tmp_path: Path) -> None:
    summary = export_run(run_store, RUN, "hf", tmp_path / "out", splits=SplitSpec(train=0.9, validation=0.0, test=0.1))
    assert summary["splits"]["validation"] == 0 and summary["files"]["data/validation.parquet"] == 0
    assert pq.read_table(tmp_path / "out/data/validation.parquet").num_rows == 0
    front, _ = card(tmp_path / "out/README.md")
    assert [f["split"] for f in front["configs"][0]["data_files"]] == ["train", "test"]
    loaded = datasets.load_dataset(str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"))
    assert sorted(loaded) == ["test", "train"]
