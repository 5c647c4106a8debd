"""Labelled pairs for measuring the hallucination judge: grounded vs hallucinated argument values.

The grounded variant's user request states every argument value its calls use; the hallucinated
twin keeps that request but one call argument holds a value found nowhere in the conversation.
"""

from __future__ import annotations

import json
from typing import Any

from toolfactory.models import Dialogue

FABRICATED = "Quillhaven-7731"


def labelled_pair(dialogue: Dialogue) -> tuple[Dialogue, Dialogue] | None:
    """(grounded, hallucinated) variants of `dialogue`, or None without a string argument."""
    values: list[tuple[str, Any]] = []
    target: tuple[int, int, str] | None = None
    for i, message in enumerate(dialogue.messages):
        for j, call in enumerate(message.tool_calls or []):
            try:
                arguments = json.loads(call.arguments or "{}")
            except json.JSONDecodeError:
                continue
            for key, value in arguments.items() if isinstance(arguments, dict) else ():
                values.append((key, value))
                if target is None and isinstance(value, str) and value:
                    target = (i, j, key)
    if target is None:
        return None
    grounded = dialogue.model_copy(deep=True)
    user = next(m for m in grounded.messages if m.role == "user")
    stated = "; ".join(f"{key}: {json.dumps(value)}" for key, value in values)
    user.content = f"{user.content} Please use exactly these values: {stated}."
    hallucinated = grounded.model_copy(deep=True)
    i, j, key = target
    call = hallucinated.messages[i].tool_calls[j]  # type: ignore[index]
    arguments = json.loads(call.arguments)
    arguments[key] = FABRICATED
    call.arguments = json.dumps(arguments)
    return grounded, hallucinated
