"""Every record judged alone: whatever one record of an input holds, `toolfactory verify` writes its
report, that record gets a reason code and every other record is judged (serially and with
`--workers 2`); the factory's verify stage never fails a shard for one record."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from typer.testing import CliRunner

from toolfactory.cli import app
from toolfactory.config import Config
from toolfactory.stages.base import ShardContext, ShardSpec
from toolfactory.stages.verify.rules import RULES
from toolfactory.stages.verify.rules.registry import Sample
from toolfactory.stages.verify.stage import VerifyStage

from .helpers import dialogue

HUGE = "9" * 5000  # past Python's int-to-string limit (4300 digits)
SCHEMA = {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}
ANSWER = "The value is three, as the function reported for the request you made."


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["verify", *args])


def report_of(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text())


def rejected_of(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "rejected.jsonl").read_text().splitlines()]


# -- one record of each format, as JSON text whose value `n` the caller chooses -----------------

def openai_record(i: int, n: str = "3", arguments: str | None = None, extra: str = "") -> str:
    arguments = arguments if arguments is not None else json.dumps(json.dumps({"n": 3}))
    return (f'{{"id": "r{i}", "weight": {n}{extra}, "tools": [{{"type": "function", "function": {{"name": "f", "description": "A function.", '
            f'"parameters": {json.dumps(SCHEMA)}}}}}], "messages": [{{"role": "user", "content": "What is f of {i}?"}}, '
            f'{{"role": "assistant", "tool_calls": [{{"id": "c1", "type": "function", "function": {{"name": "f", '
            f'"arguments": {arguments}}}}}]}}, {{"role": "tool", "tool_call_id": "c1", "content": "{{\\"v\\": 3}}"}}, '
            f'{{"role": "assistant", "content": "{ANSWER}"}}]}}')


def xlam_record(i: int, n: str = "3", answers: str | None = None) -> str:
    tools = json.dumps(json.dumps([{"name": "f", "description": "A function.", "parameters": {"n": {"type": "float"}}}]))
    answers = answers if answers is not None else json.dumps(json.dumps([{"name": "f", "arguments": {"n": 3}}]))
    return f'{{"id": "r{i}", "query": "What is f of {i}?", "count": {n}, "tools": {tools}, "answers": {answers}}}'


def toolfactory_record(i: int, n: str = "3") -> str:
    d = dialogue()
    d.id = f"r{i}"
    return d.to_json().replace('"llm_calls":0', f'"llm_calls":{n}', 1)


def jsonl(build: Callable[..., str]) -> Callable[[Path, list[str]], Path]:
    def write(folder: Path, ns: list[str]) -> Path:
        path = folder / "input.jsonl"
        path.write_text("".join(build(i, n) + "\n" for i, n in enumerate(ns)))
        return path
    return write


def toolbench_files(folder: Path, ns: list[str]) -> Path:
    answers = folder / "answers"
    answers.mkdir()
    finish = {"name": "Finish", "description": "Finish.", "parameters": {"type": "object", "properties": {}}}
    for i, n in enumerate(ns):
        path = [{"role": "system", "content": "You are AutoGPT."}, {"role": "user", "content": f"What is f of {i}?"},
                {"role": "assistant", "content": "", "function_call": {"name": "f", "arguments": '{"n": 3}'}},
                {"role": "function", "name": "f", "content": '{"v": 3}'},
                {"role": "assistant", "content": "", "function_call": {"name": "Finish", "arguments": json.dumps(
                    {"return_type": "give_answer", "final_answer": ANSWER})}}]
        text = json.dumps({"answer_generation": {"valid_data": True, "query": f"What is f of {i}?", "count": 0, "train_messages": [path],
                                                 "function": [{"name": "f", "description": "A function.", "parameters": SCHEMA}, finish]}})
        (answers / f"{i}_DFS.json").write_text(text.replace('"count": 0', f'"count": {n}'))
    return answers


def toolalpaca_file(folder: Path, ns: list[str]) -> Path:
    documentation = {"openapi": "3.0.0", "info": {"title": "F", "version": "1"}, "paths": {"/f": {"get": {
        "operationId": "f", "description": "A function.", "parameters": [{"name": "n", "in": "query", "required": True, "schema": {"type": "number"}}],
        "responses": {"200": {"description": "The value."}}}}}}
    goldens = [f'[{{"Action": "f", "Action_Input": {{"n": {n}}}}}]' for n in ns]
    tool = (f'{{"Name": "F", "Description": "F.", "Documentation": {json.dumps(json.dumps(documentation))}, '
            f'"Instructions": {json.dumps([f"What is f of {i}?" for i in range(len(ns))])}, "Golden_Answers": [{", ".join(goldens)}]}}')
    path = folder / "eval.json"
    path.write_text(f"[{tool}]")
    return path


def tooleval_file(folder: Path, ns: list[str], name: str = "answers.json") -> Path:
    records = []
    for i, n in enumerate(ns):
        chain = [{"role": "system", "message": "", "next": [{"role": "user", "message": "q", "next": [
            {"role": "tool", "message": str({"name": "f", "arguments": '{"n": 3}', "response": "3"}), "next": [
                {"role": "tool", "message": str({"name": "Finish", "arguments": "{}", "response": ""}), "next": []}]}]}]}]
        record = {"query": f"What is f of {i}?", "available_tools": [{"name": "f", "description": "A function.", "parameters": SCHEMA}],
                  "answer": {"method": "DFS", "total_steps": 0, "final_answer": ANSWER, "answer_details": chain}}
        records.append(f'"q{i}": ' + json.dumps(record).replace('"total_steps": 0', f'"total_steps": {n}'))
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{" + ", ".join(records) + "}")
    return path


WRITERS: dict[str, Callable[[Path, list[str]], Path]] = {
    "openai": jsonl(openai_record), "xlam": jsonl(xlam_record), "toolfactory": jsonl(toolfactory_record),
    "toolbench": toolbench_files, "toolalpaca": toolalpaca_file, "tooleval": tooleval_file,
}


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("fmt", list(WRITERS))
def test_an_integer_python_cannot_read_fails_only_its_record(fmt: str, workers: str, tmp_path: Path) -> None:
    path = WRITERS[fmt](tmp_path, ["3", "3", HUGE, "3"])
    result = cli(str(path), "--format", fmt, "--out", str(tmp_path / "r"), "--workers", workers)
    assert result.exit_code == 0, result.output
    report = report_of(tmp_path / "r")
    assert (report["records"], report["parsed"], report["format_errors"]) == (4, 3, {"record_unreadable": 1})
    (error,) = [json.loads(line) for line in (tmp_path / "r/format_errors.jsonl").read_text().splitlines()]
    assert error["index"] == 2 and "5000 digits" in error["message"]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_line_that_is_not_utf8_is_that_records_error(workers: str, tmp_path: Path) -> None:
    path = tmp_path / "input.jsonl"
    path.write_bytes((openai_record(0) + "\n").encode() + b'{"id": "bad", "messages": "\xff\xfe"}\n' + (openai_record(2) + "\n").encode())
    result = cli(str(path), "--format", "openai", "--out", str(tmp_path / "r"), "--workers", workers)
    assert result.exit_code == 0, result.output
    report = report_of(tmp_path / "r")
    assert (report["records"], report["accepted"], report["format_errors"]) == (3, 2, {"record_not_json": 1})
    assert "not UTF-8" in (tmp_path / "r/format_errors.jsonl").read_text()


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("fmt", ["openai", "xlam"])
def test_a_lone_surrogate_is_invalid_characters_of_its_record(fmt: str, workers: str, tmp_path: Path) -> None:
    lines = [(openai_record if fmt == "openai" else xlam_record)(i) for i in range(3)]
    lines[1] = lines[1].replace("What is f of 1?", "What is f of \\ud800?").replace('"id": "r1", ', "")  # id: a content hash
    path = tmp_path / "input.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = cli(str(path), "--format", fmt, "--out", str(tmp_path / "r"), "--workers", workers)
    assert result.exit_code == 0, result.output
    report = report_of(tmp_path / "r")
    assert (report["records"], report["accepted"], report["rules"]) == (3, 2, {"dialogue_invalid_characters": 1})
    assert [line["index"] for line in rejected_of(tmp_path / "r")] == [1]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_record_whose_judging_raises_is_record_check_error(workers: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A rule that fails on one record (a library refusing one of its values): forked workers inherit it.
    def fails_on_r1(sample: Sample) -> Iterator[tuple[str, str]]:
        if sample.dialogue.id == "r1":
            raise ValueError("a value this rule's library refuses")
        yield from ()

    monkeypatch.setitem(RULES, "call_unknown_function", replace(RULES["call_unknown_function"], fn=fails_on_r1))
    path = tmp_path / "input.jsonl"
    path.write_text("\n".join(openai_record(i) for i in range(3)) + "\n")
    result = cli(str(path), "--format", "openai", "--out", str(tmp_path / "r"), "--workers", workers)
    assert result.exit_code == 0, result.output
    assert report_of(tmp_path / "r")["rules"] == {"record_check_error": 1}
    (line,) = rejected_of(tmp_path / "r")
    assert line["id"] == "r1" and line["errors"][0]["message"] == "call_unknown_function: ValueError: a value this rule's library refuses"


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_integer_python_cannot_read_in_call_arguments_is_record_unreadable(workers: str, tmp_path: Path) -> None:
    # The arguments text parses as JSON only up to Python's integer limit: the rules could not read it
    # (every format alike: tests/formats/test_every_format.py).
    lines = [openai_record(i) for i in range(3)]
    lines[1] = openai_record(1, arguments=json.dumps('{"n": ' + HUGE + "}"))
    path = tmp_path / "input.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = cli(str(path), "--format", "openai", "--out", str(tmp_path / "r"), "--workers", workers)
    assert result.exit_code == 0, result.output
    assert (report_of(tmp_path / "r")["rules"], report_of(tmp_path / "r")["format_errors"]) == ({}, {"record_unreadable": 1})
    assert "4300 digits" in (tmp_path / "r/format_errors.jsonl").read_text()


# (number text, what the message says): Python reads 1e400 as an infinity, which no JSON writer
# can write back, so it is refused like the constants.
NON_FINITE = [("NaN", "NaN is not a JSON number"), ("Infinity", "Infinity is not a JSON number"),
              ("-Infinity", "Infinity is not a JSON number"), ("1e400", "1e400 is not a finite number"),
              ("-1E+400", "-1E+400 is not a finite number")]


@pytest.mark.parametrize(("number", "message"), NON_FINITE, ids=[n for n, _ in NON_FINITE])
def test_a_non_finite_number_in_arguments_is_not_json(number: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "input.jsonl"
    path.write_text(openai_record(0) + "\n" + openai_record(1, arguments=json.dumps('{"n": ' + number + "}")) + "\n")
    result = cli(str(path), "--format", "openai", "--out", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    (line,) = rejected_of(tmp_path / "r")
    assert line["codes"] == ["call_arguments_not_json"] and message in line["errors"][0]["message"]


@pytest.mark.parametrize(("number", "message"), NON_FINITE[::3], ids=[n for n, _ in NON_FINITE[::3]])
def test_a_non_finite_number_elsewhere_in_a_record_is_a_format_error(number: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "input.jsonl"
    path.write_text(openai_record(0) + "\n" + openai_record(1, extra=', "weight": ' + number) + "\n")
    result = cli(str(path), "--format", "openai", "--out", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    assert report_of(tmp_path / "r")["format_errors"] == {"record_not_json": 1}
    assert message in (tmp_path / "r/format_errors.jsonl").read_text()


@pytest.mark.parametrize(("number", "message"), NON_FINITE[::3], ids=[n for n, _ in NON_FINITE[::3]])
def test_a_non_finite_number_in_one_element_of_a_json_list_file_is_that_records_format_error(
        number: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "input.json"
    path.write_text("[" + openai_record(0) + ",\n" + openai_record(1, extra=', "weight": ' + number) + ",\n" + openai_record(2) + "]")
    result = cli(str(path), "--format", "openai", "--out", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    report = report_of(tmp_path / "r")
    assert (report["format_errors"], report["accepted"]) == ({"record_not_json": 1}, 2)
    assert message in (tmp_path / "r/format_errors.jsonl").read_text()


@pytest.mark.parametrize("number", ["NaN", "1e400"])
def test_a_non_finite_number_in_xlam_answers_is_not_json(number: str, tmp_path: Path) -> None:
    path = tmp_path / "input.jsonl"
    path.write_text(xlam_record(0) + "\n" + xlam_record(1, answers=json.dumps('[{"name": "f", "arguments": {"n": ' + number + '}}]')) + "\n")
    result = cli(str(path), "--format", "xlam", "--out", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    assert report_of(tmp_path / "r")["format_errors"] == {"field_not_json": 1}


# -- bytes that are not UTF-8 in a format whose file is one JSON document ----------------------


def test_bad_bytes_in_one_element_of_a_json_list_refuse_only_that_record(tmp_path: Path) -> None:
    path = tmp_path / "input.json"
    bad = openai_record(1).replace("What is f of 1?", "What is f of \x00?").encode().replace(b"\x00", b"\xff\xfe")
    path.write_bytes(b"[" + openai_record(0).encode() + b",\n" + bad + b",\n" + openai_record(2).encode() + b"]")
    result = cli(str(path), "--format", "openai", "--out", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    report = report_of(tmp_path / "r")
    assert (report["records"], report["accepted"], report["format_errors"]) == (3, 2, {"record_not_json": 1})
    (error,) = [json.loads(line) for line in (tmp_path / "r/format_errors.jsonl").read_text().splitlines()]
    assert error["index"] == 1 and "not UTF-8" in error["message"]


def test_bad_bytes_in_one_tooleval_record_refuse_only_that_record(tmp_path: Path) -> None:
    path = tooleval_file(tmp_path, ["3", "3", "3"])
    path.write_bytes(path.read_bytes().replace(b"What is f of 1?", b"What is f of \xc3\x28?"))
    result = cli(str(path), "--format", "tooleval", "--out", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    report = report_of(tmp_path / "r")
    assert (report["records"], report["parsed"], report["format_errors"]) == (3, 2, {"record_not_json": 1})


def test_bad_bytes_in_one_toolalpaca_instruction_refuse_only_its_record(shared_data: Path, tmp_path: Path) -> None:
    source = shared_data / "toolalpaca/eval_simulated.json"
    tools = json.loads(source.read_text())
    instruction = tools[0]["Instructions"][0]
    path = tmp_path / "eval.json"
    path.write_bytes(source.read_bytes().replace(json.dumps(instruction)[1:-1].encode(), b"\xff" + json.dumps(instruction)[2:-1].encode(), 1))
    cli(str(source), "--format", "toolalpaca", "--out", str(tmp_path / "before"))
    result = cli(str(path), "--format", "toolalpaca", "--out", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    before, after = report_of(tmp_path / "before"), report_of(tmp_path / "r")
    assert after["records"] == before["records"] and after["parsed"] == before["parsed"] - 1
    assert after["format_errors"] == {**before["format_errors"], "record_not_json": before["format_errors"].get("record_not_json", 0) + 1}


def test_a_bad_byte_outside_any_string_makes_the_document_unreadable_and_the_report_is_written(tmp_path: Path) -> None:
    path = tmp_path / "input.json"
    path.write_bytes(b"[" + openai_record(0).encode() + b",\xff\n" + openai_record(1).encode() + b"]")
    result = cli(str(path), "--format", "openai", "--out", str(tmp_path / "r"))
    assert result.exit_code == 2 and "not UTF-8" in result.output
    assert report_of(tmp_path / "r")["records"] == 0


def test_a_key_named_twice_in_arguments_is_call_duplicate_argument(tmp_path: Path) -> None:
    path = tmp_path / "input.jsonl"
    path.write_text(openai_record(0) + "\n" + openai_record(1, arguments=json.dumps('{"n": 3, "n": 4}')) + "\n")
    result = cli(str(path), "--format", "openai", "--out", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    (line,) = rejected_of(tmp_path / "r")
    assert line["id"] == "r1" and line["codes"] == ["call_duplicate_argument"]
    assert line["errors"][0]["path"] == "messages[1].tool_calls[0].arguments" and "'n'" in line["errors"][0]["message"]


def test_tooleval_reads_every_file_under_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "converted_answers"
    tooleval_file(folder, ["3", "3"], "chatgpt_cot/G1_instruction.json")
    tooleval_file(folder, ["3"], "toolllama/G1_instruction.json")
    (folder / "toolllama/broken.json").write_text("{not json")
    result = cli(str(folder), "--format", "tooleval", "--out", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    report = report_of(tmp_path / "r")
    assert (report["records"], report["parsed"], report["format_errors"]) == (4, 3, {"record_not_json": 1})
    errors = (tmp_path / "r/format_errors.jsonl").read_text()
    assert '"where": "toolllama/broken.json"' in errors


def test_tooleval_ids_in_a_folder_name_their_file(tmp_path: Path) -> None:
    from toolfactory.formats import read

    folder = tmp_path / "converted_answers"
    tooleval_file(folder, ["3"], "a/G1.json")
    tooleval_file(folder, ["3"], "b/G1.json")
    assert [d.id for d in read(folder, "tooleval")] == ["a/G1/q0", "b/G1/q0"]  # type: ignore[union-attr]


# -- the factory's verify stage ------------------------------------------------------------------

def test_one_record_the_rules_cannot_read_never_fails_the_shard() -> None:
    ok = dialogue()
    ok.id = "ok"
    huge = dialogue(arguments='{"city": "Lyon", "days": ' + HUGE + "}")  # an answer the rules cannot parse
    huge.id = "huge"
    config = Config.model_validate({"verify": {"judges": []}})  # the rule layer alone: no gateway needed
    ctx = ShardContext(config=config, run_id="r", gateway=None)  # type: ignore[arg-type]
    out = asyncio.run(VerifyStage().run(ShardSpec("verify", 0, ("in",)), [json.loads(d.to_json()) for d in (ok, huge)], ctx))
    assert [d.id for d in out.records] == ["ok"]  # type: ignore[attr-defined]
    (rejected,) = out.rejected
    assert (rejected.id, rejected.reasons) == ("huge", ["record_check_error"]) and "4300 digits" in rejected.detail
