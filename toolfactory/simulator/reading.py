"""Reading a conversation the way a model asked to classify it would.

A JSON answer whose schema offers a choice between what an assistant's turn does (options that
name asking, declining and answering) is a request to classify the last assistant turn quoted
in the prompt. A model answers it from the meaning of that turn; the simulator, which has no
model, reads the turn with a small lexicon: a request for information (a question, "tell me",
"let me know", "please provide") is asking, a statement that it cannot help is declining, and
anything else is an answer. Options are matched by their words, so any wording of the choice
that names the three acts is read.
"""

from __future__ import annotations

import re
from typing import Any

from .text import message_text

_TURN_LINE = re.compile(r"^\[assistant\]\s*(.+)$", re.MULTILINE | re.IGNORECASE)
_DECLINES = re.compile(r"\b(can't|cannot|can not|unable|none of|don't have|do not have|no function|not able)\b", re.IGNORECASE)
_ASKS = re.compile(r"\?|\b(which|what|could you|can you|tell me|let me know|please provide|please share|i need the)\b", re.IGNORECASE)
_ACTS = {"asks": ("ask", "question", "clarif", "missing"), "declines": ("declin", "refus", "cannot"), "answers": ("answer", "other")}


def turn_kind(text: str) -> str:
    """'declines', 'asks' or 'answers' for an assistant turn's text."""
    if _DECLINES.search(text):
        return "declines"
    return "asks" if _ASKS.search(text) else "answers"


def _option_for(kind: str, options: list[Any]) -> Any:
    for option in options:
        if isinstance(option, str) and any(stem in option.lower() for stem in _ACTS[kind]):
            return option
    return None


def read_choices(value: Any, schema: dict[str, Any] | None, messages: list[dict[str, Any]]) -> Any:
    """`value` with each top-level choice of what the quoted assistant turn does set by reading it."""
    if not isinstance(value, dict) or not isinstance(schema, dict):
        return value
    users = [m for m in messages if m.get("role") == "user"]
    quoted = _TURN_LINE.findall(message_text(users[-1].get("content"))) if users else []
    if not quoted:
        return value
    kind = turn_kind(quoted[-1])
    for name, prop in (schema.get("properties") or {}).items():
        options = prop.get("enum") if isinstance(prop, dict) else None
        if isinstance(options, list) and all(_option_for(k, options) is not None for k in _ACTS):
            value[name] = _option_for(kind, options)
    return value
