"""A compiled validity test for the arguments schemas whose meaning is beyond doubt.

Python's ``jsonschema`` explains a violation (keyword, path, message: what the call rules report)
but costs about 50 µs per call; ``jsonschema_rs`` (the Rust implementation of the same
specification) answers "valid or not" in about 1 µs. Nearly every call of a dataset is valid, so
:func:`fast_validator` gives a test that accepts what is valid and leaves every other case to
``jsonschema``, which alone decides what is wrong and how it is reported.

The test is built only for schemas made entirely of keywords both libraries read the same way
(:data:`KEYWORDS`: types, properties, required, items, enums, bounds, the combinators, and
annotations; keys that are no JSON Schema keyword at all, such as ToolBench's ``example_value``,
mean nothing to either). A schema with any other keyword (``format``, ``pattern``, ``$ref``,
``$schema``, ``multipleOf``, ``uniqueItems``, a keyword of another draft) gets no test. A schema the Rust
library cannot compile gets none, and a value it cannot take (a number beyond 64 bits, NaN, a
lone surrogate) is not called valid. So the fast test can only say "valid" where ``jsonschema``
says so too; a differential test over the labelled corpus and the released data holds it to that.
"""

from __future__ import annotations

from typing import Any, Callable

import jsonschema_rs

# Keywords whose value is a subschema, a list of them, or a map of them.
_SUBSCHEMA = frozenset({"items", "additionalProperties", "not"})
_SUBSCHEMA_LISTS = frozenset({"prefixItems", "anyOf", "oneOf", "allOf"})
_SUBSCHEMA_MAPS = frozenset({"properties"})
# Keywords that constrain a value, read alike by both libraries.
_ASSERTIONS = frozenset({
    "type", "required", "enum", "const",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
})
# Keywords that constrain nothing.
ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
                          "$comment"})
KEYWORDS = _SUBSCHEMA | _SUBSCHEMA_LISTS | _SUBSCHEMA_MAPS | _ASSERTIONS | ANNOTATIONS
# Every keyword of JSON Schema drafts 4 to 2020-12. A key outside it (ToolBench's
# `example_value`, BFCL's `optional`, OpenAPI's `example`, `x-…`) means nothing to either library.
JSON_SCHEMA = KEYWORDS | frozenset({
    "$schema", "$id", "id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor",
    "$vocabulary", "$defs", "definitions", "if", "then", "else", "dependentSchemas", "dependencies", "additionalItems",
    "contains", "patternProperties", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "multipleOf",
    "pattern", "uniqueItems", "maxContains", "minContains", "dependentRequired", "format", "contentEncoding",
    "contentMediaType", "contentSchema",
})

Test = Callable[[Any], bool]


def plain(schema: Any) -> bool:
    """Whether every JSON Schema keyword of `schema`, at every level, is one of :data:`KEYWORDS`
    (keys that are no JSON Schema keyword at all are annotations to both libraries)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict) or any(key in JSON_SCHEMA and key not in KEYWORDS for key in node):
            return False
        for key, value in node.items():
            if key in _SUBSCHEMA:
                stack.append(value)
            elif key in _SUBSCHEMA_LISTS:
                if not isinstance(value, list):
                    return False
                stack.extend(value)
            elif key in _SUBSCHEMA_MAPS:
                if not isinstance(value, dict):
                    return False
                stack.extend(value.values())
    return True


def fast_validator(schema: Any) -> Test | None:
    """A test that is True only for values valid against `schema`, or None (see the module doc)."""
    if not plain(schema):
        return None
    return _FastTest(schema)


_REFUSED = object()  # the compiled validator of a schema jsonschema_rs refuses


class _FastTest:
    """The fast test of one schema. Its first value is tested in one shot (the schema is read
    and dropped: about a third of the cost of building a validator, and a function offered in
    one record only is called once or twice); from its second value on, a compiled validator.
    A schema it cannot compile, or a value it cannot take, is never called valid."""

    __slots__ = ("_compiled", "_schema")

    def __init__(self, schema: Any) -> None:
        self._schema = schema
        self._compiled: Any = None

    def __call__(self, value: Any) -> bool:
        compiled = self._compiled
        try:
            if compiled is None:  # its first value
                self._compiled = False
                return bool(jsonschema_rs.is_valid(self._schema, value, draft=jsonschema_rs.Draft202012))
            if compiled is False:  # its second: build the validator
                self._compiled = _REFUSED  # and so it stays if the schema cannot be compiled
                self._compiled = compiled = jsonschema_rs.Draft202012Validator(self._schema)
            if compiled is _REFUSED:
                return False
            return bool(compiled.is_valid(value))
        except Exception:  # noqa: BLE001 - a schema or a value it cannot take: jsonschema decides
            return False
