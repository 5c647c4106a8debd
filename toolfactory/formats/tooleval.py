"""ToolEval's converted answers (ToolLLM appendix A.5; ToolBench's ``convert_to_answer_format.py``).

The file is one JSON object ``{query_id: {query, available_tools, answer: {method, total_steps,
final_answer, answer_details}}}``, the input of ToolBench's pass- and win-rate scripts. One
record per query id, in file order, id ``<query_id>``; a folder is every ``*.json`` file under
it (:func:`read`):

* tools: ``available_tools`` (ToolBench function dicts, ``Finish`` included), type names
  normalised to JSON Schema;
* messages: ToolBench's system prompt is not kept (the converter blanks it); the ``query`` as the
  user turn; then ``answer_details``, a chain of ``{role, message, next: [...]}`` nodes (the
  converter reduces the path to a sequence, following the first ``next``): an ``assistant``
  node is a thought (assistant text), a ``tool`` node a call with its response. ``Finish`` closes
  the path; with a ``final_answer`` the record ends with it as the assistant's answer.

The converter keeps only the first 100 characters of each node's ``message`` (``str(dict)[:100]``
of a tool node's ``{name, arguments, response}``), so a call's name is recovered, but its
arguments and response only when the node is short enough to be whole. The rules that judge
arguments and responses cannot apply (:data:`NOT_APPLICABLE_REASONS`); the reader keeps the text as
the file has it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, Iterator

from toolfactory.formats.base import (
    BAD_TOOL,
    DERIVED_MODE,
    MISSING_FIELD,
    RECORD_NOT_OBJECT,
    UNKNOWN_ROLE,
    WRONG_TYPE,
    RECORD_NOT_JSON,
    FormatError,
    Malformed,
    UnreadableFile,
    build_dialogue,
    guarded,
    load_json_file,
    refused_in,
    require_path,
)
from toolfactory.models import EMPTY_OBJECT_SCHEMA, Dialogue, Function, Message, ToolCall
from toolfactory.definitions.convert import normalize_schema
from toolfactory.definitions.finish import FINISH_ANSWERED

NAME = "tooleval"
_TRUNCATED = "ToolEval's converter keeps the first 100 characters of each message, so arguments and responses are cut"
NOT_APPLICABLE_REASONS: dict[str, str] = {
    **DERIVED_MODE,
    **{code: _TRUNCATED for code in (
        "call_arguments_not_json", "call_missing_required", "call_unknown_argument", "call_argument_type",
        "call_argument_enum", "call_argument_pattern", "call_argument_format", "call_argument_range",
        "call_argument_invalid", "filter_parse_error", "dialogue_incomplete_answer", "sample_call_format_mismatch",
        "filter_search_not_finished",
    )},
    "answer_control_token": "ToolEval's converter writes Finish's arguments, JSON and all, as the final answer",
}
NOT_APPLICABLE: frozenset[str] = frozenset(NOT_APPLICABLE_REASONS)

_NAME = re.compile(r"""^\{'name': (['"])(.*?)\1""")


def _tools(raw: Any) -> list[Function]:
    if not isinstance(raw, list) or not raw:
        raise Malformed(MISSING_FIELD, "no 'available_tools' list")
    functions = []
    for i, f in enumerate(raw):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            raise Malformed(BAD_TOOL, f"available_tools[{i}] has no name")
        functions.append(Function(name=f["name"], description=f.get("description") or "",
                                  parameters=normalize_schema(f.get("parameters") or dict(EMPTY_OBJECT_SCHEMA))))
    return functions


def _tool_node(message: Any) -> tuple[str, str, str]:
    """(name, arguments, response) of a tool node's message: whole when it parses, else the name,
    and the cut text as the arguments and the response (what the file has of them)."""
    text = str(message)
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = None
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        return value["name"], str(value.get("arguments") or ""), str(value.get("response") or "")
    found = _NAME.match(text)
    if found is None:
        raise Malformed(MISSING_FIELD, f"a tool node without a function name: {text[:60]!r}")
    return found.group(2), text, text


def to_dialogue(query_id: str, record: Any) -> Dialogue:
    if not isinstance(record, dict):
        raise Malformed(RECORD_NOT_OBJECT, f"query {query_id} is not an object")
    query, answer = record.get("query"), record.get("answer")
    if not isinstance(query, str) or not query.strip():
        raise Malformed(MISSING_FIELD, "no 'query'")
    if not isinstance(answer, dict) or not isinstance(answer.get("answer_details"), list):
        raise Malformed(MISSING_FIELD, "no 'answer.answer_details' list")
    tools = _tools(record.get("available_tools"))
    messages = [Message(role="user", content=query)]
    nodes: list[Any] = list(answer["answer_details"])
    serial = 0
    finish: ToolCall | None = None
    while nodes:
        node = nodes.pop(0)
        if not isinstance(node, dict):
            raise Malformed(WRONG_TYPE, "an answer_details node must be an object")
        nodes = list(node.get("next") or [])[:1]  # a sequence: the converter reduced the path
        role = node.get("role")
        if role in ("system", "user"):
            continue
        if role == "assistant":
            messages.append(Message(role="assistant", content=str(node.get("message") or "")))
        elif role == "tool":
            name, arguments, response = _tool_node(node.get("message"))
            serial += 1
            call = ToolCall(id=f"call_{serial}", name=name, arguments=arguments)
            messages.append(Message(role="assistant", tool_calls=[call]))
            messages.append(Message(role="tool", tool_call_id=call.id, name=name, content=FINISH_ANSWERED if name == "Finish" else response))
            finish = call if name == "Finish" else finish
        else:
            raise Malformed(UNKNOWN_ROLE, f"answer_details: unknown role {role!r}")
    final = answer.get("final_answer")
    if finish is not None and isinstance(final, str) and final.strip():
        messages.append(Message(role="assistant", content=final))
    return build_dialogue(NAME, {"id": query_id}, tools, messages)


def _files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.rglob("*.json") if p.is_file())
    if not files:
        raise UnreadableFile(f"{path}: no ToolEval answer files (*.json) under it")
    return files


_NOT_ANSWERS = "ToolEval's converted answers are one JSON object {query_id: answer}"


def read(path: str | Path) -> Iterator[Dialogue | FormatError]:
    """The records of a converted-answers file, or of every ``*.json`` file under a folder (as
    ToolBench's converter lays them out: ``<model>/<test set>.json``), in path order and numbered
    across files. In a folder a record's id is ``<file path without .json>/<query_id>`` (the
    same query is answered in several files), and a file that cannot be read is one FormatError."""
    path = require_path(path)
    index = 0
    for file in _files(path):
        name = file.relative_to(path).as_posix() if path.is_dir() else file.name
        prefix = f"{file.relative_to(path).with_suffix('').as_posix()}/" if path.is_dir() else ""
        try:
            answers = load_json_file(file)
        except UnreadableFile as exc:
            if not path.is_dir():
                raise
            yield FormatError(index, RECORD_NOT_JSON, str(exc).removeprefix(f"{file}: "), name)
            index += 1
            continue
        if not isinstance(answers, dict):
            if not path.is_dir():
                raise UnreadableFile(f"{file}: {_NOT_ANSWERS}")
            yield FormatError(index, RECORD_NOT_OBJECT, _NOT_ANSWERS, name)
            index += 1
            continue
        for query_id, record in answers.items():
            record_id = f"{prefix}{query_id}"  # also where the record is
            refused = refused_in(record)
            if refused is not None:
                yield FormatError(index, refused.reason, refused.message, record_id)
            else:
                yield guarded(index, record_id, lambda: to_dialogue(record_id, record))
            index += 1
