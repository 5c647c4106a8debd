"""OpenAI chat fine-tuning JSONL: ``{"messages": [...], "tools": [{"type": "function", "function": {...}}]}``.

Per record:

* tools: ``tools`` entries (``{"type": "function", "function": {name, description, parameters}}``)
  and the legacy ``functions`` list (``{name, description, parameters}``), converted by the
  project's OpenAI tool importer (BFCL/Python type names mapped to JSON Schema);
* messages: ``system`` (and ``developer``, its newer name), ``user``, ``assistant``, ``tool``;
  content as a string, null, or a list of parts whose ``text`` parts are joined with newlines;
  ``reasoning``/``reasoning_content`` kept as the message's reasoning;
* assistant ``tool_calls[].function.arguments`` kept as the text the file has (a JSON object
  written as an object is dumped back to text); a call without an id gets ``call_<n>``;
* legacy ``function_call {name, arguments}`` becomes a call with a synthesized id, and a legacy
  ``function`` message (``{"role": "function", "name", "content"}``) a tool message answering the
  latest unanswered legacy call of that name (else the latest unanswered legacy call);
* a path that ends with ToolLLM's unanswered ``Finish`` call (as the ``openai`` export writes a
  ToolLLM record) is closed as ToolBench's environment closes it: Finish's observation, then its
  ``final_answer`` as the assistant's answer (:mod:`toolfactory.formats.finish`).

Fine-tuning extras (``weight``, ``parallel_tool_calls``, a participant ``name`` on user turns) are
ignored. The record's ``id`` is kept when there is one; otherwise the id is a hash of the record.
The mode is derived from the calls (:func:`~toolfactory.formats.base.derive_mode`): a dialogue that
makes no call is ``non_tool``, which is what a plain answer in a function-calling set is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from toolfactory.formats.base import (
    BAD_TOOL,
    DERIVED_MODE,
    MISSING_FIELD,
    RECORD_NOT_OBJECT,
    UNKNOWN_ROLE,
    WRONG_TYPE,
    FormatError,
    Malformed,
    build_dialogue,
    read_json_records,
    json_text,
)
from toolfactory.formats.finish import closed_finish
from toolfactory.models import Dialogue, Function, Message, ToolCall
from toolfactory.definitions.convert import MalformedTool, convert

NAME = "openai"
NOT_APPLICABLE_REASONS: dict[str, str] = dict(DERIVED_MODE)
NOT_APPLICABLE: frozenset[str] = frozenset(NOT_APPLICABLE_REASONS)

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


def content_text(content: Any, where: str) -> str | None:
    """Message content as text: a string, None, or the text parts of a content list."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part.get("text", "") for part in content if isinstance(part, dict) and part.get("type", "text") == "text"]
        if len(texts) != len(content):
            raise Malformed(WRONG_TYPE, f"{where}: only text content parts are supported")
        return "\n".join(str(t) for t in texts)
    return json_text(content)  # an object (a tool result written as JSON): its JSON text


def functions_of(record: dict[str, Any]) -> list[Function]:
    functions: list[Function] = []
    for key in ("tools", "functions"):
        entries = record.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise Malformed(WRONG_TYPE, f"{key!r} must be a list, not {type(entries).__name__}")
        functions += definitions(entries, key)
    return functions


def definitions(entries: list[Any], key: str) -> list[Function]:
    """The functions of OpenAI-style tool entries (`tools[]` or `functions[]`, named by `key`);
    ShareGPT's `tools` hold the same entries."""
    functions: list[Function] = []
    for i, entry in enumerate(entries):
        if key == "tools" and isinstance(entry, dict) and entry.get("type", "function") != "function":
            raise Malformed(BAD_TOOL, f"tools[{i}]: type {entry.get('type')!r} is not a function tool")
        try:
            functions += [fn for tool in convert("openai", entry) for fn in tool.functions]
        except MalformedTool as exc:
            raise Malformed(BAD_TOOL, f"{key}[{i}]: {exc}") from None
    return functions


def _call(raw: Any, where: str, serial: int) -> ToolCall:
    if not isinstance(raw, dict):
        raise Malformed(WRONG_TYPE, f"{where} must be an object")
    spec = raw.get("function", raw)  # tool_calls[] nest the call under "function"; function_call does not
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
        raise Malformed(MISSING_FIELD, f"{where}: a call needs a function name")
    arguments = spec.get("arguments")
    return ToolCall(id=str(raw.get("id") or f"call_{serial}"), name=spec["name"], arguments="" if arguments is None else json_text(arguments))


def messages_of(record: dict[str, Any]) -> list[Message]:
    raw_messages = record.get("messages")
    if not raw_messages:
        raise Malformed(MISSING_FIELD, "no 'messages'")
    if not isinstance(raw_messages, list):
        raise Malformed(WRONG_TYPE, f"'messages' must be a list, not {type(raw_messages).__name__}")
    messages: list[Message] = []
    legacy_open: list[ToolCall] = []  # legacy function_call turns not yet answered
    serial = 0
    for i, raw in enumerate(raw_messages):
        where = f"messages[{i}]"
        if not isinstance(raw, dict):
            raise Malformed(WRONG_TYPE, f"{where} must be an object")
        role = raw.get("role")
        content = content_text(raw.get("content"), where)
        reasoning = raw.get("reasoning") or raw.get("reasoning_content")
        reasoning = reasoning if isinstance(reasoning, str) else None
        if role in ("system", "developer", "user"):
            messages.append(Message(role=ROLES[role], content=content))  # type: ignore[arg-type]
        elif role == "assistant":
            calls: list[ToolCall] = []
            raw_calls = raw.get("tool_calls") or []
            if not isinstance(raw_calls, list):
                raise Malformed(WRONG_TYPE, f"{where}.tool_calls must be a list")
            for j, raw_call in enumerate(raw_calls):
                serial += 1
                calls.append(_call(raw_call, f"{where}.tool_calls[{j}]", serial))
            if raw.get("function_call"):
                serial += 1
                legacy = _call(raw["function_call"], f"{where}.function_call", serial)
                calls.append(legacy)
                legacy_open.append(legacy)
            messages.append(Message(role="assistant", content=content, reasoning=reasoning, tool_calls=calls or None))
        elif role == "tool":
            call_id = raw.get("tool_call_id")
            name = raw.get("name")
            messages.append(Message(role="tool", content=content, tool_call_id=None if call_id is None else str(call_id),
                                    name=name if isinstance(name, str) else None))
        elif role == "function":
            name = raw.get("name")
            match = next((c for c in reversed(legacy_open) if c.name == name), legacy_open[-1] if legacy_open else None)
            if match is not None:
                legacy_open.remove(match)
            messages.append(Message(role="tool", content=content, tool_call_id=match.id if match else None,
                                    name=name if isinstance(name, str) else None))
        else:
            raise Malformed(UNKNOWN_ROLE, f"{where}: unknown role {role!r}")
    return messages


def to_dialogue(record: Any) -> Dialogue:
    if not isinstance(record, dict):
        raise Malformed(RECORD_NOT_OBJECT, f"a record must be a JSON object, not {type(record).__name__}")
    messages = closed_finish(messages_of(record))
    tools = functions_of(record)
    return build_dialogue(NAME, record, tools, messages)


def read(path: str | Path) -> Iterator[Dialogue | FormatError]:
    return read_json_records(path, to_dialogue)

