"""The errors of format generalization, drawn once::

    RenderError (ValueError)   a value cannot be written in, or read back from, a format
    ├── ToolFormatError         tool descriptions (json, yaml, xml, markdown, natural)
    └── CallFormatError         tool calls, assistant turns and rendered dialogues

Every error names the format and says what is wrong and where ("call 1 (get_weather): argument
'days' is not a literal: x + 1"), because its usual reader is someone looking at a model's
malformed output. An unknown format *name* is a programming error, not a data error: it raises a
plain :class:`ValueError` listing the known names, so catching :class:`RenderError` never hides it.
"""

from __future__ import annotations

from typing import Iterable

from toolfactory.errors import ToolfactoryError


class RenderError(ToolfactoryError, ValueError):
    """A value cannot be rendered in `fmt`, or a text cannot be parsed as `fmt`."""

    def __init__(self, fmt: str, reason: str) -> None:
        super().__init__(f"{fmt}: {reason}")
        self.format = fmt
        self.reason = reason


class ToolFormatError(RenderError):
    """Tool descriptions that cannot be rendered or parsed in a tool-description format."""


class CallFormatError(RenderError):
    """Calls (or a turn, or a dialogue) that cannot be rendered or parsed in a call format."""


def unknown_format(kind: str, name: str, known: Iterable[str]) -> ValueError:
    """The error for a format name nobody registered."""
    return ValueError(f"unknown {kind} format {name!r} (formats: {', '.join(known)})")
