"""ShareGPT conversations with tools, as LLaMA-Factory reads them (``formatting: sharegpt``; other
trainers with ShareGPT loaders, axolotl's among them, read the same ``from``/``value`` layout
given a role mapping, though for them the ``openai`` export is the more direct input)::

    {"conversations": [{"from": "human", "value": ...}, {"from": "function_call", "value": ...},
                       {"from": "observation", "value": ...}, {"from": "gpt", "value": ...}],
     "system": "...", "tools": "[{\"name\": ..., \"description\": ..., \"parameters\": {...}}]"}

LLaMA-Factory's documented rules (data/README.md, ``SharegptDatasetConverter``), which decide
what is written and what is skipped:

* roles alternate: ``human``/``observation`` at odd positions (1st, 3rd, …), ``gpt``/
  ``function_call`` at even ones, and a conversation ends with ``gpt`` or ``function_call``
  (an even count); anything else is dropped by the loader as "abnormal", so such a record is
  skipped here with ``role_order`` (two user turns in a row, a call turn with no response that
  is followed by another assistant turn, a text answer followed by a call turn, …);
* ``function_call``'s value is JSON ``{"name", "arguments": {...}}``; the arguments must be a
  JSON object (``arguments_not_json`` otherwise);
* one ``observation`` per call result, its value the response text as the tool gave it. The
  alternation allows one observation after a ``function_call``, so the calls of a parallel turn
  are written as consecutive ``function_call``/``observation`` pairs in call order (as
  ToolBench's training messages write them) — never a list of results re-encoded as one JSON
  string. A call whose response the record lacks is written alone (a last call, or a
  ``role_order`` skip when more follows);
* ``tools`` is a JSON string of ``{name, description, parameters}`` functions; ``system`` the
  system prompt ("" when there is none).

The text of an assistant turn that also makes calls (a short "thought") has no slot — the
``function_call`` value must parse as JSON — and is left out; reasoning is never exported.

**Turn masks are not representable.** LLaMA-Factory trains on every ``gpt`` and ``function_call``
turn: its ShareGPT converter keeps only each turn's tag and value, and nothing of a turn says
"context only" (neither its released ``data`` package nor the ``loss_weight`` of the messages of
its newer ``v1`` data engine, whose ShareGPT converter sets that weight from the tag alone). Its
``mask_history`` option trains on the last turn of every example, for the whole dataset. So an
assistant turn with a loss mask (:mod:`toolfactory.curation.turn_masks`) is written as it is and
will be learned; the export's summary counts those turns (``turn_masks``, with ``carried:
false``). Splitting a record at a masked turn would not help: the turns after it need it as
context, and the masked turn's own failure is what they recover from. Where masks matter, train
from the ``openai`` export (``"weight": 0``) or the ``hf`` one (``train``).

Beside the split files, ``dataset_info.json`` declares them to LLaMA-Factory (``<run>_<split>``
entries with ``formatting: sharegpt`` and the column names), so the export folder can be given
as its ``dataset_dir`` as it is.
"""

from __future__ import annotations

import json
from typing import Any

from toolfactory.export.base import ROLE_ORDER, JsonlExporter, Skip
from toolfactory.export.stats import ExportStats
from toolfactory.export.turns import arguments_object, body, function_dict, system_prompt
from toolfactory.models import Dialogue, Message, ToolCall

ODD = ("human", "observation")
EVEN = ("gpt", "function_call")


def _call_value(call: ToolCall) -> str:
    return json.dumps({"name": call.name, "arguments": arguments_object(call)}, ensure_ascii=False)


def conversation(messages: list[Message]) -> list[dict[str, str]]:
    """The ShareGPT turns of `messages` (no system message), or :class:`Skip` (``role_order``)."""
    turns: list[dict[str, str]] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if message.role == "user":
            turns.append({"from": "human", "value": message.content or ""})
        elif message.role == "assistant" and message.tool_calls:
            answers: dict[str, Message] = {}
            while i < len(messages) and messages[i].role == "tool":
                answers.setdefault(messages[i].tool_call_id or "", messages[i])
                i += 1
            stray = set(answers) - {c.id for c in message.tool_calls}
            if stray:
                raise Skip(ROLE_ORDER, f"a tool message at position {i - 1} answers no call of the turn before it")
            for call in message.tool_calls:
                turns.append({"from": "function_call", "value": _call_value(call)})
                if call.id in answers:
                    turns.append({"from": "observation", "value": answers[call.id].content or ""})
        elif message.role == "assistant":
            turns.append({"from": "gpt", "value": message.content or ""})
        else:
            raise Skip(ROLE_ORDER, f"a {message.role} message at position {i - 1}")
    if not turns:
        raise Skip(ROLE_ORDER, "no user or assistant turn")
    for n, turn in enumerate(turns):
        if turn["from"] not in (ODD, EVEN)[n % 2]:
            raise Skip(ROLE_ORDER, f"{turn['from']} at turn {n + 1} (expected {' or '.join((ODD, EVEN)[n % 2])})")
    if len(turns) % 2:
        raise Skip(ROLE_ORDER, f"ends with {turns[-1]['from']}: a conversation ends with gpt or function_call")
    return turns


class ShareGPTExporter(JsonlExporter):
    name = "sharegpt"
    read_as = "sharegpt"

    def convert(self, dialogue: Dialogue) -> dict[str, Any]:
        return {
            "conversations": conversation(body(dialogue)),
            "system": system_prompt(dialogue) or "",
            "tools": json.dumps([function_dict(f) for f in dialogue.tools], ensure_ascii=False),
        }

    def close(self, stats: ExportStats) -> dict[str, int]:
        files = super().close(stats)
        info = {f"{stats.run_id}_{split}": {"file_name": f"{split}.jsonl", "formatting": "sharegpt",
                                            "columns": {"messages": "conversations", "system": "system", "tools": "tools"}}
                for split in self.splits}
        self.out.write_bytes("dataset_info.json", (json.dumps(info, indent=2) + "\n").encode())
        return files
