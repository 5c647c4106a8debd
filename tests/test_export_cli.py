"""`toolfactory export` and `toolfactory retriever` on a finished run (real Prefect, Ray, simulator)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import small_run_overrides
from toolfactory.formats import FormatError, read

TOOLFACTORY = str(Path(sys.executable).with_name("toolfactory"))
pytestmark = pytest.mark.e2e


def test_a_run_exports_to_openai_jsonl_and_retriever_data(prefect_api: str, ray_cluster: None, tmp_path: Path) -> None:
    from flows.generate import generate

    root = tmp_path / "data"
    summary = generate(config_path=None, overrides=small_run_overrides(root, **{"verify.judges": "[]"}))
    accepted = next(s for s in summary["stages"] if s["stage"] == "verify")["items_out"]
    assert accepted > 0
    out = tmp_path / "openai"
    result = subprocess.run([TOOLFACTORY, "export", summary["run_id"], "--format", "openai", "--out", str(out),
                             "--set", f"storage.root={root}"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for split in ("train", "validation", "test") for line in (out / f"{split}.jsonl").read_text().splitlines()]
    assert len(lines) == accepted and f"{accepted} of {accepted} records exported" in result.stdout
    assert all(line["tools"] and any(m.get("tool_calls") for m in line["messages"]) for line in lines)
    read_back = [d for split in ("train", "validation", "test") for d in read(out / f"{split}.jsonl", "openai")]
    assert len(read_back) == accepted and not any(isinstance(d, FormatError) for d in read_back)

    bad = subprocess.run([TOOLFACTORY, "export", summary["run_id"], "--format", "nope", "--out", str(tmp_path / "x"),
                          "--set", f"storage.root={root}"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "nope" in bad.stderr

    retriever = tmp_path / "retriever"
    result = subprocess.run([TOOLFACTORY, "retriever", summary["run_id"], "--out", str(retriever), "--set", f"storage.root={root}"],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert {"corpus.tsv", "report.json", "report.md"} <= {p.name for p in retriever.iterdir()}
    report = json.loads((retriever / "report.json").read_text())
    assert "bm25" in json.dumps(report).lower()
