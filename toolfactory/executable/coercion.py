"""Near-miss argument types, coerced before a call to an executable tool runs.

Models often send a call whose arguments are right but for their JSON type: a number written as a
string (``"5"`` for an integer), a boolean written as a string (``"true"``), or one value where
the parameter is an array. A real API's validation answers such a call with a 400; a Python
environment or an MCP server would run it with the wrong type. Under an executable source's
``near_miss_types: coerce`` the dialogues stage runs it with the well-typed value instead, and the
record holds the call as it ran (:mod:`toolfactory.stages.dialogues.execution`).

:func:`coerce` changes a value only where it fails the parameters' schema (the locations
``jsonschema`` reports, nested properties, items and the branches of ``anyOf``/``oneOf``
included), only to a value that makes that location valid, and only when every change together
makes the whole arguments valid; otherwise it changes nothing and the call stays a rejection.
Each change is of one :data:`KINDS`:

* ``number``: a string that is a plain JSON number, where the schema asks for a number or an
  integer (for an integer, only a string whose value is integral: ``"5"``, ``"5.0"``, not ``"5.5"``);
* ``boolean``: ``"true"`` or ``"false"`` (any case), where the schema asks for a boolean;
* ``array``: a value that is no array, as an array of it, where the schema asks for an array and
  the value fits its items.

Arguments are checked as the dialogues stage checks a call before running it
(:func:`~toolfactory.stages.dialogues.agents.call_error`: JSON Schema 2020-12 against the
function's ``parameters``), with one validator per distinct schema.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from toolfactory.models import JsonSchema, canonical_json

Kind = Literal["number", "boolean", "array"]
#: The kinds of coercion, in the order they are tried at one location.
KINDS: tuple[Kind, ...] = ("number", "boolean", "array")

# A JSON number and nothing else: no sign but '-', no leading zeros, no spaces, no 'inf' or 'nan'.
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_BOOLEANS = {"true": True, "false": False}
#: A number string further from 1 than 10 to this power is no near miss (and "1e999999" would
#: make an integer of a million digits).
MAX_EXPONENT = 308
# The JSON types each kind turns a value into.
_TARGETS: dict[Kind, frozenset[str]] = {"number": frozenset({"integer", "number"}), "boolean": frozenset({"boolean"}),
                                        "array": frozenset({"array"})}
_BRANCHES = ("anyOf", "oneOf", "allOf")

Location = tuple[str | int, ...]


@dataclass(frozen=True)
class Coercion:
    """One value changed: where (a path into the arguments), of which kind, from what to what."""

    kind: Kind
    path: Location
    sent: Any
    coerced: Any

    @property
    def pointer(self) -> str:
        """The location as a JSON Pointer (``/filters/0/limit``; ``""`` is the arguments)."""
        return "".join("/" + str(step).replace("~", "~0").replace("/", "~1") for step in self.path)


@dataclass(frozen=True)
class Coerced:
    """The arguments to run with, and the coercions that made them (none: as sent)."""

    arguments: Any
    coercions: tuple[Coercion, ...] = ()


@lru_cache(maxsize=4096)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json))


def validator(parameters: JsonSchema) -> Draft202012Validator:
    """The validator of `parameters`, built once per distinct schema."""
    return _validator(canonical_json(parameters))


def coerce(parameters: JsonSchema, arguments: Any) -> Coerced:
    """`arguments` with their near-miss types coerced (see the module doc); as they are, with no
    coercion, when they are valid or when coercion cannot make them valid."""
    checker = validator(parameters)
    errors = list(checker.iter_errors(arguments))
    if not errors:
        return Coerced(arguments)
    schemas: dict[Location, list[dict[str, Any]]] = {}
    for error in _every(errors):
        where = tuple(error.absolute_path)
        if isinstance(error.schema, dict) and not any(s is error.schema for s in schemas.get(where, [])):
            schemas.setdefault(where, []).append(error.schema)
    fixed = copy.deepcopy(arguments)
    made: list[Coercion] = []
    # Deepest first: a location's value is read after the changes inside it.
    for where in sorted(schemas, key=len, reverse=True):
        sent = _at(fixed, where)
        found = next(((kind, value) for schema in schemas[where] for kind, value in _candidates(sent, schema)
                      if checker.evolve(schema=schema).is_valid(value)), None)
        if found is not None:
            fixed = _put(fixed, where, found[1])
            made.append(Coercion(found[0], where, sent, found[1]))
    if not made or not checker.is_valid(fixed):
        return Coerced(arguments)
    return Coerced(fixed, tuple(sorted(made, key=lambda c: [(isinstance(step, str), step) for step in c.path])))


def _every(errors: Sequence[ValidationError]) -> Iterator[ValidationError]:
    """The errors and, recursively, those of the branches of each ``anyOf``/``oneOf``."""
    for error in errors:
        yield error
        yield from _every(error.context or [])


def _candidates(value: Any, schema: dict[str, Any]) -> Iterator[tuple[Kind, Any]]:
    """The coerced values of `value` that `schema`'s declared types ask for, by kind."""
    asked = _declared_types(schema)
    if isinstance(value, str) and asked & _TARGETS["number"]:
        number = _number(value, integral="number" not in asked)
        if number is not None:
            yield "number", number
    if isinstance(value, str) and "boolean" in asked and value.lower() in _BOOLEANS:
        yield "boolean", _BOOLEANS[value.lower()]
    if not isinstance(value, list) and "array" in asked:
        yield "array", [value]


def _declared_types(schema: Any) -> set[str]:
    """The JSON types `schema` names (``type``, the types of ``enum``/``const`` values, and those
    of its ``anyOf``/``oneOf``/``allOf`` branches): a schema that names none asks for no type."""
    if not isinstance(schema, dict):
        return set()
    declared = schema.get("type")
    names = [declared] if isinstance(declared, str) else declared if isinstance(declared, list) else []
    found = {name for name in names if isinstance(name, str)}
    values = schema.get("enum")
    if not isinstance(values, list):
        values = [schema["const"]] if "const" in schema else []
    found |= {_json_type(value) for value in values}
    for key in _BRANCHES:
        branches = schema.get(key)
        for branch in branches if isinstance(branches, list) else []:
            found |= _declared_types(branch)
    return found


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null" if value is None else "string"


def _number(text: str, integral: bool) -> int | float | None:
    """The number `text` writes as plain JSON, or None; with `integral`, only a whole number, as
    an int."""
    if not _JSON_NUMBER.fullmatch(text):
        return None
    exact = Decimal(text)
    if exact and abs(exact.adjusted()) > MAX_EXPONENT:
        return None
    if integral:
        return int(exact) if exact == exact.to_integral_value() else None
    value: int | float = json.loads(text)
    return value if isinstance(value, int) or math.isfinite(value) else None


def _at(value: Any, path: Location) -> Any:
    for step in path:
        value = value[step]
    return value


def _put(value: Any, path: Location, new: Any) -> Any:
    """`value` with `new` at `path` (in place below the top; the top replaced when `path` is empty)."""
    if not path:
        return new
    _at(value, path[:-1])[path[-1]] = new
    return value
