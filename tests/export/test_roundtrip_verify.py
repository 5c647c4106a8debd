"""Our exports verify clean: a real run of the factory on the simulator (the three recipes, with
the simulator's faults, so that ToolLLM's Finish and deliberate error recovery occur), exported in
every format and read back with a plain ``toolfactory verify --format <that format>``, accepts every
record the factory accepted. The same run is the suite's check that one run mixes the recipes and
that every dialogue records its recipe and the mode it shows.

The formats keep no recipe, and one policy does not fit records of several recipes (ToolAlpaca's
five-step cap would cut ToolLLM's paths; ToolLLM's policy keeps no error recovery): the export's
``PROVENANCE.md`` names the policy the run applied to each record, and ``verify`` applies it again
record by record, on the export's folder and on each split. Without it (``--policy none``, validity
only) the records that recovered from an API error are rejected. Formats ``verify`` has no reader
for are read back another way: ``hf`` through Hugging Face ``datasets`` into our records (each
recipe's own, with ``--policy <recipe>``), ``bfcl`` by BFCL's own AST checker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import small_run_overrides
from typer.testing import CliRunner

from toolfactory.cli import app
from toolfactory.config import StorageConfig
from toolfactory.export import SPLITS, export_run
from toolfactory.formats import FormatError, read
from toolfactory.models import Dialogue
from toolfactory.stages.dialogues.modes import shown_mode
from toolfactory.storage.shards import dataset_parts, read_records, stage_parts, write_rows
from toolfactory.stages.verify.policy import api_error
from toolfactory.storage import ObjectStore

from .helpers import RUN, open_store, write_run
from .test_bfcl_checker import Checker, checker, entries  # noqa: F401 - `checker` is a fixture

pytestmark = pytest.mark.e2e
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # the hf export is loaded offline: no hub access, ever
os.environ.setdefault("HF_HUB_OFFLINE", "1")
RECIPES = ("toolalpaca", "toolllm", "toolace")
API_KEY = "sk-roundtrip-never-stored-0123456789"
# The files `verify` reads of each format's export, per split.
VERIFIED = {"openai": "{split}.jsonl", "sharegpt": "{split}.jsonl", "xlam": "{split}.jsonl",
            "toolalpaca": "{split}.json", "toolbench": "answer/{split}"}


class FactoryRun:
    """The run's dataset and, per recipe, a store holding that recipe's records as the run's dataset."""

    def __init__(self, root: Path, summary: dict[str, Any], stores: Path) -> None:
        self.root, self.summary, self.run_id = root, summary, summary["run_id"]
        run_id = self.run_id
        store = ObjectStore.open(StorageConfig(root=str(root)))
        self.dataset = [Dialogue.model_validate(r) for path in dataset_parts(store, run_id) for r in read_records(store, path)]
        self.made = [Dialogue.model_validate(r) for path in stage_parts(store, run_id, "dialogues") for r in read_records(store, path)]
        pool = [(r["id"], json.dumps(r)) for path in stage_parts(store, run_id, "pool") for r in read_records(store, path)]
        self.stores: dict[str, ObjectStore] = {}
        for recipe in RECIPES:
            records = [d for d in self.dataset if d.recipe == recipe]
            if records:
                self.stores[recipe] = open_store(stores / recipe)
                write_run(self.stores[recipe], records)
                # the toolalpaca export documents the run's tools
                write_rows(self.stores[recipe], f"runs/{RUN}/pool/part-00000.parquet", pool)


@pytest.fixture(scope="module")
def factory_run(prefect_api: str, ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> FactoryRun:
    from flows.execute import summary_of
    from flows.generate import generate

    root = tmp_path_factory.mktemp("roundtrip") / "data"
    overrides = small_run_overrides(root, **{
        "tools.max_tools": 12,
        "tools.tools_per_shard": 6,
        "tasks.instructions_per_tool": 3,
        "tasks.recipes": "{toolalpaca: 1, toolllm: 1, toolace: 1}",
        # Faults the recipes answer: wrong calls get the API's error and are made again (error
        # recovery), a follow-up call, parallel calls, a question for a missing value.
        "llm.simulator.rate_missing_required": 0.2,
        "llm.simulator.rate_wrong_type": 0.1,
        "llm.simulator.rate_follow_up_call": 0.3,
        "llm.simulator.rate_parallel_calls": 0.2,
        "llm.simulator.rate_clarify": 0.1,
        "verify.judges": "[]",  # the judges have tests of their own; the rules decide here
    })
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", API_KEY)
        summary = summary_of(generate(config_path=None, overrides=overrides, run_id="roundtrip", return_state=True))
    return FactoryRun(root, summary, tmp_path_factory.mktemp("per-recipe"))


def recovers_from_an_error(dialogue: Dialogue) -> bool:
    return any(m.role == "tool" and api_error(m.content) for m in dialogue.messages) and dialogue.messages[-1].role == "assistant"


def test_the_run_holds_every_recipe_finish_and_error_recovery(factory_run: FactoryRun) -> None:
    """The cases the round trip must carry occur in the dataset the tests below export."""
    assert {d.recipe for d in factory_run.dataset} == set(RECIPES)
    assert any(d.recipe == "toolllm" and isinstance(d.generation.get("search"), dict) for d in factory_run.dataset)
    assert any(recovers_from_an_error(d) for d in factory_run.dataset)


def test_the_run_mixes_the_three_recipes_and_every_dialogue_records_its_recipe_and_mode(factory_run: FactoryRun) -> None:
    """Each recipe's tasks in one run, over the pool's tools, and what the dialogues stage made of
    them: the mode each dialogue shows, ToolLLM's search ended by Finish, ToolACE's thinking."""
    tasks = next(s for s in factory_run.summary["stages"] if s["stage"] == "tasks")
    assert set(tasks["profile"]["recipes"]) == set(RECIPES)
    assert tasks["profile"]["tool_uses"]["distinct"] <= tasks["profile"]["coverage"]["pool_tools"] == 12
    assert {d.recipe for d in factory_run.made} == set(RECIPES)
    assert all(d.mode == shown_mode(d) and d.target_mode for d in factory_run.made)
    for d in factory_run.made:
        if d.recipe == "toolllm":
            assert d.generation["search"]["finish_type"] == "give_answer"
        if d.recipe == "toolace":
            assert any(m.reasoning for m in d.messages if m.role == "assistant")


def verified_file(path: Path, fmt: str, recipe: str, reports: Path) -> Iterator[dict[str, Any]]:
    """The report of ``toolfactory verify path --format fmt --policy recipe``."""
    result = CliRunner().invoke(app, ["verify", str(path), "--format", fmt, "--policy", recipe, "--out", str(reports)])
    assert result.exit_code == 0, result.output
    yield json.loads((reports / "report.json").read_text())


def verified_plainly(path: Path, fmt: str, reports: Path, *args: str) -> dict[str, Any]:
    """The report of ``toolfactory verify path --format fmt`` (and `args`)."""
    result = CliRunner().invoke(app, ["verify", str(path), "--format", fmt, "--out", str(reports), *args])
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads((reports / "report.json").read_text())
    return report


def has_records(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir()) or path.is_file() and bool(path.read_text().strip("[] \n"))


@pytest.mark.parametrize("fmt", list(VERIFIED))
def test_every_exported_record_verifies_as_the_factory_verified_it(factory_run: FactoryRun, fmt: str, tmp_path: Path) -> None:
    """The run's dataset, its recipes mixed, read back from its export's folder and from each split."""
    store = ObjectStore.open(StorageConfig(root=str(factory_run.root)))
    out = tmp_path / "export"
    summary = export_run(store, factory_run.run_id, fmt, out)
    assert len(summary["recipes"]) > 1 and summary["exported"] > 0
    whole = verified_plainly(out, fmt, tmp_path / "whole")
    assert (whole["path"], whole["rules"], whole["format_errors"]) == (str(out), {}, {})
    assert (whole["records"], whole["accepted"]) == (summary["exported"], summary["exported"])
    assert (whole["policy"], whole["policy_source"], whole["policies"]) == ("per record", str(out / "PROVENANCE.md"), summary["recipes"])
    splits = [verified_plainly(out / VERIFIED[fmt].format(split=split), fmt, tmp_path / split)
              for split in SPLITS if has_records(out / VERIFIED[fmt].format(split=split))]
    assert [(r["path"], r["rules"]) for r in splits if r["accepted"] != r["records"]] == []
    assert sum(r["accepted"] for r in splits) == summary["exported"]


def test_without_the_exports_policy_validity_alone_rejects_the_recovered_calls(factory_run: FactoryRun, tmp_path: Path) -> None:
    store = ObjectStore.open(StorageConfig(root=str(factory_run.root)))
    summary = export_run(store, factory_run.run_id, "openai", tmp_path / "export")
    """A call answered with the API's error and made again correctly is ToolAlpaca's error recovery,
    which its policy keeps: its findings on the failed call are warnings there, errors without it."""
    validity = verified_plainly(tmp_path / "export", "openai", tmp_path / "r", "--policy", "none")
    assert validity["policy"] is None and validity["accepted"] < summary["exported"]


def dialogue_of(row: dict[str, Any]) -> Dialogue:
    """A row of the hf export, as `datasets` gives it, as our record (the fields the export keeps)."""
    messages = [{**{k: v for k, v in m.items() if k not in ("tool_calls", "masked", "train")},
                 "masked": m["masked"] or None,
                 "tool_calls": [{"id": c["id"], **c["function"]} for c in m["tool_calls"]] if m["tool_calls"] else None}
                for m in row["messages"]]
    tools = [{**t, "parameters": json.loads(t["parameters"]), "returns": json.loads(t["returns"])} for t in row["tools"]]
    return Dialogue.model_validate({
        **{k: row[k] for k in ("id", "recipe", "scenario", "mode", "target_mode", "llm_calls", "source_tools")},
        "task_id": row["id"], "messages": messages, "tools": tools, "generation": json.loads(row["generation"]),
        "models": {m["role"]: m["model"] for m in row["models"]},
    })


def test_hf_export_loaded_by_datasets_verifies(factory_run: FactoryRun, tmp_path: Path) -> None:
    """``verify`` reads no Parquet of the hf layout: the export is loaded as its users load it,
    with ``datasets``, turned back into our records and verified as ``--format toolfactory``."""
    datasets = pytest.importorskip("datasets", reason="the hf export is read with Hugging Face datasets")
    for recipe, store in factory_run.stores.items():
        summary = export_run(store, RUN, "hf", tmp_path / recipe)
        loaded = datasets.load_dataset(str(tmp_path / recipe), cache_dir=str(tmp_path / "cache"))
        records = tmp_path / f"{recipe}.jsonl"
        records.write_text("".join(dialogue_of(row).to_json() + "\n" for split in loaded.values() for row in split))
        (report,) = verified_file(records, "toolfactory", recipe, tmp_path / f"reports-{recipe}")
        assert (report["records"], report["accepted"], report["rules"]) == (summary["exported"], summary["exported"], {})


def test_bfcl_export_passes_bfcl_checker(factory_run: FactoryRun, checker: Checker, tmp_path: Path) -> None:  # noqa: F811
    """``verify`` has no BFCL reader: BFCL's own AST checker judges the export, each entry's model
    output being the record's own calls."""
    judged = 0
    for recipe, store in factory_run.stores.items():
        summary = export_run(store, RUN, "bfcl", tmp_path / recipe)
        verdicts = [(entry["id"], checker.judge(category, entry, answer, output))
                    for category, entry, answer, output in entries(tmp_path / recipe, checker, factory_run.dataset)]
        assert [(i, v.get("error")) for i, v in verdicts if not v["valid"]] == []
        assert len(verdicts) == summary["exported"]
        judged += len(verdicts)
    assert judged


def test_the_export_and_retriever_commands_read_the_finished_run(factory_run: FactoryRun, tmp_path: Path) -> None:
    """`toolfactory export` and `toolfactory retriever` as a user runs them, in a subprocess."""
    toolfactory = str(Path(sys.executable).with_name("toolfactory"))
    storage = ["--set", f"storage.root={factory_run.root}"]
    out = tmp_path / "openai"
    result = subprocess.run([toolfactory, "export", factory_run.run_id, "--format", "openai", "--out", str(out), *storage],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    accepted = len(factory_run.dataset)
    lines = [json.loads(line) for split in SPLITS for line in (out / f"{split}.jsonl").read_text().splitlines()]
    assert len(lines) == accepted and f"{accepted} of {accepted} records exported" in result.stdout
    assert all(line["tools"] for line in lines) and any(m.get("tool_calls") for line in lines for m in line["messages"])
    read_back = [d for split in SPLITS for d in read(out / f"{split}.jsonl", "openai")]
    assert len(read_back) == accepted and not any(isinstance(d, FormatError) for d in read_back)

    bad = subprocess.run([toolfactory, "export", factory_run.run_id, "--format", "nope", "--out", str(tmp_path / "x"), *storage],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "nope" in bad.stderr

    retriever = tmp_path / "retriever"
    result = subprocess.run([toolfactory, "retriever", factory_run.run_id, "--out", str(retriever), *storage],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert {"corpus.tsv", "report.json", "report.md"} <= {p.name for p in retriever.iterdir()}
    assert "bm25" in (retriever / "report.json").read_text().lower()
