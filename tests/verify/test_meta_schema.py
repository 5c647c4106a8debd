"""A tool schema's check against the meta-schema: jsonschema_rs may only say "valid" where
jsonschema's ``check_schema`` says so too, and every problem is worded by jsonschema."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from toolfactory.formats import read
from toolfactory.models import Dialogue
from toolfactory.definitions.validity import (
    _schema_error,
    plainly_valid,
    schema_error,
)
from benchmarks.corpus import valid_dialogues
from toolfactory.stages.verify.corruption import corruptions

# Where two implementations of the meta-schema could part: formats the meta-schema names (regex,
# uri-reference), integral floats, numbers beyond 64 bits, NaN, duplicates, lone surrogates, old
# drafts' forms, keywords of other drafts, booleans as schemas.
TRICKY: list[Any] = [
    {"type": "string"}, {"type": "strin"}, {"type": ["string", "string"]}, {"type": ["string", "null"]}, {"type": 3},
    {"pattern": "a+"}, {"pattern": "(("}, {"pattern": "\\p{L}"}, {"patternProperties": {"((": {}}},
    {"patternProperties": {"^a": {"type": "integer"}}}, {"$ref": "#/$defs/x", "$defs": {"x": {}}}, {"$ref": "#/x y"},
    {"$ref": 5}, {"$id": "not a uri"}, {"$id": "http://a b"}, {"$schema": "x"}, {"$anchor": "1a"}, {"$anchor": "a\n"},
    {"minLength": 1.0}, {"minLength": 1.5}, {"minLength": -1}, {"minLength": 2**70}, {"minLength": -(2**70)},
    {"maximum": math.nan}, {"maximum": math.inf}, {"maximum": "9"}, {"maximum": True}, {"multipleOf": 0},
    {"required": ["a", "a"]}, {"required": "a"}, {"required": []}, {"enum": []}, {"enum": "x"}, {"enum": [1, True]},
    {"items": [{"type": "string"}]}, {"items": {"type": "string"}}, {"additionalProperties": 3},
    {"properties": {"a": {"type": "no-such-type"}}}, {"properties": {"a": True, "b": False}}, {"properties": []},
    {"description": "\ud800"}, {"description": 3}, {"format": "foo"}, {"format": 3}, {"dependencies": {"a": ["b", "b"]}},
    {"dependentRequired": {"a": "b"}}, {"const": None}, {"uniqueItems": "yes"}, {"examples": {}},
    True, False, [], "string", None,
]


def reference(schema: Any) -> str | None:
    """jsonschema's verdict alone, as the definition check words it."""
    return _schema_error(json.dumps(schema, sort_keys=True))


@pytest.mark.parametrize("schema", TRICKY, ids=repr)
def test_the_meta_schema_check_agrees_with_jsonschema(schema: Any) -> None:
    assert schema_error(schema) == reference(schema)


# Schemas of the commonest keywords, where the walk answers without a validator; with the values
# of each keyword the meta-schema refuses.
PLAIN: list[Any] = [
    {"type": "object", "properties": {"q": {"type": "string", "description": "x", "default": "a"},
                                      "n": {"type": ["integer", "null"], "examples": [1]},
                                      "tags": {"type": "array", "items": {"type": "string", "enum": ["a", 1, None]}},
                                      "free": {"type": "object", "properties": {}, "additionalProperties": True}},
     "required": ["q"], "title": "T", "$comment": "c", "deprecated": False},
    {"properties": {"a": True, "b": False}, "additionalProperties": {"type": "integer"}}, {},
    {"type": []}, {"type": ["string", 3]}, {"type": ["string", "strin"]}, {"required": [1]}, {"required": ["a", "a"]},
    {"enum": {}}, {"examples": "x"}, {"title": 3}, {"description": None}, {"readOnly": "yes"}, {"items": []},
    {"items": 3}, {"additionalProperties": "no"}, {"properties": {"a": {"type": "strin"}}}, {"properties": {"a": []}},
]


@pytest.mark.parametrize("schema", PLAIN + TRICKY, ids=repr)
def test_the_walk_calls_valid_only_what_jsonschema_calls_valid(schema: Any) -> None:
    if plainly_valid(schema):
        assert reference(schema) is None


def test_the_walk_proves_the_common_schemas_valid() -> None:
    assert plainly_valid(PLAIN[0]) and plainly_valid(PLAIN[1]) and plainly_valid({})
    assert not plainly_valid({"type": "string", "pattern": "a+"})  # a keyword it leaves to the validators
    assert not plainly_valid({"type": "string", "example_value": "x"})


def test_the_reference_is_jsonschemas_own_check() -> None:
    with pytest.raises(SchemaError):
        Draft202012Validator.check_schema({"type": "strin"})
    assert reference({"type": "strin"}) is not None
    assert reference({"type": "string"}) is None


def _schemas(dialogues: list[Dialogue]) -> list[Any]:
    return [schema for d in dialogues for fn in d.tools for schema in (fn.parameters, fn.returns)]


def test_the_labelled_corpus_schemas_get_the_same_verdicts() -> None:
    valid = valid_dialogues(40, seed=5)
    schemas = _schemas([*valid, *(c.dialogue for d in valid for c in corruptions(d, seed=5))])
    assert any('"pattern"' in json.dumps(s) for s in schemas)  # a format the meta-schema checks (regex)
    assert [schema_error(s) for s in schemas] == [reference(s) for s in schemas]


def test_released_data_schemas_get_the_same_verdicts(shared_data: Path) -> None:
    dialogues = [item for item in read(shared_data / "toolalpaca/eval_simulated.json", "toolalpaca") if isinstance(item, Dialogue)]
    dialogues += [item for item in read(shared_data / "toolbench/answer/G1_answer", "toolbench") if isinstance(item, Dialogue)]
    schemas = _schemas(dialogues)
    assert len(schemas) > 100
    assert [schema_error(s) for s in schemas] == [reference(s) for s in schemas]
