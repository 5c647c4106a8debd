"""The python call format of ToolACE's data: ``[get_weather(city="Paris", days=3), f2(a=1)]``.

Arguments are keyword arguments whose values are Python literals (strings, numbers, True, False,
None, lists and dicts). Text is read with :mod:`ast` and :func:`ast.literal_eval`, which build
values from literal syntax only: nothing the model wrote is ever executed.

What the format cannot say raises :class:`CallFormatError` when rendering: a function name that
is not a (dotted) Python identifier (ToolAlpaca's ``[Optional]updateUserProfile``), and
non-finite numbers. Argument names that are not identifiers (``from``, ``class``, ``my-key``)
are written as one ``**{"from": "EUR", "to": "USD"}`` mapping, which keeps their order and is
still a literal. Parsing rejects what JSON cannot hold (tuples, sets, non-string keys), positional
arguments and repeated argument names, each with the call and argument it concerns.
"""

from __future__ import annotations

import ast
import json
import keyword
from typing import Any

from toolfactory.render import trailing
from toolfactory.render.errors import CallFormatError
from toolfactory.render.parsed import ParsedCall, json_problem

NAME = "python"


def is_identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def _literal(value: Any, where: str) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        problem = json_problem(value)
        if problem:
            raise CallFormatError(NAME, f"{where}: {problem}")
        return repr(value)
    if isinstance(value, str):
        # A JSON string literal is a valid Python string literal with the same value (JSON's
        # escapes are a subset of Python's), and reads as people expect: double quotes.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(item, where) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {_literal(v, where)}" for k, v in value.items()) + "}"
    raise CallFormatError(NAME, f"{where}: {type(value).__name__} is not a JSON value")


def _render_call(call: ParsedCall, index: int) -> str:
    where = f"call {index} ({call.name})"
    if not call.name or not all(is_identifier(part) for part in call.name.split(".")):
        raise CallFormatError(NAME, f"{where}: the function name is not a Python identifier, so it cannot be written as a call")
    if all(is_identifier(key) for key in call.arguments):
        arguments = ", ".join(f"{key}={_literal(value, f'{where}, argument {key!r}')}" for key, value in call.arguments.items())
    else:
        arguments = "**" + _literal(call.arguments, where)
    return f"{call.name}({arguments})"


def render(calls: list[ParsedCall]) -> str:
    return "[" + ", ".join(_render_call(call, i) for i, call in enumerate(calls)) + "]"


def _callee(node: ast.expr, where: str) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_callee(node.value, where)}.{node.attr}"
    raise CallFormatError(NAME, f"{where}: the callee must be a function name, not {ast.unparse(node)!r}")


def _value(node: ast.expr, where: str) -> Any:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise CallFormatError(NAME, f"{where} is not a literal value: {ast.unparse(node)[:80]}") from None
    problem = json_problem(value)
    if problem:
        raise CallFormatError(NAME, f"{where}: {problem}")
    return value


def _parse_call(node: ast.expr, index: int) -> ParsedCall:
    if not isinstance(node, ast.Call):
        raise CallFormatError(NAME, f"item {index} is not a call: {ast.unparse(node)[:80]}")
    name = _callee(node.func, f"call {index}")
    where = f"call {index} ({name})"
    if node.args:
        raise CallFormatError(NAME, f"{where} has a positional argument ({ast.unparse(node.args[0])[:40]}); write name=value")
    arguments: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:  # **{"from": "EUR"}
            mapping = _value(kw.value, f"{where}, **{ast.unparse(kw.value)[:40]}")
            if not isinstance(mapping, dict):
                raise CallFormatError(NAME, f"{where}: ** must be followed by a dict literal")
            items = list(mapping.items())
        else:
            items = [(kw.arg, _value(kw.value, f"{where}, argument {kw.arg!r}"))]
        for key, value in items:
            if key in arguments:
                raise CallFormatError(NAME, f"{where}: argument {key!r} is given twice")
            arguments[key] = value
    return ParsedCall(name, arguments)


def parse(text: str) -> list[ParsedCall]:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise CallFormatError(NAME, f"not a Python call list: {exc.msg} (line {exc.lineno}, column {exc.offset})") from None
    except (ValueError, MemoryError, RecursionError) as exc:  # null bytes; absurd nesting
        raise CallFormatError(NAME, f"not a Python call list: {exc}") from None
    body = tree.body
    if isinstance(body, ast.Call):  # a lone call without brackets, as models sometimes write it
        return [_parse_call(body, 0)]
    if not isinstance(body, ast.List):
        raise CallFormatError(NAME, f"expected a list of calls such as [f(a=1)], not {ast.unparse(body)[:80]!r}")
    return [_parse_call(node, i) for i, node in enumerate(body.elts)]


def render_turn(content: str, calls_text: str) -> str:
    return trailing.join(content, calls_text)


def parse_turn(text: str) -> tuple[str | None, list[ParsedCall]]:
    return trailing.split(text, parse, ("[",))
