"""The compiled validity test may only say "valid" where jsonschema says so too."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterator

import pytest
from jsonschema import Draft202012Validator

from toolfactory.formats import read
from toolfactory.models import Dialogue
from benchmarks.corpus import valid_dialogues
from toolfactory.stages.verify.corruption import corruptions
from toolfactory.stages.verify.rules import arguments_schema, check, fast_schema, function_facts
from toolfactory.stages.verify.rules.arguments_schema import proven_valid, strict_schema
from toolfactory.stages.verify.rules.fast_schema import fast_validator, plain

SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": 0, "maximum": 10},
        "x": {"type": "number", "exclusiveMaximum": 1.5},
        "s": {"type": "string", "minLength": 2, "maxLength": 3},
        "unit": {"type": "string", "enum": ["c", "f"]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 2},
        "one": {"enum": [1, "1"]},
        "opt": {"type": ["string", "null"]},
        "pick": {"anyOf": [{"type": "boolean"}, {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]}]},
    },
    "required": ["n"],
}
# Values where two implementations of JSON Schema could part: integral floats, booleans among
# numbers, numbers beyond 64 bits, NaN, astral and lone-surrogate strings, 1 against 1.0 and True.
TRICKY: list[dict[str, Any]] = [
    {"n": 1}, {"n": 1.0}, {"n": True}, {"n": 2**70}, {"n": -1}, {"n": 10.5}, {"n": math.nan},
    {"n": 1, "x": 1.4999}, {"n": 1, "x": 1.5}, {"n": 1, "x": math.inf}, {"n": 1, "x": False},
    {"n": 1, "s": "😀😀"}, {"n": 1, "s": "😀"}, {"n": 1, "s": "\ud800\ud800"}, {"n": 1, "s": "abcd"},
    {"n": 1, "unit": "c"}, {"n": 1, "unit": "C"}, {"n": 1, "unit": None},
    {"n": 1, "tags": ["a", "b"]}, {"n": 1, "tags": ["a", "c"]}, {"n": 1, "tags": ["a", "a", "b"]}, {"n": 1, "tags": "a"},
    {"n": 1, "one": 1}, {"n": 1, "one": 1.0}, {"n": 1, "one": True}, {"n": 1, "one": "1"}, {"n": 1, "one": 2},
    {"n": 1, "opt": None}, {"n": 1, "opt": 3},
    {"n": 1, "pick": True}, {"n": 1, "pick": 1}, {"n": 1, "pick": {"k": 1}}, {"n": 1, "pick": {"k": "1"}}, {"n": 1, "pick": {}},
    {"n": 1, "pick": {"k": 1, "z": 0}}, {"n": 1, "extra": 0}, {}, {"n": None},
]


def fast_answers(schema: Any, value: Any) -> list[bool]:
    """The fast test's answer for `value` as a schema's first value (tested in one shot) and as a
    later one (by the compiled validator)."""
    first, later = fast_validator(schema), fast_validator(schema)
    assert first is not None and later is not None
    later({})
    return [first(value), later(value)]


def agree(schema: dict[str, Any], value: Any) -> None:
    strict = strict_schema(schema)
    explained = not any(Draft202012Validator(strict, format_checker=Draft202012Validator.FORMAT_CHECKER).iter_errors(value))
    for answer in fast_answers(strict, value):
        if answer:
            assert explained, f"the fast test called {value!r} valid, jsonschema does not"


@pytest.mark.parametrize("value", TRICKY, ids=repr)
def test_the_fast_test_never_calls_valid_what_jsonschema_rejects(value: dict[str, Any]) -> None:
    agree(SCHEMA, value)


def test_the_fast_test_accepts_plain_valid_arguments() -> None:
    assert fast_answers(strict_schema(SCHEMA), {"n": 3, "unit": "f", "tags": ["b"], "pick": {"k": 2}}) == [True, True]
    assert fast_answers(strict_schema(SCHEMA), {"n": 3, "unit": "kelvin"}) == [False, False]


# Schemas the walk reads (closed and open objects, nested, arrays, enums of every kind of value).
WALKED: list[dict[str, Any]] = [
    {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"},
                                      "u": {"type": "string", "enum": ["c", "f"]}, "e": {"enum": [1, "1", None, True]},
                                      "o": {"type": ["string", "null"]}, "free": {"type": "object", "properties": {}},
                                      "l": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}},
                                                                      "required": ["k"]}}},
     "required": ["n"]},
    {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {}},
    {"type": "object", "properties": {"a": {"type": "strin"}, "t": {"type": ["strin", "string"]}}},
    {"type": "object", "properties": {"a": {"items": [{"type": "string"}]}, "r": {"required": "a"}}},
]
WALKED_VALUES: list[Any] = [
    *TRICKY, {"n": 1, "b": 0}, {"n": 1, "b": True}, {"n": 1, "e": 1.0}, {"n": 1, "e": "1"}, {"n": 1, "e": None},
    {"n": 1, "e": False}, {"n": 1, "o": "x"}, {"n": 1, "free": {"any": [1]}}, {"n": 1, "l": [{"k": "a"}]},
    {"n": 1, "l": [{"k": "a", "z": 1}]}, {"n": 1, "l": [{}]}, {"n": 1, "l": {"k": 1}}, {"a": "x", "z": 3}, {"a": "x", "z": "3"},
    {"a": 1}, {"t": "x"}, {"t": 1}, {"a": ["x"]}, {"r": {}}, {"r": {"a": 1}}, [], "x",
]


@pytest.mark.parametrize("schema", WALKED, ids=[f"schema{i}" for i in range(len(WALKED))])
@pytest.mark.parametrize("value", WALKED_VALUES, ids=repr)
def test_the_walk_never_calls_valid_what_jsonschema_rejects(schema: dict[str, Any], value: Any) -> None:
    if proven_valid(schema, value):
        strict = strict_schema(schema)
        assert not any(Draft202012Validator(strict, format_checker=Draft202012Validator.FORMAT_CHECKER).iter_errors(value))


def test_the_walk_proves_plain_valid_arguments_and_leaves_other_keywords_to_the_validators() -> None:
    assert proven_valid(WALKED[0], {"n": 3, "u": "f", "e": "1", "o": None, "free": {"x": 1}, "l": [{"k": "a"}]})
    assert not proven_valid(WALKED[0], {"n": 3, "extra": 1})  # closed as strict_schema closes it
    assert proven_valid(WALKED[1], {"a": "x", "z": 3})
    assert not proven_valid({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}, {"s": "a"})
    assert not proven_valid({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": 1.0})  # left to them


@pytest.mark.parametrize("keyword", [
    {"format": "date"}, {"pattern": "^a"}, {"$ref": "#/$defs/x"}, {"multipleOf": 0.1}, {"uniqueItems": True},
    {"dependencies": {}}, {"additionalItems": False}, {"$schema": "http://json-schema.org/draft-07/schema#"},
    {"patternProperties": {"^a": {}}}, {"contains": {}},
])
def test_schemas_with_other_keywords_get_no_fast_test(keyword: dict[str, Any]) -> None:
    nested = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", **keyword}}}}
    assert not plain(nested)
    assert fast_validator(nested) is None


def test_keys_that_are_no_json_schema_keyword_are_annotations() -> None:
    # ToolBench's example_value, BFCL's optional, OpenAPI's example and nullable, extensions.
    schema = {"type": "object", "properties": {"q": {"type": "string", "example_value": "x", "optional": True, "x-doc": {}},
                                               "n": {"type": "integer", "example": 3, "nullable": True}}}
    assert plain(schema)
    agree(schema, {"q": "a", "n": None})
    agree(schema, {"q": "a", "n": 2})


def test_a_schema_the_compiler_refuses_is_never_called_valid() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "no-such-type"}}}
    assert fast_answers(schema, {}) == [False, False]
    assert fast_answers(schema, {"a": 1}) == [False, False]


def _without_fast_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arguments_schema, "fast_validator", lambda schema: None)
    monkeypatch.setattr(arguments_schema, "proven_valid", lambda schema, value: False)


def _verdicts(dialogues: list[Dialogue]) -> Iterator[list[tuple[str, str, str, str]]]:
    for d in dialogues:
        yield [(v.code, v.severity, v.path, v.message) for v in check(d)]


def _same_verdicts(dialogues: list[Dialogue], monkeypatch: pytest.MonkeyPatch) -> None:
    function_facts.clear()
    fast = list(_verdicts(dialogues))
    assert any(fast_schema.plain(strict_schema(fn.parameters)) for d in dialogues for fn in d.tools)
    with monkeypatch.context() as patch:
        _without_fast_test(patch)
        function_facts.clear()
        slow = list(_verdicts(dialogues))
    function_facts.clear()
    assert fast == slow


def test_the_labelled_corpus_gets_the_same_verdicts_with_and_without_the_fast_test(monkeypatch: pytest.MonkeyPatch) -> None:
    valid = valid_dialogues(60, seed=3)
    dialogues = [*valid, *(c.dialogue for d in valid for c in corruptions(d, seed=3))]
    assert sum(1 for verdicts in _verdicts(dialogues) if verdicts) > 100  # the corruptions are found
    _same_verdicts(dialogues, monkeypatch)


def test_released_data_gets_the_same_verdicts_with_and_without_the_fast_test(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dialogues = [item for item in read(shared_data / "toolalpaca/eval_simulated.json", "toolalpaca") if isinstance(item, Dialogue)]
    dialogues += [item for item in read(shared_data / "toolbench/answer/G1_answer", "toolbench") if isinstance(item, Dialogue)]
    assert len(dialogues) > 50
    _same_verdicts(dialogues, monkeypatch)
