"""API definition clarity (ToolACE §3.1, Table 6): what a tool must have to enter the pool.

Two name checks, because they answer different questions. A name is *valid* when a caller can
write it down unambiguously: 1 to 256 characters, no whitespace or control characters. Released
data uses more than OpenAI allows (BFCL and xLAM: ``math.factorial``, ``requests.get``), and those
records are correct. OpenAI's API limit (``^[A-Za-z0-9_-]{1,64}$``) is a separate code,
``tool_function_name_not_openai``: the pool keeps it a problem (its tools are sent to an
OpenAI-compatible endpoint), the verifier reports it as a warning, and the OpenAI export maps
such names (:mod:`toolfactory.export.names`).

A schema is checked against JSON Schema 2020-12's meta-schema. ``jsonschema``'s walk of the
meta-schema (a ``$dynamicRef`` resolved at every level) costs about 2 ms a schema, which is most of
the cost of a function seen once; ``jsonschema_rs`` answers "valid" in a few microseconds, with
the formats the meta-schema names checked by ``jsonschema``'s own format functions. Only its "valid"
is taken: a schema it does not call valid (or cannot take) goes to ``jsonschema``, which alone
decides and words what is wrong. Before either, a schema made only of the commonest keywords
(types, properties, required, items, enums, annotations: most tool schemas) is proven valid by a
walk that reads each keyword's value as the meta-schema constrains it (:func:`plainly_valid`, a
few microseconds against the compiled validator's fifteen).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache, partial
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from toolfactory.models import Function, Tool

OPENAI_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NAME = re.compile(r"^[^\s\x00-\x1f\x7f]{1,256}$")
NAME_NOT_OPENAI = "tool_function_name_not_openai"


def definition_problems(tool: Tool) -> list[tuple[str, str]]:
    """(reason code, message) for every problem of `tool`; empty when it may enter the pool."""
    problems: list[tuple[str, str]] = []
    if not tool.functions:
        problems.append(("tool_no_functions", f"tool {tool.name!r} has no functions"))
    seen: set[str] = set()
    for fn in tool.functions:
        if fn.name in seen:
            problems.append(("tool_duplicate_function", f"{tool.name}.{fn.name}: function name used twice"))
        seen.add(fn.name)
        problems += [(code, f"{tool.name}.{message}") for code, message in function_problems(fn)]
    return problems


def function_problems(fn: Function) -> tuple[tuple[str, str], ...]:
    """(reason code, message) for every problem of one function definition."""
    return _function_problems(fn.model_dump_json())


@lru_cache(maxsize=8192)
def _function_problems(fn_json: str) -> tuple[tuple[str, str], ...]:
    # Cached by content: the same functions recur in every record of a dataset.
    return uncached_function_problems(Function.model_validate_json(fn_json))


def uncached_function_problems(fn: Function) -> tuple[tuple[str, str], ...]:
    """:func:`function_problems` computed afresh, for a caller that keeps them per definition
    itself (the verifier's facts of a function): no copy of `fn` is read back from its JSON."""
    problems: list[tuple[str, str]] = []
    if not _NAME.match(fn.name):
        problems.append(("tool_function_name_invalid", f"{fn.name!r}: a name is 1 to 256 characters without whitespace"))
    elif not OPENAI_NAME.match(fn.name):
        problems.append((NAME_NOT_OPENAI, f"{fn.name}: OpenAI's API accepts only names matching {OPENAI_NAME.pattern}"))
    if not fn.description.strip():
        problems.append(("tool_missing_description", f"{fn.name}: no description"))
    for label, schema in (("parameters", fn.parameters), ("returns", fn.returns)):
        error = schema_error(schema)
        if error is not None:
            problems.append(("tool_invalid_schema", f"{fn.name}.{label} at {error}"))
    if fn.parameters.get("type") != "object":
        problems.append(("tool_parameters_not_object", f"{fn.name}: parameters must be a JSON Schema object"))
    else:
        properties = fn.parameters.get("properties") or {}
        missing = [name for name in fn.parameters.get("required", []) if name not in properties]
        if missing:
            problems.append(("tool_required_undeclared", f"{fn.name}: required {missing} not in properties"))
    return tuple(problems)


# The formats 2020-12's meta-schema names ($id, $ref, pattern, ...): checked by the functions
# jsonschema checks them with, and not at all where it has none (it skips a format it cannot check).
_META_FORMATS = ("uri", "uri-reference", "regex")
_META_SCHEMA = jsonschema_rs.validator_for(
    Draft202012Validator.META_SCHEMA, validate_formats=True,
    formats={name: partial(Draft202012Validator.FORMAT_CHECKER.conforms, format=name) for name in _META_FORMATS})


_SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_TEXT_KEYWORDS = frozenset({"description", "title", "$comment"})
_FLAG_KEYWORDS = frozenset({"deprecated", "readOnly", "writeOnly"})


def _unique_strings(value: Any, allowed: frozenset[str] | None = None) -> bool:
    return (isinstance(value, list) and all(isinstance(item, str) for item in value)
            and len(set(value)) == len(value) and (allowed is None or all(item in allowed for item in value)))


def plainly_valid(schema: Any) -> bool:
    """True only for a valid schema (2020-12) made of the keywords read here, each with a value of
    the kind the meta-schema asks for; False for any other schema (valid or not: the validators
    decide). A key the walk does not know, even one that means nothing, makes it say False."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict):
            return False
        for key, value in node.items():
            if key == "type":
                if not (value in _SIMPLE_TYPES if isinstance(value, str) else value and _unique_strings(value, _SIMPLE_TYPES)):
                    return False
            elif key == "properties":
                if not isinstance(value, dict):
                    return False
                stack.extend(value.values())
            elif key in ("items", "additionalProperties"):
                stack.append(value)  # a schema: a boolean or an object, checked in turn
            elif key == "required":
                if not _unique_strings(value):
                    return False
            elif key in ("enum", "examples"):
                if not isinstance(value, list):
                    return False
            elif key in _TEXT_KEYWORDS:
                if not isinstance(value, str):
                    return False
            elif key in _FLAG_KEYWORDS:
                if not isinstance(value, bool):
                    return False
            elif key != "default":  # any value
                return False
    return True


def schema_error(schema: Any) -> str | None:
    """Where and why `schema` is no valid JSON Schema (2020-12), or None when it is one."""
    if plainly_valid(schema) or _meta_valid(schema):
        return None
    return _schema_error(json.dumps(schema, sort_keys=True))


def _meta_valid(schema: Any) -> bool:
    """True only for a valid schema (see the module doc)."""
    try:
        return bool(_META_SCHEMA.is_valid(schema))
    except Exception:  # noqa: BLE001 - a value it cannot take (an integer beyond 64 bits, NaN): jsonschema decides
        return False


@lru_cache(maxsize=16384)
def _schema_error(schema_json: str) -> str | None:
    # Cached by the schema alone: the same parameter and return schemas recur across functions
    # (the default `returns`, ToolBench's flat string parameters), and checking one is costly.
    try:
        Draft202012Validator.check_schema(json.loads(schema_json))
    except SchemaError as exc:
        return f"{'/'.join(str(p) for p in exc.absolute_path) or '(root)'}: {exc.message}"
    return None


_ID_PARAMETER = re.compile(r"(^|_)id$|[a-z0-9]Id$")


def lookup_problems(tool: Tool) -> list[tuple[str, str]]:
    """Ids a user cannot know must be obtainable (ToolAlpaca's rule for generated APIs): a
    function that requires one needs another function whose result holds it, such as a search
    or list function."""
    problems: list[tuple[str, str]] = []
    for fn in tool.functions:
        for name in fn.parameters.get("required", []):
            if not _ID_PARAMETER.search(name):
                continue
            wanted = {name.casefold(), "id"}
            if not any(wanted & _property_names(other.returns) for other in tool.functions if other is not fn):
                problems.append((
                    "tool_id_without_lookup",
                    f"{tool.name}.{fn.name}: requires {name!r}, but no other function (a search or list) returns it",
                ))
    return problems


def _property_names(schema: object) -> set[str]:
    if isinstance(schema, list):
        return set().union(*(_property_names(item) for item in schema)) if schema else set()
    if not isinstance(schema, dict):
        return set()
    names = {key.casefold() for key in schema.get("properties") or {}} if isinstance(schema.get("properties"), dict) else set()
    for value in schema.values():
        if isinstance(value, (dict, list)):
            names |= _property_names(value)
    return names
