"""Text-mode tool calling: function calling for servers and models without a native interface.

A vLLM started without ``--enable-auto-tool-choice`` answers a request with ``tool_choice:
auto`` with a 400, and a model without a tool-calling chat template never fills ``tool_calls``.
In text mode the gateway sends no ``tools``: the functions are described in the system prompt
with a declared call format (ToolACE §2.2.2 format generalization, :mod:`toolfactory.render`),
earlier calls and results are written as text in that format, and the answer's calls are parsed
back into ``tool_calls``. The caller gets the same message shape as from native calling, so the
stored dialogue is the same canonical record.

Hermes-style ``<tool_call>{"name": …, "arguments": …}</tool_call>`` (what Qwen, Hermes and many
open models write from their own chat template, and what vLLM leaves in ``content`` when no
tool parser runs) is read in every call format, because models fall back to it whatever the
prompt says.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from toolfactory.models import Function, ToolCall, stable_id
from toolfactory.render import CallFormatError, ParsedCall, parse_calls, parse_turn, render_turn, system_prompt
from toolfactory.render.dialogue import RESULT_WRAPPERS

TOOL_FORMAT = "json"  # the description format: the one models see most, and lossless
_OBSERVATION = re.compile(r"^[ \t]*Observation[ \t]*:", re.MULTILINE)
_HERMES = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


def _functions(tools: Sequence[dict[str, Any]]) -> list[Function]:
    return [
        Function(name=t["function"]["name"], description=t["function"].get("description") or "",
                 parameters=t["function"].get("parameters") or {"type": "object", "properties": {}})
        for t in tools if isinstance(t.get("function"), dict)
    ]


def _call_text(message: dict[str, Any], fmt: str) -> str:
    calls = [ToolCall(id=str(c.get("id") or i), name=c["function"]["name"], arguments=c["function"].get("arguments") or "{}")
             for i, c in enumerate(message.get("tool_calls") or [])]
    try:
        return render_turn(message.get("content"), calls, fmt)
    except CallFormatError:
        # Arguments that are no JSON object cannot be written in a text format; the JSON
        # format shows them as they were, which is what the model said.
        return render_turn(message.get("content"), calls, "json") if fmt != "json" else str(message.get("content") or "")


def text_messages(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    """`messages` for a text-mode request: the tools in the system prompt, calls and results as text.

    Results stay ``tool`` messages (with the function's name, without a call id, which text has
    none of), wrapped as the call format's statement says: the shape of a text-format training
    record (:func:`toolfactory.render.render_dialogue`) and of Hermes-style chat templates."""
    first_system = bool(messages) and messages[0].get("role") == "system"
    preamble = messages[0].get("content") if first_system else None
    out: list[dict[str, Any]] = [{"role": "system", "content": system_prompt(_functions(tools), TOOL_FORMAT, fmt, preamble)}]
    names: dict[str, str] = {}
    before, after = RESULT_WRAPPERS[fmt]
    for message in messages[1 if first_system else 0:]:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            names.update({str(c.get("id")): c["function"]["name"] for c in message["tool_calls"]})
            out.append({"role": "assistant", "content": _call_text(message, fmt)})
        elif role == "tool":
            name = names.get(str(message.get("tool_call_id"))) or message.get("name") or "the function"
            out.append({"role": "tool", "name": name, "content": f"{before}{message.get('content') or ''}{after}"})
        else:
            out.append({k: v for k, v in message.items() if k in ("role", "content")})
    return out


def _hermes(text: str) -> tuple[str | None, list[ParsedCall]]:
    blocks = list(_HERMES.finditer(text))
    if not blocks:
        return text or None, []
    calls = [call for block in blocks for call in parse_calls(block.group(1), "json")]
    head = text[: blocks[0].start()].strip()
    return head or None, calls


def parse_text_calls(text: str, fmt: str, request_id: str) -> tuple[str | None, list[dict[str, Any]]]:
    """(the turn's own text, its calls as OpenAI ``tool_calls``) of a text-mode answer.

    Raises :class:`CallFormatError` when the text holds call syntax that does not parse; ids
    are derived from the request and the call's position, so a cached answer gets the same.
    In the react format, what follows a line starting ``Observation:`` is dropped: a model that
    goes on past its Action is making up the result, which ReAct agents cut with a stop
    sequence at that line."""
    if fmt == "react":
        made_up = _OBSERVATION.search(text)
        text = text[: made_up.start()].rstrip() if made_up else text
    try:
        content, calls = parse_turn(text, fmt)
    except CallFormatError:
        if not _HERMES.search(text):
            raise
        content, calls = _hermes(text)
    if not calls and _HERMES.search(text):
        content, calls = _hermes(text)
    wire = [
        {"id": "call_" + stable_id(request_id, str(i))[:24], "type": "function",
         "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}}
        for i, call in enumerate(calls)
    ]
    return content, wire
