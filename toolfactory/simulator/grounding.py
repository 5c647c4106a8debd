"""Dependent calls: arguments taken from what earlier tool calls returned.

A model that searched flights and got `{"flights": [{"flight_id": "AF123", ...}]}` back books
with `flight_id="AF123"`, not with an invented id. The simulator does the same, generically:
every key of every JSON object in the conversation's tool results (nested objects and lists
included) offers its value to a top-level parameter of the same name (names compared as
identifier words, so `flightId` matches `flight_id`). A value is taken only if the arguments
still validate against the function's parameters schema with it, so grounding never breaks a
call. Values are tried latest result first, then in document order; a value this function was
already called with for that parameter is tried last, so repeated calls move on to the next
item of a list.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

from .schema_instance import is_valid_instance
from .seeding import canonical_json
from .text import identifier_words, message_text

MAX_DEPTH = 8  # nesting levels searched in one tool result
MAX_VALUES_PER_KEY = 32  # candidate values kept (and validated at most) per key

ResultValues = dict[str, list[Any]]


def parameter_key(name: str) -> str:
    """A parameter or result key as identifier words (`flightId` and `flight_id` are one)."""
    return "_".join(identifier_words(name))


def _pairs(data: Any, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(key, value) of every object in `data`: an object's own keys before nested ones."""
    if depth > MAX_DEPTH:
        return
    if isinstance(data, dict):
        for key, value in data.items():
            yield str(key), value
        for value in data.values():
            yield from _pairs(value, depth + 1)
    elif isinstance(data, list):
        for item in data:
            yield from _pairs(item, depth + 1)


def result_values(messages: list[dict[str, Any]]) -> ResultValues:
    """Values found in the conversation's tool results by normalised key, latest result first."""
    values: ResultValues = {}
    seen: set[tuple[str, str]] = set()
    for message in reversed(messages):
        if message.get("role") not in ("tool", "function"):
            continue
        try:
            data = json.loads(message_text(message.get("content")))
        except ValueError:
            continue
        for key, value in _pairs(data):
            normal = parameter_key(key)
            mark = (normal, canonical_json(value))
            found = values.setdefault(normal, []) if normal else []
            if normal and mark not in seen and len(found) < MAX_VALUES_PER_KEY:
                seen.add(mark)
                found.append(value)
    return {key: found for key, found in values.items() if found}


def groundable(properties: dict[str, Any], values: ResultValues) -> int:
    """How many of these parameters have a same-named value in the tool results."""
    return sum(1 for name in properties if values.get(parameter_key(str(name))))


def ground_arguments(
    arguments: dict[str, Any],
    parameters: dict[str, Any],
    values: ResultValues,
    used: dict[str, list[Any]] | None = None,
    *,
    distinct: bool = False,
) -> list[str]:
    """Set top-level arguments to same-named tool-result values, in place; the names set.

    `arguments` must already validate against `parameters` (otherwise nothing is changed, as
    no value could be shown to keep them valid). `used` maps a parameter to the values earlier
    calls of this function passed for it; those are tried last. With `distinct`, so is a value
    this call already gave another parameter ("from Paris to Berlin": origin and destination).
    """
    props = parameters.get("properties")
    if not values or not isinstance(props, dict) or not is_valid_instance(parameters, arguments):
        return []
    grounded: list[str] = []
    placed: set[str] = set()
    for name in props:
        candidates = values.get(parameter_key(str(name)))
        if not candidates:
            continue
        taken = {canonical_json(value) for value in (used or {}).get(name, [])}

        def lateness(value: Any) -> tuple[bool, bool]:
            mark = canonical_json(value)
            return mark in taken, distinct and mark in placed

        ordered = sorted(candidates, key=lateness)
        missing = name not in arguments
        original = arguments.get(name)
        for candidate in ordered:
            arguments[name] = copy.deepcopy(candidate)
            if is_valid_instance(parameters, arguments):
                grounded.append(name)
                placed.add(canonical_json(candidate))
                break
        else:
            if missing:
                del arguments[name]
            else:
                arguments[name] = original
    return grounded
