"""The mode a dialogue shows (docs/architecture.md §1): single, parallel, dependent, non_tool,
missing_params, insufficient_info; and whether that is the mode its task asked for (ToolACE
§2.2.1 multi-mode).

ToolACE's two non-tool cases are told apart by structured signals, never by wording: a declined
request (`non_tool`) and a request the assistant cannot act on for lack of a required value,
answered with a question that ends the dialogue (`insufficient_info`). Whether a turn asked is
what the user agent's structured reading of it said (`generation.clarification_turns`); when the
user then gives the value and the assistant calls, the dialogue is `missing_params`.

The generator asks for a mode (toolace); what a model then does may differ, so a dialogue
records the mode it shows, and the verify stage rejects one whose shown mode is not its target.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from toolfactory.models import Dialogue

OPEN_MODE = "open"  # made without a target mode (toolalpaca, toolllm): any tool-using mode fits
NO_CALL_MODES = frozenset({"non_tool", "insufficient_info"})  # modes whose dialogues hold no call


def _values(value: Any) -> Iterator[Any]:
    """Every scalar inside a JSON value (strings of 3+ characters, numbers other than 0/1)."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _values(item)
    elif isinstance(value, list):
        for item in value:
            yield from _values(item)
    elif isinstance(value, str) and len(value) >= 3:
        yield value
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and value not in (0, 1):
        yield value


def _loads(text: str | None) -> Any:
    try:
        return json.loads(text or "")
    except json.JSONDecodeError:
        return None


def shown_mode(dialogue: Dialogue) -> str:
    """The mode the dialogue's messages show."""
    messages = dialogue.messages
    first = next((i for i, m in enumerate(messages) if m.role == "assistant"), None)
    # Whether the first turn asked for a value is what the user agent read it as (recorded by
    # the simulation), never its punctuation: real models ask without a question mark.
    asked = first is not None and not messages[first].tool_calls and first in dialogue.generation.get("clarification_turns", ())
    if not any(m.tool_calls for m in messages):
        return "insufficient_info" if asked and first == len(messages) - 1 else "non_tool"
    if asked and any(m.role == "user" for m in messages[first + 1 :]):  # type: ignore[operator]
        return "missing_params"
    if any(len(m.tool_calls or []) > 1 for m in messages):
        return "parallel"
    seen: set[str] = set()
    for message in messages:
        if message.role == "tool":
            seen.update(json.dumps(v) for v in _values(_loads(message.content)))
        for call in message.tool_calls or []:
            if seen & {json.dumps(v) for v in _values(_loads(call.arguments))}:
                return "dependent"
    return "single"


def matches_target(dialogue: Dialogue) -> bool:
    """Whether the shown mode is the target (``multiple``: one call among several functions;
    ``open``: any mode, the calls themselves are checked by ``dialogue_no_function_call``)."""
    target, shown = dialogue.target_mode, dialogue.mode
    if target is None or target == OPEN_MODE or target == shown:
        return True
    return target == "multiple" and shown == "single" and len(dialogue.tools) > 1
