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

A schema gets, where it allows it, the fast validity test of :mod:`.fast_schema`, which lets a
valid call skip ``jsonschema``'s validator (JSON Schema 2020-12, formats checked), built only
for the calls that test does not pass: it explains every violation.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator

from toolfactory.models import JsonSchema, canonical_json
from toolfactory.stages.verify.rules.fast_schema import Test, fast_validator

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


class ArgumentsSchema:
    """One function's compiled arguments schema (kept with the function's facts, once per
    distinct definition: :mod:`.function_facts`)."""

    __slots__ = ("_parameters", "_validator", "valid")

    def __init__(self, parameters: JsonSchema) -> None:
        self._parameters = parameters
        self._validator: Draft202012Validator | None = None
        self.valid: Test | None = fast_validator(strict_schema(parameters))
        """True only for valid arguments (None: no fast test for this schema; ask `validator`)."""

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
