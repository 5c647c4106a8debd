"""Validity that follows the data's own conventions (BFCL, xLAM, ToolBench, ToolAlpaca docs)."""

from __future__ import annotations

from typing import Any

import pytest

from toolfactory.models import Function
from toolfactory.definitions import convert
from toolfactory.definitions.validity import function_problems
from toolfactory.definitions.convert import normalize_schema
from toolfactory.stages.verify.rules import check

from .helpers import GROUNDING, codes, dialogue, paths, with_schema

FACTORIAL = Function(name="math.factorial", description="n!", parameters={
    "type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]})


def test_a_dotted_name_is_valid_and_only_warned_about() -> None:
    d = dialogue(arguments='{"number": 5}', name="math.factorial", tools=[FACTORIAL])
    assert codes(d) == {"tool_name_not_openai"}


def test_a_name_with_whitespace_is_invalid() -> None:
    fn = FACTORIAL.model_copy(update={"name": "math factorial"})
    assert [code for code, _ in function_problems(fn)] == ["tool_function_name_invalid"]


def test_the_pool_still_refuses_names_openai_refuses() -> None:
    assert [code for code, _ in function_problems(FACTORIAL)] == ["tool_function_name_not_openai"]


BFCL_ARRAY_ENUM = normalize_schema({
    "type": "dict",
    "properties": {"days": {"type": "array", "items": {"type": "string"}, "enum": ["mon", "tue", "wed"]}},
    "required": ["days"],
})


def test_an_array_enum_constrains_each_item() -> None:
    assert codes(with_schema(BFCL_ARRAY_ENUM, {"days": ["mon", "wed"]})) == set()


def test_an_array_item_outside_the_enum_is_reported_at_the_item() -> None:
    d = with_schema(BFCL_ARRAY_ENUM, {"days": ["mon", "sun"]})
    assert paths(d, "call_argument_enum") == ["messages[2].tool_calls[0].arguments/days/1"]


def test_bfcl_type_names_and_defaults_are_read_as_json_schema() -> None:
    schema = normalize_schema({"type": "dict", "properties": {
        "x": {"type": "float", "default": 1.0}, "pair": {"type": "tuple", "items": {"type": "integer"}}, "v": {"type": "any"}},
        "required": ["pair"]})
    assert codes(with_schema(schema, {"x": 2, "pair": [1, 2], "v": {"a": None}})) == set()


def test_a_boolean_required_on_a_property_joins_the_required_list() -> None:
    schema = normalize_schema({"type": "object", "properties": {"q": {"type": "string", "required": True},
                                                                 "n": {"type": "integer", "required": False}}})
    assert schema["required"] == ["q"] and "required" not in schema["properties"]["q"]
    assert codes(with_schema(schema, {"n": 1})) == {"call_missing_required"}


def test_an_unknown_name_is_checked_against_its_obvious_candidate() -> None:
    d = dialogue(arguments='{"city": 7}', name="getForecast")
    # the wrong name does not hide the wrong argument type: get_forecast's schema still applies
    assert codes(d) == {"call_unknown_function", "call_argument_type"}


def test_an_unknown_name_without_candidate_says_so() -> None:
    d = dialogue(arguments='{"city": 7}', name="book_flight")
    [verdict] = check(d, GROUNDING)
    assert verdict.code == "call_unknown_function" and "no offered function is an obvious candidate" in verdict.message


def test_a_marker_around_an_offered_name_finds_it() -> None:
    d = dialogue(arguments='{"city": 7}', name="[Optional]get_forecast")
    assert codes(d) == {"call_unknown_function", "call_argument_type"}


def test_a_nested_object_without_properties_is_free_form() -> None:
    schema = normalize_schema({"type": "dict", "properties": {"params": {"type": "dict", "properties": {}}}})
    assert codes(with_schema(schema, {"params": {"page": 2}})) == set()


def test_normalizing_a_schema_visits_each_subschema_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each level used to be normalized twice, so a schema 40 levels deep took 2**40 steps.
    schema: dict = {"type": "int"}
    for _ in range(40):
        schema = {"type": "dict", "properties": {"x": schema, "y": {"type": "str"}}}
    calls = 0
    original = convert.normalize_schema

    def counted(value: Any) -> Any:
        nonlocal calls
        calls += 1
        return original(value)

    monkeypatch.setattr(convert, "normalize_schema", counted)
    out = counted(schema)
    assert calls < 10 * 40
    for _ in range(40):
        assert out["type"] == "object" and out["properties"]["y"] == {"type": "string"}
        out = out["properties"]["x"]
    assert out == {"type": "integer"}
