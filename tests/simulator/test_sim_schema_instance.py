"""instance_for: generated values validate, look realistic and are reproducible."""

from __future__ import annotations

import random
import re
import uuid
from typing import Any

import jsonschema
import pytest

from toolfactory.simulator import instance_for
from toolfactory.simulator.patterns import matching_string

# Not jsonschema.FormatChecker(): that merges every draft and checks `time` by the draft-3
# rule (HH:MM:SS, no offset), which contradicts the RFC 3339 `time` of draft 7 and later.
FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER
SEEDS = range(60)
CONTEXT = ["Book", "a", "table", "in", "Paris", "for", "Friday", "evening"]

SCHEMAS: dict[str, Any] = {
    "scalars": {
        "type": "object",
        "properties": {
            "flag": {"type": "boolean"},
            "nothing": {"type": "null"},
            "either": {"type": ["string", "integer"]},
            "const": {"const": "fixed"},
            "choice": {"enum": [1, "two", None]},
        },
        "required": ["flag", "nothing", "either", "const", "choice"],
    },
    "numbers": {
        "type": "object",
        "properties": {
            "int_bounds": {"type": "integer", "minimum": -5, "maximum": 5},
            "int_exclusive": {"type": "integer", "exclusiveMinimum": 10, "exclusiveMaximum": 13},
            "unit": {"type": "number", "minimum": 0, "maximum": 1},
            "step": {"type": "number", "multipleOf": 0.25, "minimum": 1, "maximum": 3},
            "cents": {"type": "number", "multipleOf": 0.01, "minimum": 0},
            "int_step": {"type": "integer", "multipleOf": 7, "minimum": 100},
            "age": {"type": "integer"},
        },
        "required": ["int_bounds", "int_exclusive", "unit", "step", "cents", "int_step", "age"],
    },
    "strings": {
        "type": "object",
        "properties": {
            "short": {"type": "string", "minLength": 2, "maxLength": 4},
            "long": {"type": "string", "minLength": 30},
            "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"},
            "phone": {"type": "string", "pattern": r"^\+?[0-9]{7,12}$"},
            "slug": {"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "maxLength": 20},
            "date": {"type": "string", "format": "date"},
            "when": {"type": "string", "format": "date-time"},
            "time": {"type": "string", "format": "time"},
            "email": {"type": "string", "format": "email"},
            "site": {"type": "string", "format": "uri"},
            "uid": {"type": "string", "format": "uuid"},
            "ip": {"type": "string", "format": "ipv4"},
        },
        "required": [
            "short",
            "long",
            "code",
            "phone",
            "slug",
            "date",
            "when",
            "time",
            "email",
            "site",
            "uid",
            "ip",
        ],
        "additionalProperties": False,
    },
    "nested_arrays": {
        "type": "object",
        "properties": {
            "orders": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
                        "lines": {"type": "array", "items": {"type": "number"}, "maxItems": 2},
                    },
                    "required": ["sku", "quantity"],
                    "additionalProperties": False,
                },
            },
            "tags": {
                "type": "array",
                "items": {"enum": ["a", "b", "c"]},
                "uniqueItems": True,
                "minItems": 2,
            },
            "pair": {
                "type": "array",
                "prefixItems": [{"type": "string"}, {"type": "integer"}],
                "items": False,
                "minItems": 2,
            },
        },
        "required": ["orders", "tags", "pair"],
    },
    "refs_and_combinators": {
        "$defs": {
            "money": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "minimum": 0},
                    "currency": {"type": "string", "enum": ["EUR", "USD"]},
                },
                "required": ["amount", "currency"],
            },
            "tree": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/tree"}},
                },
                "required": ["label"],
            },
        },
        "definitions": {"id": {"type": "string", "format": "uuid"}},
        "type": "object",
        "properties": {
            "price": {"$ref": "#/$defs/money"},
            "owner_id": {"$ref": "#/definitions/id"},
            "tree": {"$ref": "#/$defs/tree"},
            "contact": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"email": {"type": "string", "format": "email"}},
                        "required": ["email"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {"phone": {"type": "string"}},
                        "required": ["phone"],
                        "additionalProperties": False,
                    },
                ]
            },
            "size": {
                "anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "enum": ["S", "M"]}]
            },
            "limits": {
                "allOf": [
                    {
                        "type": "object",
                        "properties": {"low": {"type": "integer"}},
                        "required": ["low"],
                    },
                    {"properties": {"high": {"type": "integer"}}, "required": ["high"]},
                ]
            },
        },
        "required": ["price", "owner_id", "tree", "contact", "size", "limits"],
    },
    "maps": {
        "type": "object",
        "additionalProperties": {"type": "integer", "minimum": 0},
        "minProperties": 1,
    },
    "conditional": {
        "type": "object",
        "properties": {"kind": {"enum": ["card", "cash"]}, "card_number": {"type": "string"}},
        "required": ["kind"],
        "if": {"properties": {"kind": {"const": "card"}}},
        "then": {"required": ["card_number"]},
    },
    "draft4_exclusive": {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "number",
        "minimum": 0,
        "exclusiveMinimum": True,
        "maximum": 1,
        "exclusiveMaximum": True,
    },
    "draft7_tuple": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "boolean"}, {"type": "string", "format": "date"}],
        "additionalItems": False,
        "minItems": 2,
    },
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_instances_validate_for_many_seeds(name: str) -> None:
    schema = SCHEMAS[name]
    for seed in SEEDS:
        value = instance_for(schema, random.Random(seed), CONTEXT)
        jsonschema.validate(value, schema, format_checker=FORMAT_CHECKER)


def test_same_seed_gives_same_instance() -> None:
    schema = SCHEMAS["nested_arrays"]
    assert instance_for(schema, random.Random(7), CONTEXT) == instance_for(
        schema, random.Random(7), CONTEXT
    )


def test_different_seeds_vary() -> None:
    schema = SCHEMAS["strings"]
    values = {str(instance_for(schema, random.Random(seed), CONTEXT)) for seed in range(10)}
    assert len(values) == 10


def test_required_always_present_optional_sometimes() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "required": ["a"],
    }
    values = [instance_for(schema, random.Random(seed)) for seed in range(40)]
    assert all("a" in value for value in values)
    assert 0 < sum("b" in value for value in values) < 40


def test_property_names_give_realistic_values() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "email": {"type": "string"},
            "age": {"type": "integer"},
            "start_date": {"type": "string"},
        },
        "required": ["city", "email", "age", "start_date"],
    }
    value = instance_for(schema, random.Random(3), CONTEXT)
    assert value["city"] == "Paris"
    assert re.fullmatch(r"[a-z]+\.[a-z]+@example\.(com|org|net)", value["email"])
    assert 18 <= value["age"] <= 80
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", value["start_date"])


def test_free_text_reuses_context_words() -> None:
    schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    value = instance_for(schema, random.Random(0), ["cheap", "hotels", "near", "Lisbon"])
    assert set(value["query"].split()) <= {"cheap", "hotels", "near", "Lisbon"}


def test_uuid_format_is_a_uuid() -> None:
    value = instance_for({"type": "string", "format": "uuid"}, random.Random(1))
    assert uuid.UUID(value).version == 4


def test_recursive_ref_terminates() -> None:
    schema = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"next": {"$ref": "#/$defs/node"}},
                "required": ["next"],
            }
        },
        "$ref": "#/$defs/node",
    }
    value = instance_for(schema, random.Random(0), max_attempts=2)
    assert isinstance(value, dict)


@pytest.mark.parametrize(
    "pattern",
    [
        r"^[A-Z]{3}$",
        r"^\d{4}-\d{2}$",
        r"^(usd|eur|gbp)$",
        r"^[a-z0-9_]{3,16}$",
        r"^(\w+)-\1$",
        r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$",
        r"ab+c",
        r"^#[0-9a-fA-F]{6}$",
    ],
)
def test_pattern_generator_matches(pattern: str) -> None:
    for seed in range(20):
        text = matching_string(pattern, random.Random(seed))
        assert text is not None and re.search(pattern, text)


def test_pattern_generator_respects_length() -> None:
    text = matching_string(r"[a-z]+", random.Random(0), min_length=8, max_length=10)
    assert text is not None and 8 <= len(text) <= 10


def test_a_bare_name_is_a_persons_only_in_a_person_like_object() -> None:
    from toolfactory.simulator.lexicon import FIRST_NAMES

    context = "Extract the top-level domains of these APIs: Weather forecasts, Finance quotes".split()
    node = {"type": "object", "properties": {"name": {"type": "string"}, "description": {"type": "string"}}, "required": ["name"]}
    guest = {"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string"}}, "required": ["name"]}
    for seed in SEEDS:
        thing = instance_for(node, random.Random(seed), context)["name"]
        assert thing.split()[0] not in FIRST_NAMES and set(thing.lower().split()) <= {w.strip(",:").lower() for w in context}
        assert instance_for(guest, random.Random(seed), context)["name"].split()[0] in FIRST_NAMES
