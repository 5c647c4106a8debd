"""Each reader on the papers' released data (/work/shared/data) and on the fixtures in data/:
what is read is checked against the files themselves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from toolfactory.formats import FORMATS, NOT_APPLICABLE, NOT_APPLICABLE_REASONS, READERS, REASONS, FormatError, UnreadableFile
from toolfactory.formats import openai, toolalpaca, toolbench, xlam
from toolfactory.formats import toolfactory as own
from toolfactory.models import Dialogue
from toolfactory.storage.shards import encode_records, records_table
from toolfactory.definitions.convert import functions_from_openapi
from benchmarks.corpus import valid_dialogues
from toolfactory.stages.verify.rules import RULES, check


def calls(d: Dialogue) -> list[tuple[str, str]]:
    return [(c.name, c.arguments) for m in d.messages for c in m.tool_calls or []]


def split(items: list[Any]) -> tuple[list[Dialogue], list[FormatError]]:
    return [i for i in items if isinstance(i, Dialogue)], [i for i in items if isinstance(i, FormatError)]


def assert_contract(items: list[Any]) -> None:
    """One item per record in input order: a FormatError's index is its position; reasons are known."""
    for position, item in enumerate(items):
        assert isinstance(item, (Dialogue, FormatError))
        if isinstance(item, FormatError):
            assert item.index == position and item.reason in REASONS and item.message


def test_registry_and_not_applicable_codes_are_rules() -> None:
    assert set(READERS) == set(FORMATS) == {"toolfactory", "openai", "sharegpt", "toolbench", "xlam", "toolalpaca", "tooleval",
                                                  "bfcl_multi_turn"}
    for fmt in FORMATS:
        assert NOT_APPLICABLE[fmt] <= set(RULES), fmt
        assert set(NOT_APPLICABLE_REASONS[fmt]) == NOT_APPLICABLE[fmt]
    assert NOT_APPLICABLE["toolfactory"] == frozenset()
    for fmt in ("xlam", "toolalpaca"):
        assert {"sample_unanswered_call", "dialogue_no_final_answer"} <= NOT_APPLICABLE[fmt]


# -- ToolBench ---------------------------------------------------------------------------------

def test_toolbench_answers(shared_data: Path) -> None:
    folder = shared_data / "toolbench/answer/G1_answer"
    files = sorted(folder.glob("*.json"))
    items = list(toolbench.read(folder))
    assert_contract(items)
    assert len(items) == len(files) == 5
    for file, item in zip(files, items):
        generation = json.loads(file.read_text())["answer_generation"]
        if not generation["valid_data"]:
            # No training path is released for a search that never answered.
            assert isinstance(item, FormatError) and item.reason == "no_train_messages" and item.where == file.name
            continue
        assert isinstance(item, Dialogue) and item.id == file.stem
        assert [f.name for f in item.tools] == [f["name"] for f in generation["function"]]
        assert "Finish" in {f.name for f in item.tools}
        path = generation["train_messages"][-1]
        assert calls(item) == [(m["function_call"]["name"], m["function_call"]["arguments"]) for m in path if m.get("function_call")]
        assert item.messages[0].role == "system" and item.messages[1].role == "user"
        finish = json.loads(calls(item)[-1][1])
        assert calls(item)[-1][0] == "Finish" and finish["return_type"] == "give_answer"
        assert item.messages[-1].role == "assistant" and item.messages[-1].content == finish["final_answer"]
        # Every call is answered by the tool message that follows it (Finish by the environment's reply).
        for i, m in enumerate(item.messages):
            if m.tool_calls:
                assert item.messages[i + 1].role == "tool" and item.messages[i + 1].tool_call_id == m.tool_calls[0].id
    # A single answer file is a one-record input.
    single = list(toolbench.read(files[0]))
    assert len(single) == 1 and isinstance(single[0], Dialogue) and single[0] == items[0]


def test_toolbench_malformed_answer_files(tmp_path: Path, shared_data: Path) -> None:
    good = sorted((shared_data / "toolbench/answer/G1_answer").glob("*.json"))[0]
    (tmp_path / "a.json").write_text(good.read_text())
    (tmp_path / "b.json").write_text('{"answer_generation": {"valid_data": true,')
    (tmp_path / "c.json").write_text('{"win": true}')
    answer = json.loads(good.read_text())
    answer["answer_generation"]["train_messages"][-1][2]["role"] = "observer"
    (tmp_path / "d.json").write_text(json.dumps(answer))
    items = list(toolbench.read(tmp_path))
    assert_contract(items)
    assert isinstance(items[0], Dialogue)
    assert [(i.reason, i.where) for i in items[1:]] == [("record_not_json", "b.json"), ("missing_field", "c.json"), ("unknown_role", "d.json")]


# -- ToolAlpaca --------------------------------------------------------------------------------

def test_toolalpaca_golden_answers(shared_data: Path) -> None:
    path = shared_data / "toolalpaca/eval_simulated.json"
    tools = json.loads(path.read_text())
    items = list(toolalpaca.read(path))
    assert_contract(items)
    assert len(items) == sum(len(t["Golden_Answers"]) for t in tools) == 100
    dialogues = iter(items)
    for tool in tools:
        names = [f.name for f in functions_from_openapi(json.loads(tool["Documentation"]))]
        for k, (instruction, golden) in enumerate(zip(tool["Instructions"], tool["Golden_Answers"])):
            d = next(dialogues)
            assert isinstance(d, Dialogue) and d.id == f"{tool['Name']}/{k}"
            assert [f.name for f in d.tools] == names
            assert [(m.role, m.content) for m in d.messages[:1]] == [("user", instruction)]
            # One assistant turn per step, the Action_Input text exactly as in the file; nothing else.
            assert calls(d) == [(step["Action"], step["Action_Input"]) for step in golden]
            assert [m.role for m in d.messages[1:]] == ["assistant"] * len(golden)
            assert d.mode == ("single" if len(golden) == 1 else "multiple")


def test_toolalpaca_bad_documentation_counts_every_golden_answer(tmp_path: Path, shared_data: Path) -> None:
    tools = json.loads((shared_data / "toolalpaca/eval_simulated.json").read_text())[:2]
    tools[0]["Documentation"] = tools[0]["Documentation"][:100]  # cut off: not JSON
    del tools[1]["Golden_Answers"]
    (tmp_path / "t.json").write_text(json.dumps(tools))
    items = list(toolalpaca.read(tmp_path / "t.json"))
    assert_contract(items)
    assert [i.reason for i in items] == ["bad_tool"] * len(tools[0]["Instructions"]) + ["missing_field"]


# -- xLAM --------------------------------------------------------------------------------------

def test_xlam_sample(xlam_sample: Path) -> None:
    raw = json.loads(xlam_sample.read_text())
    items = list(xlam.read(xlam_sample))
    assert_contract(items)
    assert len(items) == len(raw) == 5
    dialogues, errors = split(items)
    # Record 3's answers are cut off mid-JSON.
    assert [(e.index, e.reason, e.where) for e in errors] == [(3, "field_not_json", "[3]")]
    for d in dialogues:
        record = raw[int(d.id)]
        answers = record["answers"] if isinstance(record["answers"], list) else json.loads(record["answers"])
        assert [(m.role) for m in d.messages] == ["user", "assistant"] and d.messages[0].content == record["query"]
        assert [(n, json.loads(a)) for n, a in calls(d)] == [(a["name"], a["arguments"]) for a in answers]
        assert [c.id for c in d.messages[1].tool_calls or []] == [f"call_{i + 1}" for i in range(len(answers))]
        assert d.mode == "single" and d.recipe == "xlam"
    by_id = {d.id: d for d in dialogues}
    giveaways = by_id["0"].tools[0].parameters
    assert giveaways["properties"]["type"]["type"] == "string" and giveaways["required"] == []  # has a default
    largest = {f.name: f for f in by_id["1"].tools}["find_n_largest_numbers"].parameters
    assert largest["properties"]["nums"] == {"type": "array", "items": {"type": "integer"}, "description": "The list of numbers."}
    assert largest["required"] == ["nums", "n"]
    tiktok = by_id["2"].tools[0].parameters
    assert tiktok["required"] == ["name"] and tiktok["properties"]["limit"]["type"] == "integer"  # "int, optional"
    assert [f.name for f in by_id["4"].tools] == ["convert_currency"]  # tools and answers given as lists
    # Without the NOT_APPLICABLE set, every calls-only record would fail for its shape alone.
    for d in dialogues:
        assert {"sample_unanswered_call", "dialogue_no_final_answer"} <= {v.code for v in check(d)}


def test_xlam_jsonl_and_malformed_records(tmp_path: Path, xlam_sample: Path) -> None:
    raw = json.loads(xlam_sample.read_text())
    lines = [json.dumps(r) for r in raw] + [
        "",
        '{"query": "hi", "tools": "[]", "answers": "[]"',  # cut off
        json.dumps({"tools": "[]", "answers": "[]"}),
        json.dumps({"query": "q", "tools": {"name": "f"}, "answers": "[]"}),
        json.dumps({"query": "q", "tools": "[{\"description\": \"no name\"}]", "answers": "[]"}),
        json.dumps({"query": "q", "tools": "[]", "answers": [{"arguments": {}}]}),
        json.dumps(["not", "an", "object"]),
        json.dumps({"query": "Is there a tool for this?", "tools": "[{\"name\": \"f\", \"parameters\": {}}]", "answers": "[]"}),
    ]
    (tmp_path / "x.jsonl").write_text("\n".join(lines) + "\n")
    items = list(xlam.read(tmp_path / "x.jsonl"))
    assert_contract(items)
    assert len(items) == len(raw) + 7  # the blank line is no record
    assert [getattr(i, "reason", None) for i in items[len(raw):]] == [
        "record_not_json", "missing_field", "wrong_type", "bad_tool", "missing_field", "record_not_object", None]
    irrelevant = items[-1]
    assert isinstance(irrelevant, Dialogue) and irrelevant.mode == "non_tool" and [m.role for m in irrelevant.messages] == ["user"]
    assert len(irrelevant.id) == 16  # no id in the record: a content hash
    assert list(xlam.read(tmp_path / "x.jsonl"))[-1].id == irrelevant.id  # type: ignore[union-attr]


@pytest.mark.parametrize("text,schema,optional", [
    ("str", {"type": "string"}, False),
    ("int, optional", {"type": "integer"}, True),
    ("List[str]", {"type": "array", "items": {"type": "string"}}, False),
    ("List[Dict[str, Any]], optional", {"type": "array", "items": {"type": "object"}}, True),
    ("Tuple[int, int]", {"type": "array"}, False),
    ("Union[int, float]", {"type": ["integer", "number"]}, False),
    ("Optional[str]", {"type": ["string", "null"]}, True),
    ("Any", {}, False),
    ("Callable", {}, False),
    ("", {}, False),
])
def test_xlam_parameter_types(text: str, schema: dict[str, Any], optional: bool) -> None:
    assert xlam.parameter_schema({"type": text}) == (schema, optional)


def test_xlam_parameters_of_one_type_get_schemas_of_their_own() -> None:
    # A type text is parsed once; each parameter still gets its own schema to hold.
    first, _ = xlam.parameter_schema({"type": "List[Union[int, str]]", "description": "a"})
    second, _ = xlam.parameter_schema({"type": "List[Union[int, str]]", "description": "b"})
    assert first["items"] == second["items"] == {"type": ["integer", "string"]}
    first["items"]["type"].append("null")
    assert second["items"] == {"type": ["integer", "string"]}
    assert xlam.parameter_schema({"type": "List[Union[int, str]]"})[0] == {"type": "array", "items": {"type": ["integer", "string"]}}


def test_xlam_json_schema_parameters_are_kept() -> None:
    params = {"type": "dict", "properties": {"n": {"type": "int"}}, "required": ["n"]}
    assert xlam.parameters_of(params, "tools[0]") == {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


# -- OpenAI ------------------------------------------------------------------------------------

def test_openai_sample(openai_sample: Path) -> None:
    raw_lines = openai_sample.read_text().splitlines()
    items = list(openai.read(openai_sample))
    assert_contract(items)
    assert len(items) == len(raw_lines) == 5
    first, parallel, legacy, broken, quoted = items
    assert isinstance(broken, FormatError) and (broken.index, broken.reason, broken.where) == (3, "record_not_json", "line 4")
    assert isinstance(first, Dialogue) and [m.role for m in first.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert [f.name for f in first.tools] == ["get_current_weather"]
    assert calls(first) == [("get_current_weather", '{"location": "Lisbon, Portugal", "unit": "celsius"}')]
    assert first.messages[3].tool_call_id == "call_8f2a" and first.mode == "single"
    assert isinstance(parallel, Dialogue) and len(parallel.messages[1].tool_calls or []) == 2 and parallel.mode == "single"
    # Legacy function_call: a synthesized id, answered by the function message.
    assert isinstance(legacy, Dialogue) and [f.name for f in legacy.tools] == ["search_flights"]
    call = (legacy.messages[1].tool_calls or [])[0]
    assert legacy.messages[2].role == "tool" and legacy.messages[2].tool_call_id == call.id and legacy.messages[2].name == "search_flights"
    # Arguments are kept as written (single quotes: for call_arguments_not_json to judge).
    assert isinstance(quoted, Dialogue) and calls(quoted)[0][1] == "{'origin': 'OPO', 'destination': 'CDG', 'date': '2024-06-21'}"
    for d in (first, parallel, legacy, quoted):
        assert len(d.id) == 16 and d.recipe == "openai"
    assert [d.id for d in split(list(openai.read(openai_sample)))[0]] == [d.id for d in (first, parallel, legacy, quoted)]


def test_openai_malformed_records(tmp_path: Path) -> None:
    user = {"role": "user", "content": "Hello"}
    records = [
        {"id": "parts", "messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]},
        {"messages": []},
        {"messages": [user, {"role": "critic", "content": "?"}]},
        {"messages": [user], "tools": [{"type": "function", "function": {"description": "no name"}}]},
        {"messages": [user, {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}]},
        {"messages": [user, {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
        "a string",
    ]
    (tmp_path / "o.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    items = list(openai.read(tmp_path / "o.jsonl"))
    assert_contract(items)
    parts = items[0]
    assert isinstance(parts, Dialogue) and parts.id == "parts" and parts.mode == "non_tool"
    assert [(m.role, m.content) for m in parts.messages] == [("system", "Be brief."), ("user", "a\nb")]
    assert [getattr(i, "reason", None) for i in items[1:]] == [
        "missing_field", "unknown_role", "bad_tool", "missing_field", "wrong_type", "record_not_object"]


# -- toolfactory -------------------------------------------------------------------------------

def test_toolfactory_parquet_jsonl_and_folder(tmp_path: Path) -> None:
    dialogues = valid_dialogues(7, seed=3)
    rows, unstorable = encode_records(dialogues, "dialogues")
    assert not unstorable
    pq.write_table(records_table(rows), tmp_path / "part-00000.parquet")
    assert list(own.read(tmp_path / "part-00000.parquet")) == dialogues
    bad = dialogues[0].model_dump(mode="json") | {"colour": "blue"}
    lines = [d.to_json() for d in dialogues[:2]] + [json.dumps(bad), "{not json", "[1, 2]"]
    (tmp_path / "more.jsonl").write_text("\n".join(lines) + "\n")
    items = list(own.read(tmp_path / "more.jsonl"))
    assert_contract(items)
    assert items[:2] == dialogues[:2]
    assert [(i.reason, i.where) for i in items[2:]] == [  # type: ignore[union-attr]
        ("invalid_record", "more.jsonl line 3"), ("record_not_json", "more.jsonl line 4"), ("record_not_object", "more.jsonl line 5")]
    # A folder: its files in name order, records numbered across them.
    both = list(own.read(tmp_path))
    assert_contract(both)
    assert both[:5] == items and both[5:] == dialogues


def test_whole_file_problems_raise(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text('[{"query": "a"},')
    with pytest.raises(UnreadableFile):
        list(xlam.read(tmp_path / "broken.json"))
    with pytest.raises(UnreadableFile):
        list(openai.read(tmp_path / "missing.jsonl"))
    (tmp_path / "obj.json").write_text('{"Name": "x"}')
    with pytest.raises(UnreadableFile):
        list(toolalpaca.read(tmp_path / "obj.json"))
    (tmp_path / "shard.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(UnreadableFile):
        list(own.read(tmp_path / "shard.parquet"))


def test_toolalpaca_names_operations_by_function_projection(shared_data: Path, tmp_path: Path) -> None:
    # ToolAlpaca's real-API set has operations without an operationId; its golden answers call them
    # by the Function_Projection name. Strip the operationIds of a released tool to get that shape.
    tool = json.loads((shared_data / "toolalpaca/eval_simulated.json").read_text())[1]
    documentation = json.loads(tool["Documentation"])
    for operations in documentation["paths"].values():
        for operation in operations.values():
            operation.pop("operationId", None)
    path = tmp_path / "eval.json"
    path.write_text(json.dumps([{**tool, "Documentation": json.dumps(documentation)}]))
    dialogues = [d for d in toolalpaca.read(path) if isinstance(d, Dialogue)]
    assert {fn.name for fn in dialogues[0].tools} == set(tool["Function_Projection"])
    assert all("call_unknown_function" not in {v.code for v in check(d)} for d in dialogues)
