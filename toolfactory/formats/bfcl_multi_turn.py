"""BFCL's multi-turn trajectories (``BFCL_v4_multi_turn_*.json`` with its ``possible_answer``) as
dialogues whose calls really ran, for the verifier's execution layer.

A BFCL multi-turn entry holds, per turn, the user's messages (``question``), the environments it
runs on (``involved_classes``, each in its state from ``initial_config``) and, in the possible
answer file of the same name (``possible_answer/<name>`` next to it, as BFCL ships it; or a
``ground_truth`` field on the entry), the ground-truth calls of each turn as Python call text
(``mv(source='a.pdf', destination='temp')``). As in BFCL's executor, a class without
``_load_scenario`` (the stateless MathAPI) starts without its ``initial_config``.

Each entry becomes one Dialogue: per turn, the user's messages, then each ground-truth call as an
assistant tool call (positional arguments named after the method's signature) followed by the
tool message holding its **real** result: the calls are executed, in order, on fresh sessions of
BFCL's own environments (the ``preset`` Python environments, :mod:`toolfactory.executable.python_env`),
one per involved class. The offered functions are the involved classes' function docs, without
the entry's ``excluded_function``. ``generation["execution"]`` records what ran, the states the
sessions were left in, the environments (preset and initial state per class, so that the
verifier can replay the record without a run's configuration), the ``target_state``: the
state the ground truth leaves, which a replay must reach, and ``target_turn_states``: the state
of every class after the calls that answer each user message (after each turn, which BFCL's
checker compares), which the replay compares too. BFCL's environments are deterministic
(the results depend on the arguments and the state only), so they are declared so.

BFCL's turns end with the calls (it keeps no assistant text), so the rules about a final answer
do not apply (:data:`NOT_APPLICABLE_REASONS`). Reading needs the ``bfcl-eval`` package (installed
without its dependencies); each record starts one runner process per involved class.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
from collections.abc import Iterator
from contextlib import AsyncExitStack
from functools import cache
from pathlib import Path
from typing import Any

from toolfactory.executable.python_env import PythonEnvironment, doc_function, read_function_docs
from toolfactory.executable.runner import load_class
from toolfactory.executable.settings import BFCL_PRESETS, PythonEnvironmentSettings
from toolfactory.executable.session import Session
from toolfactory.formats.base import (
    MISSING_FIELD,
    RECORD_UNREADABLE,
    WRONG_TYPE,
    FormatError,
    Malformed,
    build_dialogue,
    long_integer,
    read_files,
    read_json_records,
    read_text,
)
from toolfactory.models import Dialogue, Function, Message, ToolCall

NAME = "bfcl_multi_turn"
NOT_APPLICABLE_REASONS: dict[str, str] = {
    "dialogue_no_final_answer": "BFCL's multi-turn turns end with the calls: it keeps no assistant text",
}
NOT_APPLICABLE: frozenset[str] = frozenset(NOT_APPLICABLE_REASONS)
ANSWERS_FOLDER = "possible_answer"

Call = tuple[str, dict[str, Any]]


@cache
def settings_of(class_name: str) -> PythonEnvironmentSettings:
    """The preset environment of BFCL's class `class_name` (its initial state set per record)."""
    if class_name not in BFCL_PRESETS:
        raise Malformed(WRONG_TYPE, f"involved_classes: {class_name!r} is not one of BFCL's environments ({', '.join(BFCL_PRESETS)})")
    return PythonEnvironmentSettings(name=class_name, preset=class_name, deterministic=True)


@cache
def functions_of(class_name: str) -> tuple[Function, ...]:
    """The function docs of BFCL's class `class_name` as canonical functions."""
    return tuple(doc_function(doc) for doc in read_function_docs(settings_of(class_name).resolved_function_docs() or ""))


@cache
def parameters_of(class_name: str) -> dict[str, list[str]]:
    """Each public method's parameter names in order (for positional arguments)."""
    cls = load_class(settings_of(class_name).resolved_class_path())
    return {name: list(inspect.signature(member).parameters)[1:]
            for name, member in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")}


def initial_state(class_name: str, config: dict[str, Any]) -> dict[str, Any]:
    """The entry's initial state of `class_name`; none for a class without ``_load_scenario`` (BFCL's
    stateless MathAPI), whose configuration BFCL's own executor ignores."""
    cls = load_class(settings_of(class_name).resolved_class_path())
    return dict(config.get(class_name) or {}) if hasattr(cls, "_load_scenario") else {}


def parse_call(text: str, parameters: dict[str, list[str]]) -> Call:
    """BFCL's call text (``f(1, b='x')``) as (name, arguments by name)."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ValueError("not a call of a function by name")
        name = node.func.id
        arguments = {str(kw.arg): ast.literal_eval(kw.value) for kw in node.keywords}
        names = parameters.get(name, [])
        if len(node.args) > len(names):
            raise ValueError(f"{len(node.args)} positional arguments for {name}'s {len(names)} parameters")
        arguments.update({names[i]: ast.literal_eval(arg) for i, arg in enumerate(node.args)})
    except (SyntaxError, ValueError) as exc:
        if long_integer(exc) is not None:
            raise Malformed(RECORD_UNREADABLE, f"ground_truth: {long_integer(exc)}") from None
        raise Malformed(WRONG_TYPE, f"ground_truth: cannot read the call {text[:120]!r}: {exc}") from None
    return name, arguments


def owners(classes: list[str]) -> dict[str, str]:
    """function name -> the involved class whose method it is (a later class wins, as in BFCL's executor)."""
    return {name: cls for cls in classes for name in parameters_of(cls)}


def ground_truth_calls(entry: dict[str, Any]) -> list[list[Call]]:
    """The entry's ground truth, per turn, as parsed calls."""
    turns = entry.get("ground_truth")
    if not isinstance(turns, list):
        raise Malformed(MISSING_FIELD, "ground_truth: absent (no possible_answer file next to the input, nor a field)")
    classes = list(entry.get("involved_classes") or [])
    parameters = {name: params for cls in classes for name, params in parameters_of(cls).items()}
    return [[parse_call(str(text), parameters) for text in turn] for turn in turns]


async def execute(entry: dict[str, Any], turns: list[list[Call]]) -> Dialogue:
    """The dialogue of `turns` over `entry`'s environments, each call executed for real (module doc)."""
    classes = entry.get("involved_classes")
    if not isinstance(classes, list) or not classes:
        raise Malformed(MISSING_FIELD, "involved_classes: absent or empty")
    questions = entry.get("question")
    if not isinstance(questions, list) or len(questions) != len(turns):
        raise Malformed(WRONG_TYPE, f"question: expected one list of messages per ground-truth turn ({len(turns)})")
    config = entry.get("initial_config") or {}
    states = {cls: initial_state(cls, config) for cls in classes}
    environments = {cls: {"preset": cls, "initial_state": states[cls], "deterministic": True} for cls in classes}
    owner = owners(classes)
    excluded = set(entry.get("excluded_function") or [])
    tools = [fn for cls in classes for fn in functions_of(cls) if fn.name not in excluded]
    messages: list[Message] = []
    executed: list[dict[str, Any]] = []
    turn_states: list[dict[str, Any]] = []
    async with AsyncExitStack() as stack:
        sessions: dict[str, Session] = {}
        for t, (question, calls) in enumerate(zip(questions, turns)):
            # BFCL checks the state after every turn; the replay compares it after the calls that
            # answer each user message (the last before them): taken as the next one comes.
            for m in question:
                if isinstance(m, dict):
                    if any(said.role == "user" for said in messages):
                        turn_states.append(await _states(stack, sessions, classes, states))
                    messages.append(Message(role="user", content=str(m.get("content", ""))))
            for i, (name, arguments) in enumerate(calls):
                cls = owner.get(name)
                if cls is None:
                    raise Malformed(WRONG_TYPE, f"ground_truth[{t}][{i}]: {name} is no function of {', '.join(classes)}")
                if cls not in sessions:
                    env = PythonEnvironment(settings_of(cls).model_copy(update={"initial_state": states[cls]}))
                    sessions[cls] = await stack.enter_async_context(env.session())
                result = await sessions[cls].call(name, arguments)
                call = ToolCall(id=f"call_{t}_{i}", name=name, arguments=json.dumps(arguments, ensure_ascii=False))
                messages += [Message(role="assistant", tool_calls=[call]),
                             Message(role="tool", tool_call_id=call.id, name=name, content=result.content)]
                executed.append({"source": cls, "name": name, "arguments": call.arguments, "is_error": result.is_error,
                                 "truncated": result.truncated})
        final = await _states(stack, sessions, classes, states)
    if any(said.role == "user" for said in messages):
        turn_states.append(final)
    dialogue = build_dialogue(NAME, entry, tools, messages)
    dialogue.generation = {"execution": {"calls": executed, "states": final, "environments": environments,
                                         "target_state": json.loads(json.dumps(final)),
                                         "target_turn_states": json.loads(json.dumps(turn_states))}}
    return dialogue


async def _states(stack: AsyncExitStack, sessions: dict[str, Session], classes: list[str],
                  initial: dict[str, Any]) -> dict[str, Any]:
    """The state of every class, by name (a class no call touched yet: a fresh session of it,
    in its initial state)."""
    for cls in classes:
        if cls not in sessions:
            env = PythonEnvironment(settings_of(cls).model_copy(update={"initial_state": initial[cls]}))
            sessions[cls] = await stack.enter_async_context(env.session())
    return {cls: await session.state() for cls, session in sorted(sessions.items())}


def to_dialogue(entry: Any) -> Dialogue:
    """One BFCL multi-turn entry (with its ``ground_truth``) as an executed dialogue."""
    if not isinstance(entry, dict):
        raise Malformed(WRONG_TYPE, "a BFCL entry is a JSON object")
    return asyncio.run(execute(entry, ground_truth_calls(entry)))


def answers_next_to(path: Path) -> dict[str, list[Any]]:
    """The possible answers BFCL ships next to its question file, by entry id ({} when absent)."""
    found = path.parent / ANSWERS_FOLDER / path.name
    if not found.is_file():
        return {}
    answers: dict[str, list[Any]] = {}
    for line in read_text(found).splitlines():
        if line.strip():
            item = json.loads(line)
            answers[str(item.get("id"))] = item.get("ground_truth")
    return answers


FILES = ("*multi_turn*.json",)  # BFCL's multi-turn categories in a folder that holds the others too


def read(path: str | Path) -> Iterator[Dialogue | FormatError]:
    """The entries of a BFCL multi-turn file, or of each multi-turn file of a folder (BFCL's
    ``data/``, an export's split folder), each with the possible answers next to it."""
    return read_files(path, FILES, _read_file)


def _read_file(path: Path) -> Iterator[Dialogue | FormatError]:
    answers = answers_next_to(path) if path.is_file() else {}

    def convert(entry: Any) -> Dialogue:
        if isinstance(entry, dict) and "ground_truth" not in entry and str(entry.get("id")) in answers:
            entry = {**entry, "ground_truth": answers[str(entry.get("id"))]}
        return to_dialogue(entry)

    return read_json_records(path, convert)
