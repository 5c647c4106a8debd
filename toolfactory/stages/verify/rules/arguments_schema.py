"""The schema a call's arguments are checked against: a function's ``parameters``, closed.

Undeclared arguments (``call_unknown_argument``): an argument that is not declared in
``properties`` is an error whenever the object schema declares ``properties`` and does not
opt in to extra keys (no ``additionalProperties``/``patternProperties``/
``unevaluatedProperties`` and no composition such as ``allOf``/``$ref`` that could declare
more). Tool schemas rarely say ``additionalProperties: false``, yet an argument the API does not
document is a hallucination that a real API rejects or silently ignores; a schema that wants
open objects says so with ``additionalProperties: true`` (or a schema). This applies at every
level reached through ``properties``, ``items``, ``prefixItems`` and ``additionalProperties``,
except a nested object with empty ``properties``, which is a free-form object (BFCL declares
query parameters so).

A valid call is recognised without ``jsonschema``'s validator (JSON Schema 2020-12, formats
checked), which is built only for the calls nothing else proves valid: it explains every
violation. First :func:`proven_valid`, a walk of the call's arguments along the schema that
knows only the commonest keywords (``type``, ``properties``, ``required``,
``additionalProperties``, ``items``, string and null ``enum`` values, annotations) and answers
"valid" or "cannot tell" without reading the rest of the schema: a function offered in one record
only is called once or twice, and compiling its schema for that costs ten times the walk. Then,
for what the walk cannot tell, the fast test of :mod:`.fast_schema`.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator

from toolfactory.models import JsonSchema, canonical_json
from toolfactory.stages.verify.rules.fast_schema import (
    ANNOTATIONS,
    JSON_SCHEMA,
    Test,
    fast_validator,
)

# Keys with which an object schema opts in to keys beyond `properties` (or may declare more).
_OPEN_KEYS = ("additionalProperties", "patternProperties", "unevaluatedProperties", "allOf", "anyOf", "oneOf",
              "$ref", "$dynamicRef", "if", "dependentSchemas")


def strict_schema(schema: Any, root: bool = True) -> Any:
    """`schema` with ``additionalProperties: false`` on every closed object (see module doc)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    props = schema.get("properties")
    if isinstance(props, dict):
        out["properties"] = {name: strict_schema(sub, False) for name, sub in props.items()}
        # A nested object that declares no property at all is a free-form one (BFCL's
        # `{"type": "dict", "properties": {}}` for query parameters); at the root, "no
        # arguments".
        if not any(key in schema for key in _OPEN_KEYS) and (props or root):
            out["additionalProperties"] = False
    items = schema.get("items")
    if isinstance(items, dict):
        out["items"] = strict_schema(items, False)
    prefix = schema.get("prefixItems")
    if isinstance(prefix, list):
        out["prefixItems"] = [strict_schema(sub, False) for sub in prefix]
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        out["additionalProperties"] = strict_schema(extra, False)
    return out


# How jsonschema reads each type name (draft 2020-12), for the values a JSON text parses to. An
# integral float is an "integer" there too; the walk leaves that case to the validators.
_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "object": (dict,), "array": (list,), "boolean": (bool,),
                                       "null": (type(None),), "integer": (int,), "number": (int, float)}
_MISSING = object()


def _typed(value: Any, expected: Any) -> bool:
    names = (expected,) if isinstance(expected, str) else expected
    if not isinstance(names, list) and not isinstance(names, tuple):
        return False
    for name in names:
        kinds = _TYPES.get(name) if isinstance(name, str) else None
        if kinds is None:
            return False  # an unknown type name: the validators say what they make of it
        if type(value) in kinds:  # a parsed JSON value is of these exact types (a bool is no int here)
            return True
    return False


def proven_valid(schema: Any, value: Any, root: bool = True) -> bool:
    """True only when `value` is valid against ``strict_schema(schema)`` as ``jsonschema`` reads
    it; False when it is not, or when the walk cannot tell (a keyword it does not know at a
    level the value reaches). Only the parts of the schema the value reaches are read."""
    if schema is True:
        return True
    if not isinstance(schema, dict):
        return False
    for key, expected in schema.items():
        if key == "type":
            if not _typed(value, expected):
                return False
        elif key == "properties":
            if not isinstance(expected, dict):
                return False
            if isinstance(value, dict):
                for name, item in value.items():
                    sub = expected.get(name, _MISSING)
                    if sub is _MISSING:
                        # Closed as strict_schema closes it; an open schema's extra keys are
                        # judged under additionalProperties.
                        if (expected or root) and not any(k in schema for k in _OPEN_KEYS):
                            return False
                    elif not proven_valid(sub, item, False):
                        return False
        elif key == "required":
            if not isinstance(expected, list) or not all(isinstance(name, str) for name in expected):
                return False
            if isinstance(value, dict) and not all(name in value for name in expected):
                return False
        elif key == "additionalProperties":
            declared = schema.get("properties", {})
            if not isinstance(declared, dict) or not isinstance(expected, (bool, dict)):
                return False
            if isinstance(value, dict) and not all(proven_valid(expected, item, False)
                                                   for name, item in value.items() if name not in declared):
                return False
        elif key == "items":
            if not isinstance(expected, (bool, dict)):
                return False  # draft 4's list form
            if isinstance(value, list) and not all(proven_valid(expected, item, False) for item in value):
                return False
        elif key == "enum":
            # Strings and null compare in jsonschema as in Python; numbers (1 == 1.0, True != 1) do not.
            if not isinstance(expected, list) or not (value is None or type(value) is str) or value not in expected:
                return False
        elif key in JSON_SCHEMA and key not in ANNOTATIONS:
            return False  # a keyword the walk does not read
    return True


_UNSET: Any = object()


class ArgumentsSchema:
    """One function's compiled arguments schema (kept with the function's facts, once per
    distinct definition: :mod:`.function_facts`)."""

    __slots__ = ("_fast", "_parameters", "_validator")

    def __init__(self, parameters: JsonSchema) -> None:
        self._parameters = parameters
        self._validator: Draft202012Validator | None = None
        self._fast: Test | None = _UNSET

    def passes(self, value: Any) -> bool:
        """True only for valid arguments (False: ask `validator`)."""
        if proven_valid(self._parameters, value):
            return True
        if self._fast is _UNSET:  # built for the first call the walk cannot tell
            self._fast = fast_validator(strict_schema(self._parameters))
        return self._fast is not None and self._fast(value)

    @property
    def validator(self) -> Draft202012Validator:
        """Explains what is wrong with a call's arguments. Built when first needed: a function
        whose calls all pass the fast test, as most do, never needs it."""
        if self._validator is None:
            # From the schema's canonical JSON: jsonschema reports violations in the order of the
            # schema's keys, so sorted keys keep the order of a record's findings independent of
            # how its source ordered them.
            strict = strict_schema(json.loads(canonical_json(self._parameters)))
            self._validator = Draft202012Validator(strict, format_checker=Draft202012Validator.FORMAT_CHECKER)
        return self._validator


def arguments_schema(parameters: JsonSchema) -> ArgumentsSchema:
    return ArgumentsSchema(parameters)
