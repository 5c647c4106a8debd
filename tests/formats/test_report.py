"""verify_file end to end on every format: the report files, their consistency, and what is true
of the real data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from toolfactory.errors import ConfigError
from toolfactory.formats import NOT_APPLICABLE, UnreadableFile
from toolfactory.storage.shards import encode_records, records_table
from benchmarks.corpus import valid_dialogues
from toolfactory.stages.verify.report import verify_file

POLICY_RULES = ["filter_parse_error", "filter_search_not_finished", "filter_too_many_steps"]
KEYS = ["path", "format", "records", "parsed", "format_errors", "accepted", "rejected", "pass_rate", "rules", "warnings", "skipped_rules",
        "policy", "policy_source", "policies", "execution"]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def checked(report: dict[str, Any], out: Path, fmt: str) -> dict[str, Any]:
    """`report` after asserting what holds of every report."""
    assert list(report) == KEYS and report["format"] == fmt
    assert json.loads((out / "report.json").read_text()) == report
    assert report["records"] == report["parsed"] + sum(report["format_errors"].values())
    assert report["parsed"] == report["accepted"] + report["rejected"]
    assert report["pass_rate"] == (round(report["accepted"] / report["parsed"], 4) if report["parsed"] else 0.0)
    assert set(report["skipped_rules"]) >= NOT_APPLICABLE[fmt] and report["skipped_rules"] == sorted(report["skipped_rules"])
    rejected = lines(out / "rejected.jsonl")
    assert len(rejected) == report["rejected"]
    for line in rejected:
        assert line["codes"] and line["codes"] == sorted({e["code"] for e in line["errors"]})
        assert all(e["path"] and e["message"] for e in line["errors"])
    # rules counts records per code; every rejected record has at least one code, none is skipped
    assert report["rules"] == {code: sum(code in line["codes"] for line in rejected) for code in report["rules"]}
    assert not set(report["rules"]) & set(report["skipped_rules"])
    assert sum(report["policies"].values()) == (report["parsed"] if report["policy"] else 0)
    errors = lines(out / "format_errors.jsonl")
    assert len(errors) == sum(report["format_errors"].values())
    markdown = (out / "report.md").read_text()
    assert f"records: {report['records']}" in markdown and f"rejected: {report['rejected']}" in markdown
    for code in list(report["rules"])[:10]:
        assert f"`{code}`" in markdown
    return report


def test_toolalpaca_report(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "toolalpaca/eval_simulated.json"
    report = checked(verify_file(path, "toolalpaca", tmp_path), tmp_path, "toolalpaca")
    tools = json.loads(path.read_text())
    assert report["records"] == report["parsed"] == sum(len(t["Golden_Answers"]) for t in tools)

    def parses(text: str) -> bool:
        try:
            json.loads(text)
            return True
        except json.JSONDecodeError:
            return False

    # Golden answers chain steps with ${...} templates: exactly the inputs that are not JSON, and
    # each golden answer holding one is rejected with call_arguments_not_json.
    unparsed = [s["Action_Input"] for t in tools for g in t["Golden_Answers"] for s in g if not parses(s["Action_Input"])]
    assert unparsed and all("${" in text for text in unparsed)
    templated = sum(any(not parses(s["Action_Input"]) for s in g) for t in tools for g in t["Golden_Answers"])
    assert report["rules"]["call_arguments_not_json"] == templated == 30
    rejected = lines(tmp_path / "rejected.jsonl")
    enum_paths = {e["path"].rsplit("/", 1)[-1] for line in rejected for e in line["errors"] if e["code"] == "call_argument_enum"}
    assert enum_paths == {"gender", "size"}  # Axolotl's optional enums sent as ""
    # Only call_* rules fire on calls-only records once the shape's rules are skipped.
    assert all(code.startswith("call_") for code in report["rules"])
    assert "sample_unanswered_call" in report["skipped_rules"] and "dialogue_no_final_answer" in report["skipped_rules"]
    assert "`call_arguments_not_json` | 30 |" in (tmp_path / "report.md").read_text()


def test_toolbench_report(shared_data: Path, tmp_path: Path) -> None:
    report = checked(verify_file(shared_data / "toolbench/answer/G1_answer", "toolbench", tmp_path), tmp_path, "toolbench")
    # The released give_answer paths pass every rule; the answer whose search failed has no path.
    assert (report["records"], report["accepted"], report["rejected"], report["pass_rate"]) == (5, 4, 0, 1.0)
    assert report["format_errors"] == {"no_train_messages": 1}
    assert lines(tmp_path / "format_errors.jsonl")[0]["where"] == "69_ChatGPT_DFS_woFilter_w2.json"


def test_xlam_report(xlam_sample: Path, tmp_path: Path) -> None:
    report = checked(verify_file(xlam_sample, "xlam", tmp_path), tmp_path, "xlam")
    assert (report["records"], report["parsed"], report["accepted"], report["rejected"]) == (5, 4, 3, 1)
    assert report["format_errors"] == {"field_not_json": 1}
    # "limit": "10" for an "int, optional" parameter.
    assert report["rules"] == {"call_argument_type": 1}
    [line] = lines(tmp_path / "rejected.jsonl")
    assert (line["index"], line["id"], line["errors"][0]["path"]) == (2, "2", "messages[1].tool_calls[0].arguments/limit")


def test_openai_report(openai_sample: Path, tmp_path: Path) -> None:
    report = checked(verify_file(openai_sample, "openai", tmp_path), tmp_path, "openai")
    assert (report["records"], report["parsed"], report["accepted"], report["rejected"]) == (5, 4, 3, 1)
    assert report["format_errors"] == {"record_not_json": 1}
    assert report["rules"] == {"call_arguments_not_json": 1}  # single-quoted arguments
    # policy rules run only with --policy
    assert report["skipped_rules"] == ["dialogue_no_function_call", *POLICY_RULES]


def test_toolfactory_report(tmp_path: Path) -> None:
    rows, _ = encode_records(valid_dialogues(14, seed=1), "dialogues")
    pq.write_table(records_table(rows), tmp_path / "part-00000.parquet")
    report = checked(verify_file(tmp_path / "part-00000.parquet", "toolfactory", tmp_path / "out"), tmp_path / "out", "toolfactory")
    assert (report["records"], report["accepted"], report["skipped_rules"]) == (14, 14, POLICY_RULES)
    assert "Every parsed record passes" in (tmp_path / "out/report.md").read_text()


def test_disabled_rules_and_determinism(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "toolalpaca/eval_simulated.json"
    first = verify_file(path, "toolalpaca", tmp_path / "a", disabled={"call_arguments_not_json"})
    assert "call_arguments_not_json" in first["skipped_rules"] and "call_arguments_not_json" not in first["rules"]
    assert first["accepted"] > 62
    assert "`call_arguments_not_json`: disabled" in (tmp_path / "a/report.md").read_text()
    second = verify_file(path, "toolalpaca", tmp_path / "b", disabled={"call_arguments_not_json"})
    assert first == second
    for name in ("report.json", "report.md", "rejected.jsonl", "format_errors.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_bad_arguments(tmp_path: Path, xlam_sample: Path) -> None:
    with pytest.raises(ConfigError, match="unknown format"):
        verify_file(xlam_sample, "alpaca", tmp_path)
    with pytest.raises(ConfigError, match="unknown rule codes"):
        verify_file(xlam_sample, "xlam", tmp_path, disabled={"call_nonsense"})


@pytest.mark.parametrize("fmt", ["toolfactory", "openai", "toolbench", "xlam", "toolalpaca", "tooleval"])
@pytest.mark.parametrize("content", [b"", b"\x7fELF\x02\x01\x01\x00\xd0\xff", b'{"q1": {"query": "hi", "available_tools": [], "answer": {}}}\n'],
                         ids=["empty", "binary", "unknown-shape"])
def test_an_input_with_no_readable_record_is_unreadable_in_every_format(fmt: str, content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "input.json"
    path.write_bytes(content)
    with pytest.raises(UnreadableFile):  # the CLI's exit 2
        verify_file(path, fmt, tmp_path / "r")


def test_toolbench_all_paths_reads_every_path_of_the_search_trees(shared_data: Path, tmp_path: Path) -> None:
    report = verify_file(shared_data / "toolbench/answer/G1_answer", "toolbench", tmp_path, paths="all")
    # 16 root-to-leaf paths; the 4 that end with give_answer are the released winning paths.
    assert (report["records"], report["parsed"], report["accepted"]) == (16, 16, 4)
    # The others gave up or were abandoned (no final answer), and some call names ToolBench
    # itself marks as hallucinated (invalid_hallucination_function_name).
    assert set(report["rules"]) == {"dialogue_no_final_answer", "call_unknown_function"}
    assert all("dialogue_no_final_answer" in line["codes"] for line in lines(tmp_path / "rejected.jsonl"))


def test_paths_is_refused_for_other_formats(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--paths"):
        verify_file(tmp_path, "xlam", tmp_path / "r", paths="all")


def test_several_workers_write_the_same_report_as_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolfactory.stages.verify import parallel

    monkeypatch.setattr(parallel, "CHUNK", 7)  # several chunks per worker from a small file
    tools = json.dumps([{"name": "f", "description": "d", "parameters": {"n": {"type": "int"}}}])
    lines = []
    for i in range(40):
        n = "x" if i % 5 == 0 else i  # every fifth call has a wrong type
        lines.append(json.dumps({"id": i, "query": f"q{i}", "tools": tools, "answers": json.dumps([{"name": "f", "arguments": {"n": n}}])}))
    lines[13] = "{not json"
    lines[21] = '{"query": ' + "[" * 3000 + "]" * 3000 + "}"
    path = tmp_path / "x.jsonl"
    path.write_text("\n".join(lines) + "\n\n")
    serial = verify_file(path, "xlam", tmp_path / "one", workers=1)
    assert verify_file(path, "xlam", tmp_path / "two", workers=2) == serial
    assert serial["format_errors"] == {"record_not_json": 1, "record_too_deep": 1} and serial["rejected"] == 8
    for name in ("report.json", "report.md", "rejected.jsonl", "format_errors.jsonl"):
        assert (tmp_path / "one" / name).read_text() == (tmp_path / "two" / name).read_text()
