"""OpenAI chat fine-tuning JSONL: ``{"messages": [...], "tools": [...]}`` per line.

The layout of OpenAI's fine-tuning guide for function calling, which most trainers also read
(TRL, axolotl's ``chat_template`` datasets, NeMo's ChatDataset):

* ``tools``: ``{"type": "function", "function": {name, description, parameters}}``; the
  ``returns`` schema has no place in OpenAI's tool shape and is left out;
* assistant turns: ``content`` when there is text, ``tool_calls`` as
  ``{"id", "type": "function", "function": {"name", "arguments"}}`` with the arguments text as
  generated; tool turns: ``{"role": "tool", "tool_call_id", "content"}``;
* reasoning only with ``include_reasoning`` (as ``reasoning_content``);
* an assistant turn marked ``masked`` (its samples disagreed: kept for context, not to be
  learned) gets OpenAI's ``"weight": 0``, which excludes it from the loss.

No record id or metadata: OpenAI's validator rejects keys it does not know. Every accepted
record fits this format, so nothing is skipped.
"""

from __future__ import annotations

from typing import Any

from toolfactory.export.base import JsonlExporter
from toolfactory.models import Dialogue, Message


def message_dict(message: Message, include_reasoning: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role}
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
        out["content"] = message.content or ""
        return out
    if message.content is not None or not message.tool_calls:
        out["content"] = message.content or ""
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in message.tool_calls
        ]
    if include_reasoning and message.reasoning:
        out["reasoning_content"] = message.reasoning
    if message.role == "assistant" and getattr(message, "masked", None):
        out["weight"] = 0
    return out


class OpenAIExporter(JsonlExporter):
    name = "openai"

    def convert(self, dialogue: Dialogue) -> dict[str, Any]:
        return {
            "messages": [message_dict(m, self.options.include_reasoning) for m in dialogue.messages],
            "tools": [f.openai_tool() for f in dialogue.tools],
        }
