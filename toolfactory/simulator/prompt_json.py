"""A JSON Schema written into the prompt, read as a model reads it.

Endpoints without structured output get the schema as prompt text (toolfactory's
``llm.structured_output: prompt`` / ``json_object``); a model then answers with an instance of
it. The simulator finds the schema the way a reader would: the first JSON object after the words
"JSON Schema" in the last user message that looks like a schema.
"""

from __future__ import annotations

import json
from typing import Any

from .text import message_text

_MARKER = "json schema"
_DECODER = json.JSONDecoder()
# What makes an object a schema at its top: a type, its properties, or a choice between schemas.
_SCHEMA_KEYWORDS = {"type", "properties", "oneOf", "anyOf", "allOf", "$ref", "enum", "const", "items"}


def schema_in_prompt(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    users = [m for m in messages if m.get("role") == "user"]
    if not users:
        return None
    text = message_text(users[-1].get("content"))
    at = text.lower().rfind(_MARKER)
    if at < 0:
        return None
    start = text.find("{", at)
    if start < 0:
        return None
    try:
        value = _DECODER.raw_decode(text, start)[0]
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) and _SCHEMA_KEYWORDS & value.keys() else None
