"""A user's answer to the assistant's question, as a model playing the user writes it.

A JSON answer that asks for the user's text (one free string, such as ``message`` or ``reply``)
about a conversation whose last quoted assistant turn asks for information (see
:mod:`.reading`) is a request to answer that question (ToolAlpaca Fig. 9: "specific and direct
answers", no placeholders). A model names the values asked for; the simulator, which has no
model, reads the nouns of the question it has realistic values for (a city, a date, a name,
an amount: :mod:`.lexicon`) and states one value for each, else one for the words of the
question, so the assistant has something concrete to act on.
"""

from __future__ import annotations

import random
import re
from typing import Any

from . import lexicon
from .text import message_text

_TURN_LINE = re.compile(r"^\[assistant\]\s*(.+)$", re.MULTILINE | re.IGNORECASE)
_WORD = re.compile(r"[a-z]+")
_MAX_VALUES = 3


def _asked_values(question: str, rng: random.Random, context: list[str]) -> list[str]:
    """'the <noun> is <value>' for each noun of the question a realistic value is known for."""
    stated: list[str] = []
    seen: set[str] = set()
    for word in _WORD.findall(question.lower()):
        if word in seen:
            continue
        seen.add(word)
        maker = lexicon.string_hint([word])
        if maker is not None:
            stated.append(f"the {word} is {maker(rng, context)}")
        if len(stated) == _MAX_VALUES:
            break
    return stated


def answer_question(value: Any, schema: dict[str, Any] | None, messages: list[dict[str, Any]], rng: random.Random,
                    context: list[str]) -> Any:
    """`value` with its free-text field set to an answer when the quoted assistant turn asks."""
    from .reading import turn_kind

    if not isinstance(value, dict) or not isinstance(schema, dict):
        return value
    users = [m for m in messages if m.get("role") == "user"]
    quoted = _TURN_LINE.findall(message_text(users[-1].get("content"))) if users else []
    if not quoted or turn_kind(quoted[-1]) != "asks":
        return value
    texts = [name for name, prop in (schema.get("properties") or {}).items()
             if isinstance(prop, dict) and prop.get("type") == "string" and "enum" not in prop]
    if len(texts) != 1:
        return value
    stated = _asked_values(quoted[-1], rng, context)
    if stated:
        answer = "; ".join(stated)
        value[texts[0]] = answer[0].upper() + answer[1:] + "."
    return value
