"""OpenAI chat fine-tuning JSONL: ``{"messages": [...], "tools": [...]}`` per line.

The layout of OpenAI's fine-tuning guide for function calling, which most trainers also read
(TRL, axolotl's ``chat_template`` datasets, NeMo's ChatDataset):

* ``tools``: ``{"type": "function", "function": {name, description, parameters}}``; the
  ``returns`` schema has no place in OpenAI's tool shape and is left out; a function name that
  OpenAI's API refuses (``math.factorial``) is mapped, in the tools and the calls alike, by
  :func:`toolfactory.export.names.openai_name` (deterministic and reversible);
* assistant turns: ``content`` when there is text, ``tool_calls`` as
  ``{"id", "type": "function", "function": {"name", "arguments"}}`` with the arguments text as
  generated; tool turns: ``{"role": "tool", "tool_call_id", "content"}``;
* reasoning only with ``include_reasoning`` (as ``reasoning_content``);
* an assistant turn with a loss mask (:mod:`toolfactory.curation.turn_masks`: a failed call the
  dialogue recovered from, a turn whose samples disagreed, a turn a rule flagged; kept for
  context, not to be learned) gets OpenAI's ``"weight": 0``, which excludes it from the loss;
  the reason has no place in the format (the HF export and the dataset card carry it).

No record id or metadata: OpenAI's validator rejects keys it does not know (``PROVENANCE.md``
names each record's recipe by the hash ``verify`` gives a record without an id).

**ToolLLM's Finish** (ToolLLM §2.3) is exported as a real tool: a record that follows the
convention — it offers or calls ``Finish``, or a ToolLLM search found it, whose system prompt
tells the model to end by calling ``Finish`` — gets ``Finish`` in ``tools`` and ends with its
call, ``Finish(give_answer, final_answer=…)``, as ToolBench stores a path
(:func:`~toolfactory.export.turns.finished_path`): a plain final answer becomes that call, and
Finish's canned response and a closing text after it are dropped, so the answer is written once.
The model learns to do what its system prompt asks, with a function it was given. A record
without an answer to give is skipped (``no_final_answer``). Records that do not follow the
convention are written as they are.

With a text ``call_format`` (format generalization, ToolACE §2.2.2) a line is ``{"messages"}``
only: the system prompt describes the tools in ``tool_format`` and declares the call format, and
assistant calls and tool results are written as text (:mod:`toolfactory.render`); a record whose
calls cannot be written so is skipped (``call_format_unwritable``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from toolfactory.curation import turn_masks
from toolfactory.export.base import CALL_FORMAT_UNWRITABLE, JsonlExporter, Skip
from toolfactory.export.names import openai_name
from toolfactory.export.turns import FINISH, finished_path, uses_finish
from toolfactory.models import Dialogue, Message
from toolfactory.definitions.finish import FINISH_FUNCTION
from toolfactory.render import CALL_FORMATS, TOOL_FORMATS, CallFormatError, chat_messages, render_dialogue


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
            {"id": call.id, "type": "function", "function": {"name": openai_name(call.name), "arguments": call.arguments}}
            for call in message.tool_calls
        ]
    if include_reasoning and message.reasoning:
        out["reasoning_content"] = message.reasoning
    if turn_masks.reason(message):
        out["weight"] = 0
    return out


def _renamed(tool: dict[str, Any]) -> dict[str, Any]:
    tool["function"]["name"] = openai_name(tool["function"]["name"])
    return tool


def chosen(option: str, choices: tuple[str, ...], record_id: str, what: str) -> str:
    """`option`, or for ``mixed`` a choice fixed by the record's id (the same on every export)."""
    if option != "mixed":
        return option
    digest = hashlib.sha256(f"{what}:{record_id}".encode()).digest()
    return choices[digest[0] % len(choices)]


def with_finish_tool(dialogue: Dialogue) -> Dialogue:
    """The record with ToolLLM's Finish as a real tool (see the module doc), or as it is."""
    if not uses_finish(dialogue):
        return dialogue
    messages, _ = finished_path(dialogue)
    if messages and all(messages[-1] is not m for m in dialogue.messages):  # the final answer became Finish's call
        messages[-1] = messages[-1].model_copy(update={"mask": turn_masks.reason(dialogue.messages[-1])})
    tools = dialogue.tools if any(f.name == FINISH for f in dialogue.tools) else [*dialogue.tools, FINISH_FUNCTION]
    return dialogue.model_copy(update={"messages": messages, "tools": tools})


class OpenAIExporter(JsonlExporter):
    name = "openai"
    read_as = "openai"

    def convert(self, dialogue: Dialogue) -> dict[str, Any]:
        dialogue = with_finish_tool(dialogue)
        call_format = chosen(self.options.call_format, CALL_FORMATS, dialogue.id, "call")
        if call_format == "openai":
            return {
                "messages": [message_dict(m, self.options.include_reasoning) for m in dialogue.messages],
                "tools": [_renamed(f.openai_tool()) for f in dialogue.tools],
            }
        tool_format = chosen(self.options.tool_format, TOOL_FORMATS, dialogue.id, "tools")
        # Rendering keeps `masked` on the messages it rewrites: every mask reason rides on it.
        flagged = [m.model_copy(update={"masked": True}) if turn_masks.reason(m) else m for m in dialogue.messages]
        try:
            rendered = render_dialogue(dialogue.model_copy(update={"messages": flagged}), tool_format, call_format)
        except CallFormatError as exc:
            raise Skip(CALL_FORMAT_UNWRITABLE, str(exc)) from None
        messages = chat_messages(rendered)
        for item, message in zip(messages, rendered):
            if not self.options.include_reasoning:
                item.pop("reasoning_content", None)
            if message.role == "assistant" and message.masked:
                item["weight"] = 0
        return {"messages": messages}
