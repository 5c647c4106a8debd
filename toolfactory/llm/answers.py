"""What real chat completions look like, taken apart into (reasoning, answer).

Providers wrap the same answer in different shapes: reasoning models put their thinking in a
`reasoning_content` field (DeepSeek, vLLM before 0.11), a `reasoning` field (vLLM since 0.11,
OpenRouter) or as a ``<think>…</think>`` prefix of the content (a reasoning model served without
a reasoning parser); models asked for JSON without a constrained decoder wrap it in a fenced
code block or write a sentence around it. This module turns each of those back into the answer
the pipeline reads, and keeps the reasoning apart so it never becomes training text by mistake.
"""

from __future__ import annotations

import json
import re
from typing import Any

REASONING_FIELDS = ("reasoning_content", "reasoning")
_THINK = re.compile(r"^\s*<think>(.*?)(?:</think>|$)", re.DOTALL)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|json5)?[ \t]*\n(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


def split_reasoning(message: dict[str, Any]) -> tuple[str | None, str | None]:
    """(the model's reasoning, the answer text) of an assistant message.

    A ``<think>`` block that is never closed (the answer was cut inside it) is all reasoning, so
    the answer is empty rather than the half-thought."""
    reasoning = next((message[f] for f in REASONING_FIELDS if isinstance(message.get(f), str) and message[f]), None)
    content = message.get("content")
    if not isinstance(content, str):
        return reasoning, None
    match = _THINK.match(content)
    if match:
        thought = match.group(1).strip()
        reasoning = f"{reasoning}\n{thought}" if reasoning and thought else (reasoning or thought or None)
        content = content[match.end():].lstrip()
    return reasoning, content


def extract_json(text: str) -> Any:
    """The JSON value an answer holds: the whole text, else a fenced block, else the value that
    opens at the first brace or bracket after some prose. Raises :class:`json.JSONDecodeError` (from the whole text) when
    there is none, so the re-ask names the parser's own complaint."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as whole:
        error = whole
    for block in _FENCE.findall(stripped):
        try:
            return json.loads(block)
        except json.JSONDecodeError:
            continue
    # Only where the first value opens: a later brace may be inside a broken answer, and an
    # inner object taken for the answer would hide that it was malformed.
    start = next((i for i, char in enumerate(stripped) if char in "{["), None)
    if start is not None and start > 0:
        try:
            return _DECODER.raw_decode(stripped, start)[0]
        except json.JSONDecodeError:
            pass
    raise error
