"""Depth and size limits of one record: a per-record rejection, never a crash (APIGen's format
check, first of its three stages: a record must be well-formed before its content is judged).

Python's JSON parser and jsonschema recurse once per nesting level, so a record nested about
1,000 levels deep raises ``RecursionError`` and used to end a whole verify run (or shard). The
rule layer first measures each record without recursion: the nesting of the tool schemas, of the
call arguments and of JSON tool responses (counted over the text's brackets, outside strings), and
its size (the characters of its message texts, arguments and tool definitions as JSON). A record
over a limit gets one verdict, ``record_too_deep`` or ``record_too_large``, and no other rule
looks at it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from toolfactory.models import Dialogue, Verdict

if TYPE_CHECKING:
    from toolfactory.stages.verify.rules.function_facts import FunctionFacts

TOO_DEEP = "record_too_deep"
TOO_LARGE = "record_too_large"
CODES = (TOO_DEEP, TOO_LARGE)

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


@dataclass(frozen=True)
class Limits:
    """The largest record the rule layer judges."""

    max_depth: int = 64
    """Deepest nesting of objects and arrays in a schema, call arguments or a JSON tool response."""
    max_chars: int = 2_000_000
    """Most characters of message texts, call arguments and tool definitions (as JSON) together."""


DEFAULT = Limits()


def value_depth(value: Any) -> int:
    """Nesting depth of a JSON value (a scalar is 0, ``[]`` is 1), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
            deepest = max(deepest, depth + 1)
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
            deepest = max(deepest, depth + 1)
    return deepest


def text_depth(text: str, limit: int) -> int:
    """Bracket nesting of JSON text (brackets inside strings do not count); texts with fewer
    brackets than `limit` are not scanned (they cannot be deeper)."""
    if text.count("[") + text.count("{") <= limit:
        return 0
    depth = deepest = 0
    for bracket in _BRACKET.findall(_STRING.sub("", text)):
        depth = depth + 1 if bracket in "[{" else depth - 1
        deepest = max(deepest, depth)
    return deepest


def violation(dialogue: Dialogue, limits: Limits = DEFAULT, facts: Sequence[FunctionFacts] | None = None) -> Verdict | None:
    """The verdict of the first limit `dialogue` exceeds, or None; `facts`: those of its tools."""
    size = 0
    if facts is None:
        # Imported here: the rules import this module (its limits), and importing this module
        # must not need them.
        from toolfactory.stages.verify.rules.function_facts import facts_of

        facts = [facts_of(fn) for fn in dialogue.tools]
    for i, fn_facts in enumerate(facts):
        size += fn_facts.chars
        # The bracket count bounds the depth, so a schema is walked only when it could be too deep.
        if fn_facts.brackets > limits.max_depth:
            fn = fn_facts.function
            for label, schema in (("parameters", fn.parameters), ("returns", fn.returns)):
                if value_depth(schema) > limits.max_depth:
                    return _verdict(TOO_DEEP, f"tools[{i}].{label}", f"schema nested deeper than {limits.max_depth} levels")
    for i, message in enumerate(dialogue.messages):
        size += len(message.content or "") + len(message.reasoning or "")
        if message.role == "tool" and message.content and text_depth(message.content, limits.max_depth) > limits.max_depth:
            return _verdict(TOO_DEEP, f"messages[{i}].content", f"JSON nested deeper than {limits.max_depth} levels")
        for j, call in enumerate(message.tool_calls or []):
            size += len(call.arguments)
            if text_depth(call.arguments, limits.max_depth) > limits.max_depth:
                return _verdict(TOO_DEEP, f"messages[{i}].tool_calls[{j}].arguments",
                                f"arguments nested deeper than {limits.max_depth} levels")
    if size > limits.max_chars:
        return _verdict(TOO_LARGE, "", f"{size} characters (at most {limits.max_chars})")
    return None


def _verdict(code: str, path: str, message: str) -> Verdict:
    return Verdict(code=code, passed=False, severity="error", message=message, path=path)
