"""Turns whose calls come last: the json and python call formats.

A turn is written as its text (if any), a line break, then the call list on the last line, which
is how ToolACE's data puts a python call list after the assistant's words. Reading a turn back
looks for the call list from the end: the last line that starts a call list the format's strict
parser accepts. Rendered call lists are one line, so the split is exact for rendered turns; for a
model's own output a call list spread over several lines is still found. A last line that does
not parse is text, not an error: a final answer may well end with "[see the docs](…)".
"""

from __future__ import annotations

from typing import Callable

from toolfactory.render.errors import CallFormatError
from toolfactory.render.parsed import ParsedCall

Parser = Callable[[str], list[ParsedCall]]


def join(content: str, calls_text: str) -> str:
    return f"{content}\n{calls_text}"


def split(text: str, parse: Parser, openers: tuple[str, ...]) -> tuple[str | None, list[ParsedCall]]:
    """(content, calls) of a turn; calls are [] when no trailing call list parses."""
    starts = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]
    for start in reversed(starts):
        if not text[start:].lstrip(" \t").startswith(openers):
            continue
        try:
            calls = parse(text[start:])
        except CallFormatError:
            continue
        if calls:
            content = text[: max(start - 1, 0)]  # drop the line break that join() put there
            return content or None, calls
    return text or None, []
