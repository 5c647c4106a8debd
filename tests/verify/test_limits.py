"""Depth and size limits: a per-record rejection, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

from toolfactory.formats import read
from toolfactory.models import Function
from toolfactory.stages.verify.limits import Limits
from toolfactory.stages.verify.rules import check

from .helpers import dialogue


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_arguments_nested_past_the_limit_are_record_too_deep() -> None:
    d = dialogue(arguments=json.dumps({"city": json.loads(nested(200))}))
    assert [(v.code, v.path) for v in check(d)] == [("record_too_deep", "messages[2].tool_calls[0].arguments")]


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    d = dialogue(arguments=json.dumps({"city": nested(200)}))
    assert "record_too_deep" not in {v.code for v in check(d)}


def test_a_deep_schema_is_record_too_deep() -> None:
    schema: dict = {"type": "object"}
    for _ in range(100):
        schema = {"type": "object", "properties": {"x": schema}}
    d = dialogue(tools=[Function(name="get_forecast", description="d", parameters=schema)])
    assert [(v.code, v.path) for v in check(d)] == [("record_too_deep", "tools[0].parameters")]


def test_a_record_over_the_size_limit_is_record_too_large() -> None:
    assert [v.code for v in check(dialogue(answer="sunny " * 100), limits=Limits(max_chars=300))] == ["record_too_large"]


def test_json_deeper_than_python_parses_is_a_format_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    good = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    path.write_text(json.dumps(good) + "\n" + '{"messages": ' + nested(5000) + "}\n")
    items = list(read(path, "openai"))
    assert [getattr(item, "reason", "dialogue") for item in items] == ["dialogue", "record_too_deep"]
