"""The json call format: a JSON list of ``{"name": ..., "arguments": {...}}`` on one line.

The shape many open function-calling models emit (and the verifier's text-call detector knows).
A single call object without the enclosing list is accepted when parsing, because models write
it; ``"arguments"`` is required (``{}`` for none), and no other key is allowed, so that a typo
such as ``"argument"`` is reported instead of silently dropping the arguments.
"""

from __future__ import annotations

import json
from typing import Any

from toolfactory.render import trailing
from toolfactory.render.errors import CallFormatError
from toolfactory.render.parsed import ParsedCall, json_kind, json_problem, json_value

NAME = "json"
KEYS = ("name", "arguments")


def render(calls: list[ParsedCall]) -> str:
    return json.dumps([{"name": c.name, "arguments": c.arguments} for c in calls], ensure_ascii=False)


def _call(item: Any, index: int) -> ParsedCall:
    if not isinstance(item, dict):
        raise CallFormatError(NAME, f"call {index} must be an object with {' and '.join(KEYS)}, not {json_kind(item)}")
    unknown = sorted(set(item) - set(KEYS))
    if unknown:
        raise CallFormatError(NAME, f"call {index} has unexpected key(s) {', '.join(map(repr, unknown))} (allowed: {', '.join(KEYS)})")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise CallFormatError(NAME, f"call {index} needs a non-empty string 'name'")
    if "arguments" not in item:
        raise CallFormatError(NAME, f"call {index} ({name}) has no 'arguments' (write {{}} for none)")
    arguments = item["arguments"]
    if not isinstance(arguments, dict):
        raise CallFormatError(NAME, f"call {index} ({name}): arguments must be an object, not {json_kind(arguments)}")
    problem = json_problem(arguments)
    if problem:
        raise CallFormatError(NAME, f"call {index} ({name}): {problem}")
    return ParsedCall(name, arguments)


def parse(text: str) -> list[ParsedCall]:
    value = json_value(text, NAME, "the call list", CallFormatError)
    items = value if isinstance(value, list) else [value]
    return [_call(item, i) for i, item in enumerate(items)]


def render_turn(content: str, calls_text: str) -> str:
    return trailing.join(content, calls_text)


def parse_turn(text: str) -> tuple[str | None, list[ParsedCall]]:
    return trailing.split(text, parse, ("[", "{"))
