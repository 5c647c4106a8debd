"""Function-call executability (ToolACE Table 6): is each call one the offered API would accept?

Checked without executing anything: the called name is among the offered functions, the
arguments are a JSON object, and that object validates against the function's ``parameters``
schema (JSON Schema 2020-12, formats checked with ``Draft202012Validator.FORMAT_CHECKER``).
Each schema violation is mapped by its jsonschema keyword (``error.validator``) to one code, so
one fault gives one code; nested objects and arrays are validated by the same schema and the
reported path is the deepest one (for ``anyOf``/``oneOf`` the best-matching branch's error).

Undeclared arguments (``call_unknown_argument``) are errors wherever the object schema does not
opt in to extra keys (:mod:`.arguments_schema`, which also compiles each schema once). A valid
call is recognised by a compiled test and skips the explaining validator (:mod:`.fast_schema`).

A call to a name the tool list lacks is ``call_unknown_function``, unless the recipe's agent has
it built in (:attr:`~toolfactory.stages.verify.policy.Policy.builtin_functions` of the dialogue's
recipe or of the policy applied: ToolAlpaca's ``getDetails``, whose arguments no schema describes);
when one offered function is
obviously meant (:meth:`~toolfactory.stages.verify.rules.registry.Sample.candidate`), the message
names it and the call's arguments are still checked against its schema, so a wrong name does not
hide wrong arguments.

A schema that cannot be evaluated (an unknown type name, an invalid regex) makes the call
unverifiable: ``call_argument_invalid`` with the exception in the message.

Arguments are standard JSON: ``NaN`` / ``Infinity`` / ``1e400`` make them ``call_arguments_not_json``, and a key
named twice in one object is ``call_duplicate_argument`` (an error: readers disagree on which
value counts, and I-JSON, RFC 7493, forbids it).
"""

from __future__ import annotations

import re
from typing import Iterator

from jsonschema.exceptions import ValidationError, best_match

from toolfactory.stages.verify.rules.arguments_schema import ArgumentsSchema
from toolfactory.stages.verify.rules.registry import NOT_JSON, Call, Finding, Sample, rule

RANGE_KEYWORDS = frozenset({
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
})

KEYWORD_CODES: dict[str, str] = {
    "required": "call_missing_required",
    "dependentRequired": "call_missing_required",
    "additionalProperties": "call_unknown_argument",
    "unevaluatedProperties": "call_unknown_argument",
    "type": "call_argument_type",
    "enum": "call_argument_enum",
    "const": "call_argument_enum",
    "pattern": "call_argument_pattern",
    "format": "call_argument_format",
    **{keyword: "call_argument_range" for keyword in RANGE_KEYWORDS},
}
OTHER_CODE = "call_argument_invalid"  # every other keyword: uniqueItems, anyOf/oneOf without a branch error, not, contains, ...

MESSAGE_LIMIT = 200

def _short(text: str) -> str:
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def _undeclared(error: ValidationError) -> list[str]:
    schema = error.schema if isinstance(error.schema, dict) else {}
    declared = schema.get("properties") or {}
    patterns = list((schema.get("patternProperties") or {}).keys())
    instance = error.instance if isinstance(error.instance, dict) else {}
    return [key for key in instance if key not in declared and not any(re.search(p, key) for p in patterns)]


def _missing(error: ValidationError) -> list[str]:
    instance = error.instance if isinstance(error.instance, dict) else {}
    if error.validator == "required":
        return [name for name in error.validator_value if name not in instance]
    return [dep for name, deps in (error.validator_value or {}).items() if name in instance for dep in deps if dep not in instance]


def _call_findings(call: Call, schema: ArgumentsSchema) -> Iterator[tuple[str, str, str]]:
    """(code, path, message) for each schema violation of one call's arguments."""
    if schema.passes(call.value):
        return
    base = f"{call.path}.arguments"
    validator = schema.validator  # a schema it cannot be built from fails the rule (record_check_error)
    try:
        found = list(validator.iter_errors(call.value))
    except Exception as exc:  # noqa: BLE001 - a broken schema makes the call unverifiable
        yield OTHER_CODE, base, _short(f"the parameters schema cannot be applied: {type(exc).__name__}: {exc}")
        return
    reported: set[tuple[str, str]] = set()  # (keyword, path) of missing-argument errors already reported
    for error in found:
        if error.context:
            error = best_match([error])  # descends into anyOf/oneOf to the deepest, most relevant error
        keyword = str(error.validator)
        code = KEYWORD_CODES.get(keyword, OTHER_CODE)
        where = base + "".join(f"/{part}" for part in error.absolute_path)
        if code == "call_missing_required":
            names = _missing(error)
            if (keyword, where) in reported:
                continue  # jsonschema yields one error per missing name; all are reported at once
            reported.add((keyword, where))
            for name in names:
                yield code, f"{where}/{name}", f"required argument {name!r} is missing"
            if not names:
                yield code, where, _short(f"{keyword}: {error.message}")
        elif code == "call_unknown_argument":
            # additionalProperties: one finding per undeclared name; unevaluatedProperties (whose
            # declared names may sit in subschemas): jsonschema's message names them.
            names = _undeclared(error) if keyword == "additionalProperties" else []
            for name in names:
                yield code, f"{where}/{name}", f"argument {name!r} is not declared in the function's parameters"
            if not names:
                yield code, where, _short(f"{keyword}: {error.message}")
        else:
            yield code, where, _short(f"{keyword}: {error.message}")


def _schema_findings(sample: Sample) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for call in sample.calls:
        if call.name in sample.builtin_functions and call.name not in sample.functions:
            continue  # the agent's own action: no offered schema describes its arguments
        function = sample.functions.get(call.name) or sample.candidate(call.name)
        if function is None or not isinstance(call.value, dict):
            continue  # reported by call_unknown_function / call_arguments_not_json
        for code, path, message in _call_findings(call, sample.facts_for(function).arguments):
            out.setdefault(code, []).append((path, message))
    return out


def _schema(sample: Sample, code: str) -> list[Finding]:
    return sample.memo("schema_findings", _schema_findings).get(code, [])


@rule("call_unknown_function")
def unknown_function(sample: Sample) -> Iterator[Finding]:
    """The called function is not in the dialogue's tool list."""
    if not sample.functions:
        return  # no tool list at all: dialogue_missing_field, not one fault per call
    for call in sample.calls:
        if call.name not in sample.functions and call.name not in sample.builtin_functions:
            meant = sample.candidate(call.name)
            hint = f" (the arguments were checked against {meant.name!r}, the obvious candidate)" if meant else " (no offered function is an obvious candidate)"
            yield call.path + ".name", f"function {call.name!r} is not in the tool list{hint}"


@rule("call_arguments_not_json")
def arguments_not_json(sample: Sample) -> Iterator[Finding]:
    """The arguments are not a JSON object."""
    for call in sample.calls:
        if call.value is NOT_JSON:
            yield call.path + ".arguments", f"arguments are not JSON: {call.parse_error}"
        elif not isinstance(call.value, dict):
            yield call.path + ".arguments", f"arguments must be a JSON object, not {type(call.value).__name__}"


@rule("call_duplicate_argument")
def duplicate_argument(sample: Sample) -> Iterator[Finding]:
    """An object of the arguments names a key twice (which value counts depends on the reader)."""
    for call in sample.calls:
        if call.duplicate_keys:
            names = ", ".join(repr(key) for key in call.duplicate_keys)
            yield call.path + ".arguments", f"key(s) {names} named twice in one object: readers keep the first or the last value"


@rule("call_missing_required")
def missing_required(sample: Sample) -> list[Finding]:
    """A required argument (``required``, ``dependentRequired``) is missing, at any depth."""
    return _schema(sample, "call_missing_required")


@rule("call_unknown_argument")
def unknown_argument(sample: Sample) -> list[Finding]:
    """An argument is not declared in the schema's ``properties`` (see the module doc)."""
    return _schema(sample, "call_unknown_argument")


@rule("call_argument_type")
def argument_type(sample: Sample) -> list[Finding]:
    """An argument has the wrong JSON type (a bool is no integer/number; an integer is a number)."""
    return _schema(sample, "call_argument_type")


@rule("call_argument_enum")
def argument_enum(sample: Sample) -> list[Finding]:
    """An argument is not one of its ``enum`` values (or not its ``const``)."""
    return _schema(sample, "call_argument_enum")


@rule("call_argument_pattern")
def argument_pattern(sample: Sample) -> list[Finding]:
    """A string argument does not match its ``pattern``."""
    return _schema(sample, "call_argument_pattern")


@rule("call_argument_format")
def argument_format(sample: Sample) -> list[Finding]:
    """A string argument is not of its ``format`` (date, date-time, time, email, uuid, ipv4, ...)."""
    return _schema(sample, "call_argument_format")


@rule("call_argument_range")
def argument_range(sample: Sample) -> list[Finding]:
    """A bound is violated: minimum/maximum/exclusive*/multipleOf, min/maxLength, min/maxItems, min/maxProperties."""
    return _schema(sample, "call_argument_range")


@rule("call_argument_invalid")
def argument_invalid(sample: Sample) -> list[Finding]:
    """Any other schema violation (uniqueItems, not, contains, a oneOf matching twice, ...)."""
    return _schema(sample, OTHER_CODE)
