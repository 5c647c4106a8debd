"""Function-call executability rules (call_*)."""

from __future__ import annotations

from typing import Any

import pytest

from toolfactory.models import Function
from toolfactory.stages.verify.rules import check
from toolfactory.stages.verify.rules import function_facts
from toolfactory.stages.verify.rules.arguments_schema import ArgumentsSchema, strict_schema

from .helpers import GROUNDING, WEATHER, codes, dialogue, paths, with_schema

CALL_CODES = {
    "call_unknown_function", "call_arguments_not_json", "call_missing_required", "call_unknown_argument",
    "call_argument_type", "call_argument_enum", "call_argument_pattern", "call_argument_format",
    "call_argument_range", "call_argument_invalid",
}


def test_a_valid_call_passes_every_rule() -> None:
    assert check(dialogue()) == []


@pytest.mark.parametrize(
    ("broken", "code", "path"),
    [
        (dialogue(name="get_forecast_v2"), "call_unknown_function", "messages[2].tool_calls[0].name"),
        (dialogue(arguments='{"city": "Lyon"'), "call_arguments_not_json", "messages[2].tool_calls[0].arguments"),
        (dialogue(arguments='["Lyon"]'), "call_arguments_not_json", "messages[2].tool_calls[0].arguments"),
        (dialogue(arguments="{'city': 'Lyon'}"), "call_arguments_not_json", "messages[2].tool_calls[0].arguments"),
        (dialogue(arguments='{"days": 3}'), "call_missing_required", "messages[2].tool_calls[0].arguments/city"),
        (dialogue(arguments='{"city": "Lyon", "days": "3"}'), "call_argument_type", "messages[2].tool_calls[0].arguments/days"),
        (dialogue(arguments='{"city": "Lyon", "days": true}'), "call_argument_type", "messages[2].tool_calls[0].arguments/days"),
        (dialogue(arguments='{"city": "Lyon", "days": 9}'), "call_argument_range", "messages[2].tool_calls[0].arguments/days"),
        (dialogue(arguments='{"city": "Lyon", "days": 0}'), "call_argument_range", "messages[2].tool_calls[0].arguments/days"),
        (dialogue(arguments='{"city": "Lyon", "units": "kelvin"}'), "call_argument_enum", "messages[2].tool_calls[0].arguments/units"),
        (dialogue(arguments='{"city": "Lyon", "wind": 1}'), "call_unknown_argument", "messages[2].tool_calls[0].arguments/wind"),
    ],
)
def test_each_fault_gets_its_code_and_path(broken, code: str, path: str) -> None:  # type: ignore[no-untyped-def]
    verdicts = check(broken, GROUNDING)
    assert {v.code for v in verdicts} & CALL_CODES == {code}
    assert path in [v.path for v in verdicts if v.code == code]
    assert all(v.severity == "error" and not v.passed for v in verdicts)


@pytest.mark.parametrize(
    ("schema", "ok", "bad", "code"),
    [
        ({"type": "string", "pattern": "^[A-Z]{3}$"}, "EUR", "eur", "call_argument_pattern"),
        ({"type": "string", "format": "date"}, "2024-02-29", "2023-02-29", "call_argument_format"),
        ({"type": "string", "format": "date-time"}, "2024-05-01T10:00:00Z", "2024-05-01 10:00", "call_argument_format"),
        ({"type": "string", "format": "email"}, "ana@example.org", "ana.example.org", "call_argument_format"),
        # draft 2020-12 `time` is RFC 3339 full-time (an offset is required), not draft 3's HH:MM:SS
        ({"type": "string", "format": "time"}, "10:30:00Z", "10:30:00", "call_argument_format"),
        ({"type": "string", "format": "uuid"}, "123e4567-e89b-42d3-a456-426614174000", "123e4567", "call_argument_format"),
        ({"type": "number", "exclusiveMinimum": 0}, 0.5, 0, "call_argument_range"),
        ({"type": "number", "exclusiveMaximum": 10}, 9.99, 10, "call_argument_range"),
        ({"type": "integer", "multipleOf": 5}, 15, 12, "call_argument_range"),
        ({"type": "string", "minLength": 2}, "ab", "a", "call_argument_range"),
        ({"type": "string", "maxLength": 3}, "abc", "abcd", "call_argument_range"),
        ({"type": "array", "items": {"type": "string"}, "minItems": 1}, ["a"], [], "call_argument_range"),
        ({"type": "array", "items": {"type": "string"}, "maxItems": 2}, ["a", "b"], ["a", "b", "c"], "call_argument_range"),
        ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, ["a", "b"], ["a", "a"], "call_argument_invalid"),
        ({"type": "string", "const": "v1"}, "v1", "v2", "call_argument_enum"),
        ({"type": "number"}, 3, True, "call_argument_type"),
        ({"type": "integer"}, 3, 3.5, "call_argument_type"),
        ({"type": "boolean"}, False, "false", "call_argument_type"),
        ({"type": "array", "items": {"type": "integer"}}, [1, 2], [1, "2"], "call_argument_type"),
        ({"not": {"type": "null"}}, 1, None, "call_argument_invalid"),
    ],
)
def test_each_keyword_maps_to_one_code(schema: dict, ok: object, bad: object, code: str) -> None:
    parameters = {"type": "object", "properties": {"x": schema}, "required": ["x"]}
    assert check(with_schema(parameters, {"x": ok})) == []
    verdicts = check(with_schema(parameters, {"x": bad}))
    assert [v.code for v in verdicts] == [code]
    assert verdicts[0].path == "messages[2].tool_calls[0].arguments/x" + ("/1" if bad == [1, "2"] else "")


def test_an_integer_is_a_valid_number_and_a_bool_is_not_an_integer() -> None:
    number = {"type": "object", "properties": {"x": {"type": "number"}}}
    assert codes(with_schema(number, {"x": 3})) == set()
    assert codes(with_schema(number, {"x": 3.0})) == set()
    integer = {"type": "object", "properties": {"x": {"type": "integer"}}}
    assert codes(with_schema(integer, {"x": 3.0})) == set()  # JSON Schema: 3.0 is an integer
    assert codes(with_schema(integer, {"x": False})) == {"call_argument_type"}


NESTED = {
    "type": "object",
    "properties": {
        "contact": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
            "required": ["name"],
        },
        "stops": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90}, "lon": {"type": "number"}},
                "required": ["lat", "lon"],
            },
        },
        "when": {"anyOf": [{"type": "string", "format": "date"}, {"type": "object", "properties": {"from": {"type": "string", "format": "date"}}}]},
    },
}


@pytest.mark.parametrize(
    ("arguments", "code", "path"),
    [
        ({"contact": {"name": "Ana", "email": "nope"}}, "call_argument_format", "contact/email"),
        ({"contact": {"email": "ana@example.org"}}, "call_missing_required", "contact/name"),
        ({"contact": {"name": "Ana", "phone": "1"}}, "call_unknown_argument", "contact/phone"),
        ({"stops": [{"lat": 1, "lon": 2}, {"lat": 95, "lon": 2}]}, "call_argument_range", "stops/1/lat"),
        ({"stops": [{"lat": 1}]}, "call_missing_required", "stops/0/lon"),
        ({"stops": [{"lat": 1, "lon": "2"}]}, "call_argument_type", "stops/0/lon"),
        ({"when": {"from": "someday"}}, "call_argument_format", "when/from"),  # the anyOf branch that fits best
    ],
)
def test_nested_faults_are_reported_at_the_deepest_path(arguments: dict, code: str, path: str) -> None:
    valid = {"contact": {"name": "Ana", "email": "ana@example.org"}, "stops": [{"lat": 1, "lon": 2}], "when": {"from": "2024-05-01"}}
    assert check(with_schema(NESTED, valid)) == []
    verdicts = check(with_schema(NESTED, arguments))
    assert [(v.code, v.path) for v in verdicts] == [(code, f"messages[2].tool_calls[0].arguments/{path}")]


@pytest.mark.parametrize(
    ("parameters", "extra_allowed"),
    [
        ({"type": "object", "properties": {"a": {"type": "string"}}}, False),  # closed by default (documented)
        ({"type": "object", "properties": {}}, False),  # a function without parameters takes none
        ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True}, True),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}}, True),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "patternProperties": {"^b": {}}}, True),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "allOf": [{"properties": {"b": {}}}]}, True),
        ({"type": "object"}, True),  # no properties declared: an open map
    ],
)
def test_undeclared_arguments_are_errors_unless_the_schema_opts_in(parameters: dict, extra_allowed: bool) -> None:
    found = codes(with_schema(parameters, {"b": 1}))
    assert found == (set() if extra_allowed else {"call_unknown_argument"})


def test_extra_arguments_of_an_open_map_are_validated_by_its_schema() -> None:
    parameters = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}}
    assert paths(with_schema(parameters, {"b": "x"}), "call_argument_type") == ["messages[2].tool_calls[0].arguments/b"]


def test_unevaluated_properties_false_reports_undeclared_arguments() -> None:
    parameters = {"type": "object", "allOf": [{"properties": {"a": {"type": "string"}}}], "unevaluatedProperties": False}
    assert codes(with_schema(parameters, {"a": "x"})) == set()
    verdicts = check(with_schema(parameters, {"a": "x", "b": 1}))
    assert [(v.code, v.path) for v in verdicts] == [("call_unknown_argument", "messages[2].tool_calls[0].arguments")]
    assert "'b'" in verdicts[0].message and "'a'" not in verdicts[0].message


def test_every_missing_required_argument_is_reported_once() -> None:
    parameters = {"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "required": ["a", "b", "c"]}
    assert paths(with_schema(parameters, {"b": 1}), "call_missing_required") == [
        "messages[2].tool_calls[0].arguments/a", "messages[2].tool_calls[0].arguments/c",
    ]


def test_dependent_required_is_a_missing_argument() -> None:
    parameters = {"type": "object", "properties": {"card": {}, "cvv": {}}, "dependentRequired": {"card": ["cvv"]}}
    assert paths(with_schema(parameters, {"card": "4111"}), "call_missing_required") == ["messages[2].tool_calls[0].arguments/cvv"]


def test_empty_argument_text_means_no_arguments() -> None:
    assert codes(with_schema({"type": "object", "properties": {}}, "")) == set()
    assert codes(with_schema({"type": "object", "properties": {"a": {}}, "required": ["a"]}, "")) == {"call_missing_required"}


def test_a_schema_that_cannot_be_applied_makes_the_call_unverifiable() -> None:
    broken = {"type": "object", "properties": {"a": {"type": "nope"}}}
    verdicts = check(with_schema(broken, {"a": 1}))
    # the definition rule reports the broken schema; the call cannot be checked against it
    assert [v.code for v in verdicts] == ["tool_definition_invalid", "call_argument_invalid"]
    assert "cannot be applied" in verdicts[1].message


def test_a_call_to_an_unknown_function_or_with_bad_json_is_not_schema_checked() -> None:
    assert codes(dialogue(name="nope", arguments='{"days": "x"}')) == {"call_unknown_function"}
    assert codes(dialogue(arguments='{"days": "x"')) == {"call_arguments_not_json"}


def test_unknown_function_is_not_reported_per_call_when_no_tools_are_offered() -> None:
    assert codes(dialogue(tools=[])) == {"dialogue_missing_field"}


def test_every_fault_of_every_call_is_listed() -> None:
    d = dialogue(arguments='{"days": "x", "units": "kelvin", "wind": 3}')
    assert codes(d) == {"call_missing_required", "call_argument_type", "call_argument_enum", "call_unknown_argument"}


def test_strict_schema_closes_declared_objects_only() -> None:
    schema = {"type": "object", "properties": {"o": {"type": "object", "properties": {"x": {}}}, "m": {"type": "object"}}}
    strict = strict_schema(schema)
    assert strict["additionalProperties"] is False
    assert strict["properties"]["o"]["additionalProperties"] is False
    assert "additionalProperties" not in strict["properties"]["m"]
    assert "additionalProperties" not in schema  # the input is not modified


def test_a_definition_is_compiled_again_only_until_it_recurs(monkeypatch: pytest.MonkeyPatch) -> None:
    function_facts.clear()
    built: list[dict[str, Any]] = []

    def counted(parameters: dict[str, Any]) -> ArgumentsSchema:
        built.append(parameters)
        return ArgumentsSchema(parameters)

    monkeypatch.setattr(function_facts, "arguments_schema", counted)
    for i in range(20):
        # A new but equal definition in every record, as a reader makes them.
        function = Function(name="g", description="Look up q.", parameters={"type": "object", "properties": {"q": {"type": "string"}}})
        check(dialogue(arguments=f'{{"q": "{i}"}}', name="g", tools=[function, WEATHER]))
    function_facts.clear()
    # Its first record's facts are not kept (a definition met once is not kept), its second's are
    # and serve the 18 after; WEATHER is never called, so its schema is never compiled.
    assert len(built) == 2
