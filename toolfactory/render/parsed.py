"""A call as the text formats carry it, and the JSON checks every format shares.

Text formats have no call ids, and they write arguments as values, not as the raw argument text a
:class:`~toolfactory.models.ToolCall` keeps. :class:`ParsedCall` is therefore what a parser
returns and what two renderings of the same calls are compared by: a name and the arguments as a
parsed JSON object.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable

from toolfactory.errors import ToolfactoryError
from toolfactory.models import ToolCall
from toolfactory.render.errors import CallFormatError


@dataclass(frozen=True)
class ParsedCall:
    """One call without its id: the function name and its arguments as a JSON object."""

    name: str
    arguments: dict[str, Any]

    @classmethod
    def of(cls, call: ToolCall, fmt: str, index: int = 0) -> ParsedCall:
        """The call with its argument text parsed; raises :class:`CallFormatError` when the text
        is not a JSON object (an empty text means no arguments, as OpenAI clients send it)."""
        arguments = json_object(call.arguments or "{}", fmt, f"call {index} ({call.name}): arguments")
        return cls(call.name, arguments)

    def named(self, fmt: str, index: int) -> ParsedCall:
        """The call itself; a text format cannot write a call without a name."""
        if not self.name:
            raise CallFormatError(fmt, f"call {index} has an empty function name")
        return self

    def to_tool_call(self, call_id: str) -> ToolCall:
        return ToolCall(id=call_id, name=self.name, arguments=json.dumps(self.arguments, ensure_ascii=False))


def json_object(text: str, fmt: str, where: str) -> dict[str, Any]:
    """`text` parsed as a JSON object, or a :class:`CallFormatError` saying why it is not one."""
    value = json_value(text, fmt, where, CallFormatError)
    if not isinstance(value, dict):
        raise CallFormatError(fmt, f"{where} must be a JSON object, not {json_kind(value)}")
    problem = json_problem(value)  # 1e400 reads as an infinity, which no format writes back
    if problem:
        raise CallFormatError(fmt, f"{where}: {problem}")
    return value


class NonStandardNumber(ToolfactoryError, ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity`` in JSON text: Python's json reads them, no other JSON
    reader does (an OpenAI-compatible endpoint refuses them), and NaN != NaN. Also a number beyond
    a double's range (``1e400``): JSON's grammar allows it, but Python reads it as an infinity,
    which no JSON writer can write back."""

    def __init__(self, name: str, problem: str = "is not a JSON number") -> None:
        super().__init__(f"{name} {problem}")
        self.name = name
        self.problem = problem


class DuplicateKeys(ToolfactoryError, ValueError):
    """An object of JSON text names a key twice (RFC 8259 leaves its meaning to each reader)."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__(f"duplicate keys {keys}")
        self.keys = keys


def _reject_constant(name: str) -> Any:
    raise NonStandardNumber(name)


def finite_float(text: str) -> float:
    """A JSON number's text as a float; :class:`NonStandardNumber` when no double holds it."""
    value = float(text)
    if math.isinf(value):
        raise NonStandardNumber(text, "is not a finite number")
    return value


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) < len(pairs):
        seen: set[str] = set()
        raise DuplicateKeys(sorted({key for key, _ in pairs if key in seen or seen.add(key)}))  # type: ignore[func-returns-value]
    return value


# One decoder each, built once: json.loads(text, **options) builds a new decoder per call, which
# costs more than parsing a short text.
_STANDARD = json.JSONDecoder(parse_constant=_reject_constant, parse_float=finite_float)
_UNIQUE = json.JSONDecoder(parse_constant=_reject_constant, parse_float=finite_float, object_pairs_hook=_unique_object)


def standard_json(text: str, unique_keys: bool = False) -> Any:
    """`text` parsed as standard JSON: :class:`NonStandardNumber` for NaN, Infinity or a number
    beyond a double's range and, with
    `unique_keys`, :class:`DuplicateKeys` for an object naming a key twice (both ValueErrors);
    otherwise what :func:`json.loads` raises (``JSONDecodeError``, ``RecursionError``, and a
    ``ValueError`` for an integer longer than Python converts)."""
    return (_UNIQUE if unique_keys else _STANDARD).decode(text)


def json_value(text: str, fmt: str, where: str, error: Callable[[str, str], Exception]) -> Any:
    """`text` parsed as standard JSON; any failure becomes `error(fmt, reason)`."""
    try:
        return standard_json(text)
    except NonStandardNumber as exc:
        raise error(fmt, f"{where} is not JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise error(fmt, f"{where} is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise error(fmt, f"{where} is nested too deeply") from None


def json_kind(value: Any) -> str:
    """The JSON name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def json_problem(value: Any, path: str = "") -> str | None:
    """Why `value` is not a JSON value (with the path of the first offending part), or None.

    Parsers of Python literals and YAML can produce values JSON cannot hold (tuples, sets, dates,
    non-string keys, infinities); canonical records must stay JSON."""
    if value is None or isinstance(value, (bool, int, str)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} at {path or 'the top'} is not a finite number"
    if isinstance(value, list):
        for i, item in enumerate(value):
            problem = json_problem(item, f"{path}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"the key {key!r} at {path or 'the top'} is not a string"
            problem = json_problem(item, f"{path}[{key!r}]")
            if problem:
                return problem
        return None
    hint = " (use a list)" if isinstance(value, (tuple, set, frozenset)) else ""
    return f"{json_kind(value)} at {path or 'the top'} is not a JSON value{hint}"
