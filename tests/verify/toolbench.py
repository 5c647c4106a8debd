"""Conversion of ToolBench's released DFSDT answers (ToolLLM) into our Dialogue shape, for tests.

Two sources per answer file:

* ``answer_generation.train_messages``: the list of training prefixes of the winning path; the
  last (longest) one is the whole path. Roles system/user/assistant/function; an assistant
  ``function_call {name, arguments}`` becomes a :class:`ToolCall` with a synthesized id
  (``call_<n>``), and each ``function`` message a tool message answering the latest unanswered
  call. The path ends with the ``Finish`` call, which ToolBench trains on but does not answer;
  the converter answers it with the observation ToolBench's environment gives
  (``{"response":"successfully giving the final answer."}``, as recorded in the DFSDT tree) and,
  for ``give_answer``, closes with its ``final_answer`` as the assistant's answer: the only part
  ToolLLM shows the user.
* ``tree``: the DFSDT search tree. Every root-to-leaf path is converted too (Thought ->
  assistant content, Action + Action Input -> call, observation -> tool message), which gives
  the paths that *gave up* (``give_up_and_restart``) or were abandoned as real dialogues.

Tools: the answer's ``function`` list when present, else the query file's ``api_list`` (matched
by query text, converted with the project's ToolBench importer) plus ToolLLM's ``Finish``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from toolfactory.models import Dialogue, Function, Message, ToolCall
from toolfactory.stages.tools.importers import convert
from toolfactory.stages.verify.corpus import FINISH_ANSWERED, FINISH_FUNCTION

SYSTEM = "You are AutoGPT, you can use many tools(functions) to do the following task."


def tools_of(answer: dict[str, Any], queries: list[dict[str, Any]]) -> list[Function]:
    listed = answer["answer_generation"].get("function")
    if listed:
        return [Function(name=f["name"], description=f.get("description", ""), parameters=f.get("parameters") or {"type": "object", "properties": {}}) for f in listed]
    query = answer["answer_generation"].get("query", "").strip()
    match = next((q for q in queries if q["query"].strip() == query), None)
    if match is None:
        return []
    by_tool: dict[str, list[dict[str, Any]]] = {}
    for api in match["api_list"]:
        by_tool.setdefault(api["tool_name"], []).append({**api, "name": api["api_name"], "description": api.get("api_description", "")})
    functions = [fn for name, apis in by_tool.items() for tool in convert("toolbench", {"tool_name": name, "api_list": apis}) for fn in tool.functions]
    return [*functions, FINISH_FUNCTION]


def _finish_arguments(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def from_train_messages(answer: dict[str, Any], tools: list[Function], dialogue_id: str) -> Dialogue | None:
    paths = answer["answer_generation"].get("train_messages")
    if not paths:
        return None
    messages: list[Message] = []
    open_calls: list[ToolCall] = []
    serial = 0
    for raw in paths[-1]:
        role = raw["role"]
        if role in ("system", "user"):
            messages.append(Message(role=role, content=raw.get("content")))
        elif role == "assistant":
            calls = None
            if raw.get("function_call"):
                serial += 1
                call = ToolCall(id=f"call_{serial}", name=raw["function_call"]["name"], arguments=raw["function_call"].get("arguments") or "")
                calls = [call]
                open_calls.append(call)
            messages.append(Message(role="assistant", content=raw.get("content"), tool_calls=calls))
        elif role == "function":
            call_id = open_calls.pop().id if open_calls else None
            messages.append(Message(role="tool", tool_call_id=call_id, name=raw.get("name"), content=raw.get("content")))
    last = messages[-1] if messages else None
    if last is not None and last.tool_calls and last.tool_calls[0].name == "Finish":
        finish = last.tool_calls[0]
        messages.append(Message(role="tool", tool_call_id=finish.id, name="Finish", content=FINISH_ANSWERED))
        arguments = _finish_arguments(finish.arguments)
        if arguments.get("return_type") == "give_answer":
            messages.append(Message(role="assistant", content=str(arguments.get("final_answer", ""))))
    return Dialogue(id=dialogue_id, task_id=dialogue_id, tools=tools, messages=messages, recipe="toolbench", mode="multiple")


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
        return_type = str(_finish_arguments(calls[-1].arguments).get("return_type")) if calls and calls[-1].name == "Finish" else None
        if return_type == "give_answer":
            messages.append(Message(role="assistant", content=str(_finish_arguments(calls[-1].arguments).get("final_answer", ""))))
        out.append((Dialogue(id=f"{dialogue_id}/tree{n}", task_id=dialogue_id, tools=tools, messages=messages, recipe="toolbench", mode="multiple"), return_type))
    return out


def load(shared_data: Path) -> list[tuple[str, dict[str, Any], list[Function]]]:
    queries = json.loads((shared_data / "toolbench/instruction/G1_query.json").read_text())
    out = []
    for path in sorted((shared_data / "toolbench/answer/G1_answer").glob("*.json")):
        answer = json.loads(path.read_text())
        out.append((path.stem, answer, tools_of(answer, queries)))
    return out
