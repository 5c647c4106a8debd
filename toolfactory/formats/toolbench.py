"""ToolBench's released DFSDT answers (ToolLLM) as Dialogues: a JSON answer file, or a folder of them
(:func:`answer_files`: also ToolBench's ``data/answer/`` of answer folders, and an export's folder).

One record per answer file (its name without ``.json`` is the dialogue id), read as
:func:`~toolfactory.formats.base.read_text` decodes it (a byte-order mark dropped). Two sources per file:

* ``answer_generation.train_messages``, what :func:`read` converts: the list of training
  prefixes of the winning path; the last (longest) one is the whole path. Roles
  system/user/assistant/function; an assistant ``function_call {name, arguments}`` becomes a
  :class:`ToolCall` with a synthesized id (``call_<n>``), and each ``function`` message a tool
  message answering the latest unanswered call. The path ends with the ``Finish`` call, which
  ToolBench trains on but does not answer; the converter answers it with the observation
  ToolBench's environment gives (``{"response":"successfully giving the final answer."}``, as
  recorded in the DFSDT tree) and, for ``give_answer``, closes with its ``final_answer`` as the
  assistant's answer: the only part ToolLLM shows the user (:mod:`toolfactory.formats.finish`,
  which the ``openai`` reader shares). An answer whose search never
  answered (``valid_data`` false) releases no training messages: ``no_train_messages``.
* ``tree``: the DFSDT search tree (:func:`from_tree`). Every root-to-leaf path is converted too
  (Thought -> assistant content, Action + Action Input -> call, observation -> tool message),
  which gives the paths that *gave up* (``give_up_and_restart``) or were abandoned as real
  dialogues.

Tools: the answer's ``function`` list (which includes ``Finish``), type names normalised to JSON
Schema; when a file has none, the query file's ``api_list`` (matched by query text, converted
with the project's ToolBench importer) plus ToolLLM's ``Finish``, if a query file is given.
Mode is derived from the calls (every path calls at least ``Finish``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from pydantic import ValidationError

from toolfactory.formats.base import (
    BAD_TOOL,
    DERIVED_MODE,
    INVALID_RECORD,
    MISSING_FIELD,
    NO_TRAIN_MESSAGES,
    RECORD_NOT_JSON,
    RECORD_NOT_OBJECT,
    RECORD_TOO_DEEP,
    TOO_DEEP_MESSAGE,
    UNKNOWN_ROLE,
    WRONG_TYPE,
    FormatError,
    Malformed,
    UnreadableFile,
    derive_mode,
    guarded,
    json_text,
    read_text,
    require_path,
    text_error,
)
from toolfactory.formats.finish import closed_finish, finish_arguments
from toolfactory.models import EMPTY_OBJECT_SCHEMA, Dialogue, Function, Message, ToolCall
from toolfactory.render.parsed import standard_json
from toolfactory.definitions.convert import MalformedTool, convert, normalize_schema
from toolfactory.definitions.finish import FINISH_FUNCTION

NAME = "toolbench"
# (A path that never calls Finish is filter_search_not_finished, which does apply.)
NOT_APPLICABLE_REASONS: dict[str, str] = dict(DERIVED_MODE)
NOT_APPLICABLE: frozenset[str] = frozenset(NOT_APPLICABLE_REASONS)

SYSTEM = "You are AutoGPT, you can use many tools(functions) to do the following task."


def tools_of(answer: dict[str, Any], queries: Iterable[dict[str, Any]] = ()) -> list[Function]:
    listed = answer["answer_generation"].get("function")
    if listed:
        functions = []
        for i, f in enumerate(listed):
            if not isinstance(f, dict) or not isinstance(f.get("name"), str):
                raise Malformed(BAD_TOOL, f"answer_generation.function[{i}] has no name")
            functions.append(Function(name=f["name"], description=f.get("description") or "",
                                      parameters=normalize_schema(f.get("parameters") or dict(EMPTY_OBJECT_SCHEMA))))
        return functions
    query = answer["answer_generation"].get("query", "").strip()
    match = next((q for q in queries if q["query"].strip() == query), None)
    if match is None:
        return []
    by_tool: dict[str, list[dict[str, Any]]] = {}
    for api in match["api_list"]:
        by_tool.setdefault(api["tool_name"], []).append({**api, "name": api["api_name"], "description": api.get("api_description", "")})
    functions = [fn for name, apis in by_tool.items() for tool in convert("toolbench", {"tool_name": name, "api_list": apis}) for fn in tool.functions]
    return [*functions, FINISH_FUNCTION]


def from_train_messages(answer: dict[str, Any], tools: list[Function], dialogue_id: str) -> Dialogue | None:
    """The winning path as a Dialogue; None when the answer releases no training messages.

    Raises :class:`Malformed` for a path that cannot be converted (an unknown role, a call
    without a name)."""
    paths = answer["answer_generation"].get("train_messages")
    if not paths:
        return None
    if not isinstance(paths, list) or not isinstance(paths[-1], list):
        raise Malformed(WRONG_TYPE, "train_messages must be a list of message lists")
    messages: list[Message] = []
    open_calls: list[ToolCall] = []
    serial = 0
    for i, raw in enumerate(paths[-1]):
        if not isinstance(raw, dict):
            raise Malformed(WRONG_TYPE, f"train_messages[-1][{i}] must be an object")
        role = raw.get("role")
        if role in ("system", "user"):
            messages.append(Message(role=role, content=raw.get("content")))
        elif role == "assistant":
            calls = None
            function_call = raw.get("function_call")
            if function_call:
                if not isinstance(function_call, dict) or not isinstance(function_call.get("name"), str):
                    raise Malformed(MISSING_FIELD, f"train_messages[-1][{i}].function_call needs a name")
                serial += 1
                arguments = function_call.get("arguments")
                call = ToolCall(id=f"call_{serial}", name=function_call["name"], arguments="" if arguments is None else json_text(arguments))
                calls = [call]
                open_calls.append(call)
            messages.append(Message(role="assistant", content=raw.get("content"), tool_calls=calls))
        elif role == "function":
            call_id = open_calls.pop().id if open_calls else None
            messages.append(Message(role="tool", tool_call_id=call_id, name=raw.get("name"), content=raw.get("content")))
        else:
            raise Malformed(UNKNOWN_ROLE, f"train_messages[-1][{i}]: unknown role {role!r}")
    messages = closed_finish(messages)
    return Dialogue(id=dialogue_id, task_id=dialogue_id, tools=tools, messages=messages, recipe=NAME, mode=derive_mode(messages))


def _leaf_paths(node: dict[str, Any], path: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    children = node.get("children") or []
    if not children:
        yield path
    for child in children:
        yield from _leaf_paths(child, [*path, child])


def from_tree(answer: dict[str, Any], tools: list[Function], dialogue_id: str) -> list[tuple[Dialogue, str | None]]:
    """(dialogue, Finish's return_type or None) for every root-to-leaf path of the DFSDT tree."""
    query = answer["answer_generation"].get("query", "")
    out = []
    for n, path in enumerate(_leaf_paths(answer["tree"]["tree"], [])):
        messages = [Message(role="system", content=SYSTEM), Message(role="user", content=query)]
        thought: str | None = None
        action: str | None = None
        serial = 0
        for node in path:
            kind = node.get("node_type")
            if kind == "Thought":
                thought = node.get("description") or None
            elif kind == "Action":
                action = node.get("description")
            elif kind == "Action Input" and action is not None:
                serial += 1
                call = ToolCall(id=f"call_{serial}", name=action, arguments=node.get("description") or "")
                messages.append(Message(role="assistant", content=thought, tool_calls=[call]))
                messages.append(Message(role="tool", tool_call_id=call.id, name=action, content=node.get("observation") or ""))
                thought, action = None, None
        calls = [c for m in messages for c in m.tool_calls or []]
        return_type = str(finish_arguments(calls[-1].arguments).get("return_type")) if calls and calls[-1].name == "Finish" else None
        if return_type == "give_answer":
            messages.append(Message(role="assistant", content=str(finish_arguments(calls[-1].arguments).get("final_answer", ""))))
        out.append((Dialogue(id=f"{dialogue_id}/tree{n}", task_id=dialogue_id, tools=tools, messages=messages, recipe=NAME,
                             mode=derive_mode(messages)), return_type))
    return out


def load(shared_data: Path) -> list[tuple[str, dict[str, Any], list[Function]]]:
    """(name, answer, tools) of ToolBench's released example answers as laid out under `shared_data`
    (``toolbench/answer/G1_answer/*.json``, queries in ``toolbench/instruction/G1_query.json``)."""
    queries = json.loads(read_text(shared_data / "toolbench/instruction/G1_query.json"))
    out = []
    for path in sorted((shared_data / "toolbench/answer/G1_answer").glob("*.json")):
        answer = json.loads(read_text(path))
        out.append((path.stem, answer, tools_of(answer, queries)))
    return out


def answer_files(path: Path) -> list[Path]:
    """The answer files read for `path`: the file itself; a folder's ``*.json`` files; for a folder
    without any, those of the folders in its ``answer/`` folder (an export's folder, whose
    ``toolllama/`` holds no answers), else of its subfolders (ToolBench's ``data/answer/``, whose
    ``G1_answer/``… hold them, or an export's ``answer/``)."""
    if not path.is_dir():
        return [path]
    answers = path / ANSWER_FOLDER
    for pattern, folder in (("*.json", path), ("*/*.json", answers), ("*/*.json", path)):
        files = sorted(file for file in folder.glob(pattern) if file.is_file())
        if files:
            return files
    raise UnreadableFile(f"{path}: no ToolBench answer files (*.json) in the folder, its subfolders or its {ANSWER_FOLDER}/ folder")


def _answer(file: Path) -> Any:
    """The parsed content of an answer file (:func:`~toolfactory.formats.base.read_text`)."""
    return standard_json(read_text(file))


def _read_one(index: int, file: Path, queries: list[dict[str, Any]], where: str) -> Dialogue | FormatError:
    try:
        answer = _answer(file)
    except OSError as exc:
        return FormatError(index, RECORD_NOT_JSON, f"cannot read the file: {exc}", where)
    except Exception as exc:  # noqa: BLE001 - not UTF-8, not JSON, NaN, too deep, a value Python refuses
        return text_error(index, where, exc)
    if not isinstance(answer, dict):
        return FormatError(index, RECORD_NOT_OBJECT, f"an answer file holds a JSON object, not {type(answer).__name__}", where)
    generation = answer.get("answer_generation")
    if not isinstance(generation, dict):
        return FormatError(index, MISSING_FIELD, "no 'answer_generation' object", where)

    def build() -> Dialogue:
        try:
            tools = tools_of(answer, queries)
        except MalformedTool as exc:
            raise Malformed(BAD_TOOL, str(exc)) from None
        if not tools:
            raise Malformed(MISSING_FIELD, "no function list (answer_generation.function) and no matching query")
        dialogue = from_train_messages(answer, tools, file.stem)
        if dialogue is None:
            raise Malformed(NO_TRAIN_MESSAGES, f"no train_messages (valid_data={generation.get('valid_data')!r}): "
                                               "the search released no answer path")
        return dialogue

    return guarded(index, where, build)


PATHS = ("released", "all")
ANSWER_FOLDER = "answer"  # an export's folder of answer folders, one per split


def _where(path: Path, file: Path) -> str:
    return file.relative_to(path).as_posix() if path.is_dir() else file.name


def _tree_paths(index: int, file: Path, queries: list[dict[str, Any]], where: str) -> list[Dialogue | FormatError]:
    """Every root-to-leaf path of the file's DFSDT tree (each path holding an integer longer than
    Python converts is that path's error), or one FormatError."""
    try:
        answer = _answer(file)
        if not isinstance(answer, dict) or not isinstance(answer.get("answer_generation"), dict):
            return [FormatError(index, MISSING_FIELD, "no 'answer_generation' object", where)]
        if not isinstance((answer.get("tree") or {}).get("tree"), dict):
            return [FormatError(index, MISSING_FIELD, "no search tree ('tree.tree')", where)]
        tools = tools_of(answer, queries)
        if not tools:
            return [FormatError(index, MISSING_FIELD, "no function list (answer_generation.function) and no matching query", where)]
        found = from_tree(answer, tools, file.stem)
        return [guarded(index + n, where, lambda: dialogue) for n, (dialogue, _) in enumerate(found)]  # noqa: B023 - called at once
    except json.JSONDecodeError as exc:
        return [FormatError(index, RECORD_NOT_JSON, f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", where)]
    except (OSError, UnicodeDecodeError) as exc:
        return [FormatError(index, RECORD_NOT_JSON, f"cannot read the file: {exc}", where)]
    except RecursionError:
        return [FormatError(index, RECORD_TOO_DEEP, TOO_DEEP_MESSAGE, where)]
    except (Malformed, MalformedTool) as exc:
        return [FormatError(index, getattr(exc, "reason", BAD_TOOL), str(exc), where)]
    except (ValidationError, AttributeError, TypeError) as exc:
        return [FormatError(index, INVALID_RECORD, f"the tree cannot be converted: {exc}"[:300], where)]
    except Exception as exc:  # noqa: BLE001 - not UTF-8, NaN, a value Python refuses: this file's error
        return [text_error(index, where, exc)]


def read(path: str | Path, queries: str | Path | None = None, paths: str = "released") -> Iterator[Dialogue | FormatError]:
    """One Dialogue (or FormatError) per answer file; `queries` is an optional ToolBench query file
    (``G1_query.json``) for answer files without a function list. With `paths` ``all``, every
    root-to-leaf path of each file's DFSDT tree is a record (id ``<file>/tree<n>``): the paths that
    gave up or were abandoned too, where most of ToolBench's hallucinated names are."""
    if paths not in PATHS:
        raise UnreadableFile(f"--paths must be one of {', '.join(PATHS)}, not {paths!r}")
    query_list = json.loads(read_text(Path(queries))) if queries is not None else []
    path = require_path(path)
    files = answer_files(path)
    if paths == "all":
        index = 0
        for file in files:
            for item in _tree_paths(index, file, query_list, _where(path, file)):
                if not path.is_dir() and isinstance(item, FormatError) and item.reason == RECORD_NOT_JSON:
                    raise UnreadableFile(f"{path}: {item.message}")
                yield item
                index += 1
        return
    for index, file in enumerate(files):
        item = _read_one(index, file, query_list, _where(path, file))
        if not path.is_dir() and isinstance(item, FormatError) and item.reason == RECORD_NOT_JSON:
            # One file that is not JSON at all is an unreadable input, as in every other format;
            # in a folder it is one bad answer file among the others.
            raise UnreadableFile(f"{path}: {item.message}")
        yield item
