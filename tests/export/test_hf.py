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

from toolfactory.curation.contamination import CONTAMINATED, Thresholds, checked
from toolfactory.curation.evaluation_sets import EvaluationSet, Item
from toolfactory.export import SPLITS, ExportOptions, SplitSpec, export_run, record_split
from toolfactory.config import validate_config
from toolfactory.run.manifest import Manifest, write_manifest
from toolfactory.models import Dialogue
from toolfactory.storage import ObjectStore
from toolfactory.storage.shards import write_rows

from .helpers import RUN, by_id, open_store, write_run

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
    assert "| generated in this run by recipe `verifier-corpus` with assistant: sim-assistant, user: sim-user | 70 |" in body
    assert "terms of use" in body and "toolfactory's seed catalog" in body and "I1-Tool" in body


def test_the_card_names_the_licences_of_imported_data(real_store: ObjectStore, tmp_path: Path) -> None:
    export_run(real_store, RUN, "hf", tmp_path / "out", splits=SplitSpec(by="category"))
    front, body = card(tmp_path / "out/README.md")
    rows = [line for line in body.splitlines() if line.startswith("| imported by")]
    assert [r for r in rows if r.startswith("| imported by the `toolbench` reader from ToolBench's released answer files") and r.endswith("| Apache-2.0 |")]
    assert [r for r in rows if r.startswith("| imported by the `toolalpaca` reader from ToolAlpaca's released tool files") and r.endswith("| Apache-2.0 |")]
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


def table_sums(body: str) -> dict[str, tuple[int, int]]:
    """Each Markdown table with a ``records`` column: (sum of that column, its row count), by header."""
    sums: dict[str, tuple[int, int]] = {}
    lines = body.splitlines()
    for n, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and "records" in cells and n + 1 < len(lines) and lines[n + 1].startswith("| ---"):
            column = cells.index("records")
            rows = []
            for row in lines[n + 2:]:
                if not row.startswith("|"):
                    break
                rows.append(int(row.strip().strip("|").split("|")[column].strip()))
            sums[line] = (sum(rows), len(rows))
    return sums


@pytest.mark.parametrize("store_fixture", ["run_store", "real_store"])
def test_every_table_of_the_card_sums_to_the_records(request: pytest.FixtureRequest, store_fixture: str, tmp_path: Path) -> None:
    summary = export_run(request.getfixturevalue(store_fixture), RUN, "hf", tmp_path / "out")
    _, body = card(tmp_path / "out/README.md")
    sums = table_sums(body)
    assert len(sums) >= 6  # splits, recipe, mode, scenario, tool sources, provenance
    assert {header: total for header, (total, _) in sums.items()} == dict.fromkeys(sums, summary["exported"])


def test_a_generated_record_is_never_called_imported(dialogues: list[Dialogue], tmp_path: Path) -> None:
    generated = [d.model_copy(update={"recipe": "toolalpaca"}) for d in dialogues[:5]]  # made by the toolalpaca recipe
    store = open_store(tmp_path / "store")
    write_run(store, generated)
    export_run(store, RUN, "hf", tmp_path / "out")
    front, body = card(tmp_path / "out/README.md")
    assert "imported" not in body.split("## Provenance")[1].split("## Models")[0]
    assert "| generated in this run by recipe `toolalpaca` with assistant: sim-assistant, user: sim-user | 5 |" in body
    assert front["license"] == "other"


def test_the_card_warns_when_the_run_used_the_simulator(dialogues: list[Dialogue], tmp_path: Path) -> None:
    store = open_store(tmp_path / "store")
    write_run(store, dialogues[:5])
    write_manifest(store, Manifest.create(RUN, validate_config({"llm": {"provider": "simulator"}}), {}))
    export_run(store, RUN, "hf", tmp_path / "out")
    _, body = card(tmp_path / "out/README.md")
    assert "offline LLM simulator" in body.split("## Splits")[0]
    assert "not real training data" in body


def test_no_simulator_warning_for_a_real_endpoint(dialogues: list[Dialogue], tmp_path: Path) -> None:
    store = open_store(tmp_path / "store")
    write_run(store, dialogues[:5])
    config = validate_config({"llm": {"provider": "openai-compatible", "base_url": "http://127.0.0.1:9/v1"}})
    write_manifest(store, Manifest.create(RUN, config, {}))
    export_run(store, RUN, "hf", tmp_path / "out")
    _, body = card(tmp_path / "out/README.md")
    assert "simulator" not in body and "terms of use" in body


def test_the_card_lists_what_the_records_were_decontaminated_against(dialogues: list[Dialogue], tmp_path: Path) -> None:
    store = open_store(tmp_path / "store")
    write_run(store, dialogues[:5])
    sets = [EvaluationSet("bfcl", tuple(Item(str(n), ("a question",)) for n in range(4)), "bfcl-eval"),
            EvaluationSet("toolbench", (), "shipped", skipped="the shipped index has no toolbench.jsonl.gz")]
    write_rows(store, f"runs/{RUN}/select/part-00000.parquet", [])
    store.write_bytes(f"runs/{RUN}/select/_metrics/part-00000.json", json.dumps({"profile": checked(sets, Thresholds())}).encode())
    write_rows(store, f"runs/{RUN}/curate/part-00000.parquet", [(d.id, d.to_json()) for d in dialogues[:5]])
    store.write_bytes(f"runs/{RUN}/curate/_metrics/part-00000.json",
                      json.dumps({"profile": {CONTAMINATED: {"bfcl: exact": 2, "bfcl: bag": 1}}}).encode())
    export_run(store, RUN, "hf", tmp_path / "out")
    _, body = card(tmp_path / "out/README.md")
    section = body.split("## Decontamination")[1].split("## Provenance")[0]
    assert "| bfcl | 4 | 3 |" in section and "toolbench was **not** checked: the shipped index has no" in section
    assert "a shared run of 13 words" in section
    _, plain = card(export_and_read(dialogues, tmp_path / "plain"))
    assert "were not checked against any benchmark" in plain.split("## Decontamination")[1]


def export_and_read(dialogues: list[Dialogue], root: Path) -> Path:
    store = open_store(root / "store")
    write_run(store, dialogues[:5])
    export_run(store, RUN, "hf", root / "out")
    return root / "out/README.md"
