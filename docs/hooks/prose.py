"""Text helpers shared by the reference generators: docstrings and help texts become Markdown."""

from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Any

import annotated_types


_ROLE = re.compile(r":[a-z]+:`~?(?:[\w.]+\.)?([\w]+)`")


def paragraphs(text: str | None) -> list[str]:
    """The paragraphs of a docstring or help text, each on one line (hard wraps joined); a Sphinx
    cross-reference (``:class:`~pkg.Name` ``) becomes the name as code."""
    cleaned = _ROLE.sub(r"`\1`", inspect.cleandoc(text or ""))
    return [" ".join(block.split()) for block in re.split(r"\n\s*\n", cleaned) if block.strip()]


def first_paragraph(text: str | None) -> str:
    """The docstring's summary: its first paragraph, on one line."""
    found = paragraphs(text)
    return found[0] if found else ""


def code(value: Any) -> str:
    """`value` as inline code, wide enough for values that hold backticks."""
    text = str(value)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def type_text(annotation: Any) -> str:
    """A type annotation in words a config author reads: `integer`, `one of "a", "b"`, `list of …`."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is typing.Literal:
        return "one of " + ", ".join(code(arg) for arg in args)
    if origin is typing.Annotated:  # a string whose values are listed where it is declared (config.recipes.Choices)
        choices = next((item.values() for item in args[1:] if callable(getattr(item, "values", None))), None)
        return "one of " + ", ".join(code(value) for value in choices) if choices is not None else type_text(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_text(arg) for arg in args)
    if origin is list:
        return f"list of {type_text(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {type_text(args[0])} to {type_text(args[1])}" if args else "mapping"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if annotation in names:
        return names[annotation]
    return getattr(annotation, "__name__", str(annotation))


_BOUNDS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "at least", "max_length": "at most"}


def bounds_text(metadata: list[Any]) -> str:
    """The constraints pydantic keeps in a field's metadata, e.g. `≥ 1, ≤ 1024`."""
    parts = []
    for item in metadata:
        for name, word in _BOUNDS.items():
            value = getattr(item, name, None)
            if value is not None and isinstance(item, annotated_types.BaseMetadata):
                suffix = " items" if name.endswith("length") else ""
                parts.append(f"{word} {_number(value)}{suffix}")
    return ", ".join(parts)


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
