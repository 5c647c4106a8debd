"""A JSON Schema written into the prompt, read as a model reads it.

Endpoints without structured output get the schema as prompt text (toolfactory's
``llm.structured_output: prompt`` / ``json_object``); a model then answers with an instance of
it. The simulator finds the schema the way a reader would: the first JSON object after the words
"JSON Schema" in the last user message that looks like a schema. A last message that writes no
schema but asks for JSON ("Your answer is not valid JSON. Reply again with only JSON that fits
the schema") means the schema of the latest user message that wrote one.
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
    texts = [message_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"]
    if not texts:
        return None
    written = _written_schema(texts[0])
    if written is None and "json" in texts[0].lower():
        written = next((schema for schema in map(_written_schema, texts[1:]) if schema is not None), None)
    return written


def _written_schema(text: str) -> dict[str, Any] | None:
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
