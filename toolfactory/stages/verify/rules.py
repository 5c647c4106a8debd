"""Deterministic rules of the verify stage (ToolACE §3.1 rule layer, ToolAlpaca §4.1 filters).

Each rule is a small function registered under a stable code; it returns one failed
:class:`Verdict` per problem it finds, with a message and the path of the offending part, and
nothing when the record passes. A record's verdict lists every failed rule, not only the first.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Callable, Iterator

from jsonschema import Draft202012Validator

from toolfactory.models import Dialogue, Verdict, canonical_json

Rule = Callable[[Dialogue], Iterator[Verdict]]
RULES: dict[str, Rule] = {}


def rule(code: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        RULES[code] = fn
        return fn

    return register


@lru_cache(maxsize=4096)
def _validator(schema_json: str) -> Draft202012Validator:
    # Compiled once per distinct schema and reused across records.
    return Draft202012Validator(json.loads(schema_json), format_checker=Draft202012Validator.FORMAT_CHECKER)


def _calls(dialogue: Dialogue) -> Iterator[tuple[str, str, str]]:
    """(path, name, arguments) of every tool call."""
    for i, message in enumerate(dialogue.messages):
        for j, call in enumerate(message.tool_calls or []):
            yield f"messages[{i}].tool_calls[{j}]", call.name, call.arguments


def _fail(code: str, path: str, message: str) -> Verdict:
    return Verdict(code=code, passed=False, message=message, path=path)


@rule("call_unknown_function")
def unknown_function(dialogue: Dialogue) -> Iterator[Verdict]:
    names = {fn.name for fn in dialogue.tools}
    for path, name, _ in _calls(dialogue):
        if name not in names:
            yield _fail("call_unknown_function", path, f"function {name!r} is not in the tool list")


@rule("call_arguments_not_json")
def arguments_not_json(dialogue: Dialogue) -> Iterator[Verdict]:
    for path, _, arguments in _calls(dialogue):
        try:
            value = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            yield _fail("call_arguments_not_json", path, f"arguments are not JSON: {exc.msg}")
            continue
        if not isinstance(value, dict):
            yield _fail("call_arguments_not_json", path, "arguments must be a JSON object")


def _argument_errors(dialogue: Dialogue) -> Iterator[tuple[str, str, str]]:
    """(path, validator keyword, message) for each schema violation of each parseable call."""
    functions = {fn.name: fn for fn in dialogue.tools}
    for path, name, arguments in _calls(dialogue):
        function = functions.get(name)
        try:
            values = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            continue
        if function is None or not isinstance(values, dict):
            continue
        for error in _validator(canonical_json(function.parameters)).iter_errors(values):
            where = "/".join(str(p) for p in error.absolute_path)
            yield f"{path}.arguments/{where}".rstrip("/"), str(error.validator), error.message


@rule("call_missing_required")
def missing_required(dialogue: Dialogue) -> Iterator[Verdict]:
    for path, keyword, message in _argument_errors(dialogue):
        if keyword == "required":
            yield _fail("call_missing_required", path, message)


@rule("call_argument_invalid")
def argument_invalid(dialogue: Dialogue) -> Iterator[Verdict]:
    """Types (a bool is no integer; an integer is a number), enums, patterns, formats, bounds…"""
    for path, keyword, message in _argument_errors(dialogue):
        if keyword != "required":
            yield _fail("call_argument_invalid", path, f"{keyword}: {message}")


@rule("dialogue_no_function_call")
def no_function_call(dialogue: Dialogue) -> Iterator[Verdict]:
    if dialogue.mode != "non_tool" and not any(True for _ in _calls(dialogue)):
        yield _fail("dialogue_no_function_call", "messages", f"mode {dialogue.mode!r} needs a function call")


@rule("dialogue_no_final_answer")
def no_final_answer(dialogue: Dialogue) -> Iterator[Verdict]:
    last = dialogue.messages[-1] if dialogue.messages else None
    if last is None or last.role != "assistant" or last.tool_calls or not (last.content or "").strip():
        yield _fail("dialogue_no_final_answer", f"messages[{len(dialogue.messages) - 1}]", "no final assistant answer")


@rule("sample_unanswered_call")
def unanswered_call(dialogue: Dialogue) -> Iterator[Verdict]:
    """Each call is answered by exactly one tool message after it, with the call's id and name."""
    pending: dict[str, tuple[str, str]] = {}
    for i, message in enumerate(dialogue.messages):
        for j, call in enumerate(message.tool_calls or []):
            pending[call.id] = (f"messages[{i}].tool_calls[{j}]", call.name)
        if message.role == "tool":
            expected = pending.pop(message.tool_call_id or "", None)
            if expected is None:
                yield _fail("sample_unanswered_call", f"messages[{i}]", f"tool response to unknown call id {message.tool_call_id!r}")
            elif message.name and message.name != expected[1]:
                yield _fail("sample_unanswered_call", f"messages[{i}]", f"response names {message.name!r}, call was {expected[1]!r}")
    for call_path, name in pending.values():
        yield _fail("sample_unanswered_call", call_path, f"call to {name!r} has no tool response")


def check(dialogue: Dialogue, disabled: frozenset[str] = frozenset()) -> list[Verdict]:
    """Every failed verdict of every enabled rule."""
    return [verdict for code, fn in RULES.items() if code not in disabled for verdict in fn(dialogue)]
