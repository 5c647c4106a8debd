"""ToolAlpaca tool files with golden answers (``eval_simulated.json``, ``eval_real.json``).

The file is a JSON list of tools ``{Name, Documentation, Instructions, Golden_Answers, ...}`` (a
folder: each of its ``*.json`` files, an export's splits);
``Golden_Answers[k]`` is the list of steps ``{Action, Action_Input}`` that solves
``Instructions[k]``. One record (one Dialogue) per (instruction, golden answer) pair, id
``<Name>/<k>``, numbered across the file:

* tools: every operation of the OpenAPI ``Documentation`` (a JSON string, or an object) through
  :func:`~toolfactory.definitions.convert.functions_from_openapi`, named as the file's
  ``Function_Projection`` (``{name: [path, method]}``) says: that is the name ToolAlpaca's agent
  and golden answers call, also for an operation without an ``operationId`` (which the importer
  alone would name after its method and path, ``get__current``);
* messages: the instruction as the user turn, then one assistant turn per step with one call
  (``call_1``, ``call_2``, ...) to ``Action`` with ``Action_Input`` as its arguments: the text as the
  file has it (golden inputs chain steps with templates such as
  ``{"animeId": ${animeId from searchAnime}}``, which are not JSON, for ``call_arguments_not_json``
  to report), an object dumped to JSON. ``Action`` is kept as is, also when it is no operation of
  the tool (``getDetails``, ToolAlpaca's "ask the user"). No tool responses, no final answer
  (unless the entry has training ``Instances``, below).

A tool whose Documentation cannot be converted yields one FormatError per golden answer (so the
record count is always the sum of ``len(Golden_Answers)``); a tool without ``Golden_Answers``
(a training file, whose tools carry ``Instances`` instead) yields one FormatError. A value JSON or
Python refuses (NaN, an integer longer than Python converts) fails only the records it is in:
all of its tool's golden answers when it is in the tool, else the one golden answer.

An entry that also holds training ``Instances`` (ToolAlpaca's ``{input, output,
intermediate_steps}``, which the ``toolalpaca`` export writes beside the golden answers) gives
each record what its instance adds when the instance's steps are the golden answer's (same
actions and inputs, in order): each step's observation as the call's tool response, and
``output`` as the final answer. A record then holds the API's errors and what followed them,
so a call answered with an error and made again correctly is told apart from a wrong call
(``--policy toolalpaca`` keeps that recovery, as the factory does). An instance whose steps
differ is not used: the golden answer alone is the record.
Rules that do not apply to this calls-only shape: see :data:`NOT_APPLICABLE_REASONS`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from pydantic import ValidationError

from toolfactory.formats.base import (
    BAD_TOOL,
    CALLS_ONLY,
    INVALID_RECORD,
    MISSING_FIELD,
    RECORD_NOT_OBJECT,
    WRONG_TYPE,
    RECORD_UNREADABLE,
    FormatError,
    Malformed,
    UnreadableFile,
    derive_mode,
    guarded,
    json_text,
    load_json_file,
    read_files,
    refused_in,
    unreadable,
    validation_message,
)
from toolfactory.models import Dialogue, Function, Message, ToolCall
from toolfactory.definitions.convert import functions_from_openapi

NAME = "toolalpaca"
NOT_APPLICABLE_REASONS: dict[str, str] = dict(CALLS_ONLY)
NOT_APPLICABLE: frozenset[str] = frozenset(NOT_APPLICABLE_REASONS)


def functions_of(tool: dict[str, Any]) -> list[Function]:
    documentation = tool.get("Documentation")
    if isinstance(documentation, str):
        try:
            documentation = json.loads(documentation)
        except json.JSONDecodeError as exc:
            raise Malformed(BAD_TOOL, f"Documentation is not JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(documentation, dict):
        raise Malformed(BAD_TOOL, "Documentation must be an OpenAPI document")
    try:
        functions = functions_from_openapi(documentation)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise Malformed(BAD_TOOL, f"Documentation cannot be converted: {type(exc).__name__}: {exc}") from None
    if not functions:
        raise Malformed(BAD_TOOL, "Documentation declares no operation")
    return projected(functions, tool.get("Function_Projection"))


def projected(functions: list[Function], projection: Any) -> list[Function]:
    """`functions` renamed by ToolAlpaca's ``Function_Projection`` ({name: [path, method]})."""
    if not isinstance(projection, dict):
        return functions
    names = {
        (str(target[0]), str(target[1]).upper()): str(name)
        for name, target in projection.items()
        if isinstance(target, (list, tuple)) and len(target) == 2
    }
    return [fn.model_copy(update={"name": names.get((fn.path or "", fn.method or ""), fn.name)}) for fn in functions]


def observed(golden: list[Any], instance: Any) -> tuple[list[str], str | None] | None:
    """(observation of each step, final answer or None) from a training instance whose steps are
    `golden`'s; None when there is no such instance."""
    if not isinstance(instance, dict) or not isinstance(instance.get("intermediate_steps"), list):
        return None
    steps = instance["intermediate_steps"]
    if len(steps) != len(golden):
        return None
    observations = []
    for step, gold in zip(steps, golden):
        if not (isinstance(step, list) and len(step) == 2 and isinstance(step[0], list) and len(step[0]) >= 2):
            return None
        if step[0][0] != gold.get("Action") or json_text(step[0][1]) != json_text(gold.get("Action_Input")):
            return None
        observations.append("" if step[1] is None else json_text(step[1]))
    output = instance.get("output")
    return observations, output if isinstance(output, str) and output.strip() else None


def to_dialogue(dialogue_id: str, instruction: Any, golden: Any, functions: list[Function], instance: Any = None) -> Dialogue:
    if not isinstance(instruction, str):
        raise Malformed(MISSING_FIELD if instruction is None else WRONG_TYPE, "the instruction must be a string")
    if not isinstance(golden, list):
        raise Malformed(WRONG_TYPE, f"a golden answer is a list of steps, not {type(golden).__name__}")
    messages = [Message(role="user", content=instruction)]
    for s, step in enumerate(golden):
        if not isinstance(step, dict) or not isinstance(step.get("Action"), str):
            raise Malformed(MISSING_FIELD, f"step {s} has no Action")
    seen = observed(golden, instance)
    for s, step in enumerate(golden):
        arguments = step.get("Action_Input")
        call = ToolCall(id=f"call_{s + 1}", name=step["Action"], arguments="" if arguments is None else json_text(arguments))
        messages.append(Message(role="assistant", tool_calls=[call]))
        if seen is not None:
            messages.append(Message(role="tool", tool_call_id=call.id, name=call.name, content=seen[0][s]))
    if seen is not None and seen[1] is not None:
        messages.append(Message(role="assistant", content=seen[1]))
    try:
        return Dialogue(id=dialogue_id, task_id=dialogue_id, tools=functions, messages=messages, recipe=NAME, mode=derive_mode(messages))
    except ValidationError as exc:
        raise Malformed(INVALID_RECORD, validation_message(exc)) from None


def _tools(path: Path) -> list[Any]:
    tools = load_json_file(path)
    if not isinstance(tools, list):
        raise UnreadableFile(f"{path}: a ToolAlpaca file is a JSON list of tools")
    return tools


def read(path: str | Path) -> Iterator[Dialogue | FormatError]:
    """The records of a ToolAlpaca file, or of each ``*.json`` file of a folder (an export's
    splits), numbered across files."""
    return read_files(path, ("*.json",), _read_file)


def _read_file(path: Path) -> Iterator[Dialogue | FormatError]:
    index = 0
    for t, tool in enumerate(_tools(path)):
        if not isinstance(tool, dict):
            yield FormatError(index, RECORD_NOT_OBJECT, f"tool {t} is not an object", f"[{t}]")
            index += 1
            continue
        name = str(tool.get("Name") or f"tool{t}")
        goldens = tool.get("Golden_Answers")
        if not isinstance(goldens, list) or not goldens:
            yield FormatError(index, MISSING_FIELD, "no Golden_Answers (a training file's Instances are not read)", name)
            index += 1
            continue
        instructions = tool.get("Instructions") if isinstance(tool.get("Instructions"), list) else []
        instances = tool.get("Instances") if isinstance(tool.get("Instances"), list) else []
        functions: list[Function] | Malformed
        refused = refused_in({key: value for key, value in tool.items() if key not in ("Golden_Answers", "Instructions", "Instances")})
        try:
            functions = Malformed(refused.reason, refused.message) if refused else functions_of(tool)
        except Malformed as exc:
            functions = exc
        except Exception as exc:  # noqa: BLE001 - this tool's records fail, the other tools' are read
            functions = Malformed(RECORD_UNREADABLE, unreadable(exc))
        for k, golden in enumerate(goldens):
            where = f"{name}/Golden_Answers[{k}]"
            instruction = instructions[k] if k < len(instructions) else None
            instance = instances[k] if k < len(instances) else None
            problem = functions if isinstance(functions, Malformed) else refused_in([instruction, golden, instance])
            if problem is not None:
                yield FormatError(index, problem.reason, problem.message, where)
            else:
                yield guarded(index, where, lambda: to_dialogue(f"{name}/{k}", instruction, golden, functions, instance))  # type: ignore[arg-type]
            index += 1
