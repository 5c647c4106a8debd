"""Function calling written in the prompt instead of `tools`, as a model reads it.

A request without `tools` whose system prompt declares a call format (``Function call format:
xml``) and describes functions in a format :mod:`toolfactory.render` can read is a text-mode
request. A model with no tool interface acts on such a prompt by writing calls as text; so the
simulator reads the functions and the earlier calls out of the prompt, decides the turn as for
native tools, and writes the calls it makes in the declared format (ToolACE §2.2.2's formats).
"""

from __future__ import annotations

import json
import re
from typing import Any

from toolfactory.models import ToolCall
from toolfactory.render import PARSABLE_TOOL_FORMATS, RenderError, parse_system_prompt, parse_turn, render_turn
from toolfactory.render.dialogue import CALL_FORMAT_STATEMENTS, RESULT_WRAPPERS
from toolfactory.stages import prompt_markers as said

from .functions import FunctionSpec
from .seeding import sub_hash

_DECLARATION = said.CALL_FORMAT_DECLARATION


def declared_format(body: dict[str, Any]) -> str | None:
    """The text call format a tool-less request's system prompt declares, if any."""
    if body.get("tools"):
        return None
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[0], dict):
        return None
    system = messages[0].get("content")
    if messages[0].get("role") != "system" or not isinstance(system, str) or _DECLARATION not in system:
        return None
    fmt = system.split(_DECLARATION, 1)[1].split("\n", 1)[0].strip()
    return fmt if fmt in CALL_FORMAT_STATEMENTS and fmt != "openai" else None


def structured_body(body: dict[str, Any], fmt: str) -> dict[str, Any] | None:
    """`body` as a native tool request (functions as `tools`, text calls as `tool_calls`), or
    None when the system prompt's functions cannot be read."""
    system = body["messages"][0]["content"]
    functions = None
    for tool_format in PARSABLE_TOOL_FORMATS:
        try:
            functions = parse_system_prompt(system, tool_format, fmt).functions
        except (RenderError, ValueError):
            continue
        if functions:
            break
    if not functions:
        return None
    messages: list[dict[str, Any]] = []
    before, after = RESULT_WRAPPERS.get(fmt, ("", ""))
    for position, message in enumerate(body["messages"]):
        if isinstance(message, dict) and message.get("role") == "tool" and isinstance(message.get("content"), str):
            # A result comes back wrapped as the format's statement says; the model reads inside.
            text = message["content"]
            if text.startswith(before) and text.endswith(after) and len(text) >= len(before) + len(after):
                text = text[len(before): len(text) - len(after)]
            messages.append({**message, "content": text})
            continue
        if not isinstance(message, dict) or message.get("role") != "assistant" or not isinstance(message.get("content"), str):
            messages.append(message)
            continue
        try:
            content, calls = parse_turn(message["content"], fmt)
        except RenderError:
            content, calls = message["content"], []
        wire = [{"id": f"text_{position}_{i}", "type": "function",
                 "function": {"name": c.name, "arguments": json.dumps(c.arguments)}} for i, c in enumerate(calls)]
        messages.append({"role": "assistant", "content": content, **({"tool_calls": wire} if wire else {})})
    return {**body, "messages": messages, "tools": [f.openai_tool() for f in functions]}


_ASKS_USER = re.compile(r"\bask(s|ing)?\b.*\buser\b", re.IGNORECASE | re.DOTALL)
_FINAL = said.REACT_FINAL_ANSWER


def system_text(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    first = messages[0] if messages and isinstance(messages[0], dict) else {}
    return first.get("content") if first.get("role") == "system" and isinstance(first.get("content"), str) else ""


def asks_user(spec: FunctionSpec) -> bool:
    """A function that asks the user a question (its description says so) and takes one text."""
    texts = [name for name, prop in spec.properties().items() if isinstance(prop, dict) and prop.get("type") == "string"]
    return bool(_ASKS_USER.search(spec.description)) and len(texts) == 1


def ask_with(spec: FunctionSpec, question: str, index: int, request_hash: str) -> tuple[dict[str, Any], str]:
    """The call that asks `question` through an ask-the-user function."""
    name = next(name for name, prop in spec.properties().items() if isinstance(prop, dict) and prop.get("type") == "string")
    arguments = json.dumps({name: question}, ensure_ascii=False)
    call = {"id": "call_" + sub_hash(request_hash, "ask", index)[:24], "type": "function",
            "function": {"name": spec.name, "arguments": arguments}}
    return {"role": "assistant", "content": None, "tool_calls": [call], "refusal": None}, arguments


def _thought(message: dict[str, Any]) -> str:
    """What a ReAct model thinks before its actions: which function it uses and why."""
    names = [c["function"]["name"] for c in message.get("tool_calls") or []]
    if not names:
        return "I now have the information needed to answer."
    return f"I should use {' and '.join(dict.fromkeys(names))} to get what the request needs."


def as_text(message: dict[str, Any], fmt: str, request_hash: str, system: str = "") -> dict[str, Any]:
    """An answer's native calls written as text in `fmt`. A ReAct prompt's model writes a Thought
    before its actions, and, when the prompt asks for a "Final Answer", ends with one."""
    calls = [ToolCall(id=sub_hash(request_hash, "text", i)[:8], name=c["function"]["name"], arguments=c["function"]["arguments"])
             for i, c in enumerate(message.get("tool_calls") or [])]
    react = fmt == "react"
    if not calls:
        if react and _FINAL in system and message.get("content"):
            return {**message, "content": f"Thought: {_thought(message)}\n{_FINAL}: {message['content']}"}
        return message
    content = message.get("content") or (_thought(message) if react else None)
    try:
        text = render_turn(content, calls, fmt)
    except RenderError:
        # A damaged call (fault injection: broken JSON arguments) cannot be written in the
        # format: write it as a model would, in the format's shape with the text it has.
        text = "\n".join(f'<tool_call>{{"name": "{c.name}", "arguments": {c.arguments}}}</tool_call>' for c in calls)
    return {"role": "assistant", "content": text}
