"""ShareGPT conversations with tools, as LLaMA-Factory reads them (``formatting: sharegpt``), JSONL
or a JSON list::

    {"conversations": [{"from": "human", "value": ...}, {"from": "function_call", "value": ...},
                       {"from": "observation", "value": ...}, {"from": "gpt", "value": ...}],
     "system": "...", "tools": "[{\"name\": ..., \"description\": ..., \"parameters\": {...}}]"}

Per record, with LLaMA-Factory's default tags (``SharegptDatasetConverter``):

* ``system`` (or a first turn ``from: system``): the system message; ``tools``: a JSON string (or
  a list) of ``{name, description, parameters}`` functions, converted by the project's OpenAI tool
  importer;
* ``human`` -> user, ``gpt`` -> assistant text; ``function_call`` -> an assistant turn with one
  call, its value JSON ``{"name", "arguments"}`` (arguments an object, or JSON text), the call id
  synthesized (``call_<n>``); ``observation`` -> the tool message answering the latest
  unanswered call. ShareGPT writes the calls of a parallel turn as consecutive
  ``function_call``/``observation`` pairs, so they read back as one call per turn: the order of
  calls and responses is kept, which turn made them together is not (the mode is derived from
  the calls, :data:`~toolfactory.formats.base.DERIVED_MODE`).

The ``sharegpt`` export writes this shape; reading it back is how its round trip is verified.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from toolfactory.formats.base import (
    DERIVED_MODE,
    MISSING_FIELD,
    RECORD_NOT_OBJECT,
    RECORD_UNREADABLE,
    UNKNOWN_ROLE,
    WRONG_TYPE,
    FormatError,
    Malformed,
    build_dialogue,
    json_text,
    parse_json_field,
    read_json_records,
    unreadable,
)
from toolfactory.formats.openai import definitions
from toolfactory.models import Dialogue, Function, Message, ToolCall

NAME = "sharegpt"
NOT_APPLICABLE_REASONS: dict[str, str] = dict(DERIVED_MODE)
NOT_APPLICABLE: frozenset[str] = frozenset(NOT_APPLICABLE_REASONS)

TEXT_ROLES = {"system": "system", "human": "user", "gpt": "assistant"}
DATASET_INFO = "dataset_info.json"  # LLaMA-Factory's list of datasets, beside the data files


def functions_of(record: dict[str, Any]) -> list[Function]:
    if record.get("tools") in (None, ""):
        return []
    return definitions(parse_json_field(record, "tools", list), "tools")


def _call(value: Any, where: str, serial: int) -> ToolCall:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise Malformed(WRONG_TYPE, f"{where}: a function_call value is JSON, {exc.msg} (column {exc.colno})") from None
        except ValueError as exc:  # an integer longer than Python converts
            raise Malformed(RECORD_UNREADABLE, f"{where}: {unreadable(exc)}") from None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
        raise Malformed(MISSING_FIELD, f"{where}: a call needs a function name")
    arguments = value.get("arguments")
    return ToolCall(id=f"call_{serial}", name=value["name"], arguments="" if arguments is None else json_text(arguments))


def messages_of(record: dict[str, Any]) -> list[Message]:
    turns = record.get("conversations")
    if not turns:
        raise Malformed(MISSING_FIELD, "no 'conversations'")
    if not isinstance(turns, list):
        raise Malformed(WRONG_TYPE, f"'conversations' must be a list, not {type(turns).__name__}")
    system = record.get("system")
    messages = [Message(role="system", content=str(system))] if system else []
    open_calls: list[ToolCall] = []
    serial = 0
    for i, turn in enumerate(turns):
        where = f"conversations[{i}]"
        if not isinstance(turn, dict):
            raise Malformed(WRONG_TYPE, f"{where} must be an object")
        tag, value = turn.get("from"), turn.get("value")
        if tag in TEXT_ROLES and not (tag == "system" and i > 0):
            messages.append(Message(role=TEXT_ROLES[tag], content=None if value is None else json_text(value)))  # type: ignore[arg-type]
        elif tag == "function_call":
            serial += 1
            call = _call(value, where, serial)
            open_calls.append(call)
            messages.append(Message(role="assistant", tool_calls=[call]))
        elif tag == "observation":
            call = open_calls.pop() if open_calls else None
            messages.append(Message(role="tool", tool_call_id=call.id if call else None, name=call.name if call else None,
                                    content="" if value is None else json_text(value)))
        else:
            raise Malformed(UNKNOWN_ROLE, f"{where}: unknown tag {tag!r}")
    return messages


def to_dialogue(record: Any) -> Dialogue:
    if not isinstance(record, dict):
        raise Malformed(RECORD_NOT_OBJECT, f"a record must be a JSON object, not {type(record).__name__}")
    return build_dialogue(NAME, record, functions_of(record), messages_of(record))


def read(path: str | Path) -> Iterator[Dialogue | FormatError]:
    """The records of a JSONL or JSON list file, or of each such file of a folder (an export's
    folder: LLaMA-Factory's ``dataset_info.json`` beside them is no data file)."""
    return read_json_records(path, to_dialogue, skip={DATASET_INFO})
