"""What a careful reader finds wrong in a tool-use dialogue quoted for review.

A judge model asked whether a dialogue passes reads it; the simulator, which has no model, can
only look for evidence a reader would see without understanding the task. A dialogue quoted as
review material (lines such as ``[user] …``, ``[assistant calls] name({…})``, ``[tool name] …``,
``[assistant] …``, after a ``Tools:`` line holding the offered functions as JSON) fails when:

* a call sends a value that appears nowhere before it: not in the user's, system's or tools'
  lines, not in an earlier call, not among the offered functions (their enums, defaults,
  descriptions). Booleans are a choice, not a value, and are never held against a call; numbers
  are compared as numbers (``5`` is ``5.0``), text case-insensitively;
* the last assistant answer states a number found nowhere before it;
* the last assistant answer says nothing came back although the tools answered without error.

It sees nothing else: a dropped step, a wrong but quoted value, a poor answer without numbers
pass. With probability ``obedience`` a verdict follows this reading (see :mod:`.verdicts`); the
referee of the verify stage shows how the measured agreement moves with it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from toolfactory.stages import prompt_markers as said

_LINE = re.compile(r"^\[(?P<speaker>[^\]]+)\]\s?(?P<text>.*)$")
_CALL = re.compile(r"(?P<name>[\w.\-]+)\((?P<arguments>\{.*?\})\)(?:;\s*|$)")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")
_NOTHING = re.compile(r"\b(returned nothing|no results?|nothing came back|could not find|couldn't find)\b", re.I)
_ERROR = re.compile(r"\b(error|exception|failed|not found|invalid)\b", re.I)


def _numbers(text: str) -> set[float]:
    out = set()
    for token in _NUMBER.findall(text):
        try:
            out.add(float(token))
        except ValueError:
            continue
    return out


def _scalars(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _scalars(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _scalars(item)]
    return [value]


def _seen(value: Any, text: str, numbers: set[float]) -> bool:
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return float(value) in numbers
    words = str(value).strip().lower()
    return not words or words in text


def _entries(material: str) -> list[tuple[str, str]]:
    """(speaker, text) per quoted message, continuation lines joined; the preamble (the offered
    functions) is one entry of speaker ''."""
    entries: list[tuple[str, str]] = []
    for line in material.splitlines():
        match = _LINE.match(line)
        if match is not None:
            entries.append((match.group("speaker").strip().lower(), match.group("text")))
        elif entries:
            entries[-1] = (entries[-1][0], f"{entries[-1][1]}\n{line}")
        else:
            entries.append(("", line))
    return entries


def passes(material: str) -> bool:
    """Whether a careful reader finds nothing wrong with the dialogue in `material` (module doc)."""
    entries = _entries(material)
    seen = ""
    for speaker, text in entries:
        if speaker == said.TRANSCRIPT_CALLS:
            numbers = _numbers(seen)
            for call in _CALL.finditer(text):
                try:
                    arguments = json.loads(call.group("arguments"))
                except json.JSONDecodeError:
                    continue
                if not all(_seen(value, seen, numbers) for value in _scalars(arguments)):
                    return False
        seen += "\n" + text.lower()
    if not entries or entries[-1][0] != "assistant":
        return True
    answer = entries[-1][1]
    before = "\n".join(text for _, text in entries[:-1])
    if not _numbers(answer) <= _numbers(before):
        return False
    tools = [text for speaker, text in entries if speaker.startswith("tool ")]
    return not (_NOTHING.search(answer) and tools and not any(_ERROR.search(t) for t in tools))
