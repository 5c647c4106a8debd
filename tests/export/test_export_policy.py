"""The policy travels with the export: ``PROVENANCE.md`` says how the run's verify stage judged each
record (its recipe's policy, with the run's settings), and a plain ``toolfactory verify`` of the
export, its folder, a split or one answer file, applies it again record by record; ``--policy``
still wins. A run of the valid corpus whose records are given two recipes, and a configuration
that caps ToolAlpaca's records at one call: a single policy for all would reject the others."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from toolfactory.cli import app
from toolfactory.config import validate_config
from toolfactory.export import SPLITS, export_run
from toolfactory.stages.verify.export_policy import DEFAULTS, FINISH_ADDED, FINISH_OFFERED, NOTE, RUN_CONFIGURATION, ExportPolicy, find, front_matter
from toolfactory.models import Dialogue
from toolfactory.run.manifest import Manifest, write_manifest
from toolfactory.stages.verify.limits import Limits
from toolfactory.stages.verify.policy import for_recipe
from toolfactory.stages.verify.rules import check, errors
from toolfactory.storage import ObjectStore

from .helpers import RUN, corpus, open_store, write_run

READ_BACK = ["openai", "sharegpt", "xlam", "toolalpaca", "toolbench"]
SETTINGS = {"max_steps": {"toolalpaca": 1}, "keep_error_recovery": ["toolalpaca"], "disabled_rules": ["tool_description_missing"],
            "max_depth": 70, "max_record_chars": 1_500_000}


def calls(dialogue: Dialogue) -> int:
    return sum(len(m.tool_calls or []) for m in dialogue.messages)


@pytest.fixture
def mixed() -> list[Dialogue]:
    """The corpus with ToolAlpaca's recipe on its records of at most one call, ToolLLM's on the
    others: those the verify stage accepts with the run's settings (the rules, as its own)."""
    recovery, limits = SETTINGS["keep_error_recovery"], Limits(SETTINGS["max_depth"], SETTINGS["max_record_chars"])
    mixed = [d.model_copy(update={"recipe": "toolalpaca" if calls(d) <= 1 else "toolllm"}) for d in corpus(70, seed=3)]
    return [d for d in mixed if not errors(check(d, frozenset(SETTINGS["disabled_rules"]), limits,
                                                 for_recipe(d.recipe, SETTINGS["max_steps"], recovery)))]


@pytest.fixture
def store(tmp_path: Path, mixed: list[Dialogue]) -> ObjectStore:
    store = open_store(tmp_path / "store")
    write_run(store, mixed)
    write_manifest(store, Manifest.create(RUN, validate_config({"verify": SETTINGS}), {}))
    return store


def verify(path: Path, fmt: str, out: Path, *args: str) -> tuple[dict[str, Any], str]:
    result = CliRunner().invoke(app, ["verify", str(path), "--format", fmt, "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    return json.loads((out / "report.json").read_text()), result.output


def note(folder: Path) -> dict[str, Any]:
    meta = front_matter((folder / NOTE).read_text())
    assert meta is not None
    return meta


@pytest.mark.parametrize("fmt", READ_BACK)
def test_a_plain_verify_of_the_export_applies_each_records_policy(store: ObjectStore, fmt: str, tmp_path: Path) -> None:
    summary = export_run(store, RUN, fmt, tmp_path / "out")
    meta = note(tmp_path / "out")["verify"]
    assert (meta["read_as"], meta["settings"], meta["disabled_rules"], meta["max_depth"]) == (fmt, RUN_CONFIGURATION,
                                                                                             ["tool_description_missing"], 70)
    toolalpaca = {"recipe": "toolalpaca", "max_steps": 1, "keep_error_recovery": True, "builtin_functions": ["getDetails"]}
    assert meta["policies"]["toolalpaca"] == toolalpaca
    assert meta["policies"]["toolllm"] == {"recipe": "toolllm", "max_steps": None, "keep_error_recovery": False, "builtin_functions": []}
    if fmt == "toolbench":  # its paths end with a Finish call: one step more than the run counted
        assert meta["policies"]["toolalpaca, Finish added"] == {**toolalpaca, "max_steps": 2, "change": "Finish added", "not_applicable": []}
    # The main policy's records are not listed; records of one content share their hash.
    listed = sum(len(ids) for ids in meta["records"].values())
    assert 0 < listed < summary["exported"] and meta["policy"] not in meta["records"]

    report, output = verify(tmp_path / "out", fmt, tmp_path / "r")
    assert (report["records"], report["accepted"]) == (summary["exported"], summary["exported"]), report["rules"]
    assert (report["policy"], report["policy_source"], report["policies"]) == ("per record", str(tmp_path / "out" / NOTE), summary["recipes"])
    assert "tool_description_missing" in report["skipped_rules"]
    assert f"policy: each record's recipe's, as the factory verified the export ({tmp_path / 'out' / NOTE})" in output
    for split in SPLITS:  # one split alone: a file, or ToolBench's folder of answer files
        path = tmp_path / "out" / (f"answer/{split}" if fmt == "toolbench" else f"{split}.json{'l' if fmt != 'toolalpaca' else ''}")
        if summary["splits"][split]:
            alone, _ = verify(path, fmt, tmp_path / f"r-{split}")
            assert alone["accepted"] == alone["records"] == summary["splits"][split] and alone["policy"] == "per record"


def test_one_policy_for_every_record_would_reject_the_other_recipes(store: ObjectStore, tmp_path: Path) -> None:
    summary = export_run(store, RUN, "openai", tmp_path / "out")
    text = (tmp_path / "out" / NOTE).read_text()
    meta = note(tmp_path / "out")
    meta["verify"].update(policy="toolalpaca", records={})  # as if the note named no record's recipe
    (tmp_path / "out" / NOTE).write_text("---\n" + yaml.safe_dump(meta) + "---\n" + text.split("\n---\n", 1)[1])
    report, _ = verify(tmp_path / "out", "openai", tmp_path / "r")
    assert report["rules"] == {"filter_too_many_steps": summary["recipes"]["toolllm"]}


def test_an_explicit_policy_wins(store: ObjectStore, tmp_path: Path) -> None:
    export_run(store, RUN, "xlam", tmp_path / "out")
    report, output = verify(tmp_path / "out", "xlam", tmp_path / "none", "--policy", "none")
    assert (report["policy"], report["policy_source"], report["policies"]) == (None, "--policy none", {})
    assert "filter_too_many_steps" in report["skipped_rules"] and "policy: none, validity only (--policy none)" in output
    report, output = verify(tmp_path / "out", "xlam", tmp_path / "toolllm", "--policy", "toolllm")
    assert (report["policy"], report["policy_source"], report["policies"]) == ("toolllm", "--policy toolllm", {"toolllm": report["parsed"]})
    assert "tool_description_missing" not in report["skipped_rules"]  # the export's settings go with its policy


def test_the_note_of_the_export_an_input_belongs_to(store: ObjectStore, tmp_path: Path) -> None:
    export_run(store, RUN, "toolbench", tmp_path / "out")
    export_run(store, RUN, "openai", tmp_path / "openai")
    answer = next((tmp_path / "out/answer").glob("*/*.json"))
    for path in (tmp_path / "out", tmp_path / "out/answer", answer.parent, answer):
        found = find(path, "toolbench")
        assert found.policy is not None and found.policy.source == str(tmp_path / "out" / NOTE), path
        assert found.policy.of(_dialogue(answer.stem)) is not None
    assert "is of a toolbench export, read as --format toolbench" in find(tmp_path / "out", "openai").why_not
    (tmp_path / "openai/mine.jsonl").write_text((tmp_path / "openai/train.jsonl").read_text())
    assert "is none of the files" in find(tmp_path / "openai/mine.jsonl", "openai").why_not
    (tmp_path / "elsewhere").mkdir()
    assert find(tmp_path / "elsewhere", "openai") == (None, f"no {NOTE} of an export beside {tmp_path / 'elsewhere'}")


def _dialogue(record_id: str) -> Dialogue:
    return Dialogue(id=record_id, task_id=record_id, tools=[], messages=[], recipe="toolbench", mode="non_tool")


def test_a_note_whose_verify_settings_do_not_read_stops_verify(store: ObjectStore, tmp_path: Path) -> None:
    export_run(store, RUN, "openai", tmp_path / "out")
    path = tmp_path / "out" / NOTE
    path.write_text(path.read_text().replace("keep_error_recovery: true", "keep_error_recovery: often", 1))
    result = CliRunner().invoke(app, ["verify", str(tmp_path / "out"), "--format", "openai", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert f"{path}: verify: policies.toolalpaca.keep_error_recovery must be true or false" in result.output
    assert CliRunner().invoke(app, ["verify", str(tmp_path / "out"), "-f", "openai", "-o", str(tmp_path / "r"), "--policy", "none"]).exit_code == 0


def test_a_run_without_a_manifest_states_the_defaults(tmp_path: Path, mixed: list[Dialogue]) -> None:
    store = open_store(tmp_path / "store")
    write_run(store, mixed)
    export_run(store, RUN, "hf", tmp_path / "hf")
    meta = note(tmp_path / "hf")["verify"]
    assert (meta["read_as"], meta["settings"], meta["records"]) == (None, DEFAULTS, {})  # hf rows name their recipe
    assert meta["policies"]["toolalpaca"]["max_steps"] == 5 and "## Verification" in (tmp_path / "hf" / NOTE).read_text()


def test_the_front_matter_reads_back_as_written() -> None:
    read_back = {("toolalpaca", None): ["a", "c"], ("toolllm", None): ["b"], ("toolace", None): ["d"], ("toolalpaca", FINISH_ADDED): ["e"],
                 ("toolllm", FINISH_ADDED): ["f"], ("toolace", FINISH_OFFERED): ["g"]}
    policy = ExportPolicy.of_run(["toolalpaca"] * 3 + ["toolllm"] * 2 + ["toolace"] * 2, read_back, "openai", max_steps={"toolalpaca": 3},
                                 keep_error_recovery=[], disabled_rules=["x"], limits=Limits(9, 99))
    # A Finish added to ToolLLM's records changes nothing its policy judges: they are its records.
    assert policy.default == "toolalpaca" and dict(policy.records) == {"b": "toolllm", "d": "toolace", "e": "toolalpaca, Finish added",
                                                                       "f": "toolllm", "g": "toolace, Finish offered by its entry"}
    back = ExportPolicy.from_front_matter(yaml.safe_load(yaml.safe_dump(policy.to_front_matter())), "note")
    assert back == replace(policy, source="note")
    judged = {i: back.of(_dialogue(i)) for i in "abcdefgh"}
    assert {i: (j.policy.name, j.policy.max_steps, sorted(j.not_applicable)) for i, j in judged.items() if j} == {
        "a": ("toolalpaca", 3, []), "b": ("toolllm", None, []), "c": ("toolalpaca", 3, []), "d": ("toolace", None, []),
        "e": ("toolalpaca", 4, []), "f": ("toolllm", None, []), "g": ("toolace", None, ["filter_search_not_finished"]),
        "h": ("toolalpaca", 3, [])}
