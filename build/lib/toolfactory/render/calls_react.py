"""The react call format of ToolAlpaca and ToolLLaMA (ReAct)::

    Thought: I need the forecast for Paris.
    Action: get_weather
    Action Input: {"city": "Paris", "days": 3}

One Action / Action Input pair per call (parallel calls are consecutive pairs); the arguments are
a JSON object on one line (a model's multi-line JSON is read too). The turn's text is the
Thought, as ToolLLaMA trains it; tool results come back as ``Observation: ...`` (see
:mod:`toolfactory.render.dialogue`). Labels (Thought, Action, Action Input, Observation, Final
Answer) are only recognised at the start of a line, so a Thought that itself has a line starting
with a label cannot be written (it would read back as part of a call): rendering it raises
:class:`CallFormatError`, as does a name that is not one line.
"""

from __future__ import annotations

import json
import re

from toolfactory.render.errors import CallFormatError
from toolfactory.render.parsed import ParsedCall, json_object

NAME = "react"
LABEL = re.compile(r"^(Thought|Action Input|Action|Observation|Final Answer)[ \t]*:[ \t]?", re.MULTILINE)
THOUGHT = "Thought: "


def render(calls: list[ParsedCall]) -> str:
    blocks = []
    for i, call in enumerate(calls):
        if "\n" in call.name or "\r" in call.name or call.name != call.name.strip() or not call.name:
            raise CallFormatError(NAME, f"call {i} ({call.name!r}): a react Action name must be one line without surrounding spaces")
        blocks.append(f"Action: {call.name}\nAction Input: {json.dumps(call.arguments, ensure_ascii=False)}")
    return "\n".join(blocks)


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _calls(text: str, labels: list[re.Match[str]]) -> list[ParsedCall]:
    """The calls of `labels` (which start with an Action): strict Action / Action Input pairs."""
    calls: list[ParsedCall] = []
    i = 0
    while i < len(labels):
        label = labels[i]
        if label.group(1) != "Action":
            raise CallFormatError(NAME, f"line {_line(text, label.start())}: expected 'Action:', found '{label.group(1)}:'"
                                  + (" (an assistant turn ends at its calls; results come in tool messages)" if label.group(1) == "Observation" else ""))
        end = labels[i + 1].start() if i + 1 < len(labels) else len(text)
        name = text[label.end():end].strip()
        if not name:
            raise CallFormatError(NAME, f"line {_line(text, label.start())}: 'Action:' without a function name")
        if i + 1 >= len(labels) or labels[i + 1].group(1) != "Action Input":
            raise CallFormatError(NAME, f"line {_line(text, label.start())}: Action {name!r} has no 'Action Input:' line after it")
        given = labels[i + 1]
        end = labels[i + 2].start() if i + 2 < len(labels) else len(text)
        arguments = json_object(text[given.end():end].strip(), NAME, f"call {len(calls)} ({name}): Action Input")
        calls.append(ParsedCall(name, arguments))
        i += 2
    return calls


def parse(text: str) -> list[ParsedCall]:
    """The calls of a react text; a leading Thought is allowed (and ignored)."""
    if not text.strip():
        return []
    labels = list(LABEL.finditer(text))
    if not labels or (labels[0].group(1) != "Thought" and text[: labels[0].start()].strip()):
        raise CallFormatError(NAME, "expected 'Action: <name>' and 'Action Input: <JSON object>' lines")
    if labels[0].group(1) == "Thought":
        labels = labels[1:]
        if not labels:
            raise CallFormatError(NAME, "a Thought without an 'Action:' line")
    return _calls(text, labels)


def render_turn(content: str, calls_text: str) -> str:
    clash = LABEL.search(content)
    if clash:
        raise CallFormatError(NAME, f"the Thought has a line starting with {clash.group(1)!r}:, which would read back as part of a call")
    return f"{THOUGHT}{content}\n{calls_text}"


def parse_turn(text: str) -> tuple[str | None, list[ParsedCall]]:
    """(Thought or text before the first Action, calls); a turn without an Action is all text."""
    labels = list(LABEL.finditer(text))
    first = next((k for k, label in enumerate(labels) if label.group(1) == "Action"), None)
    if first is None:
        return text or None, []
    head = text[: labels[first].start()]
    if first == 1 and labels[0].group(1) == "Thought" and labels[0].start() == 0:
        head = head[labels[0].end():]
    content = head[:-1] if head.endswith("\n") else head
    return content or None, _calls(text, labels[first:])
