"""The user and tool-executor agents of the multi-agent simulation (ToolAlpaca §3.2, ToolACE §2.2).

* The user agent reads an assistant turn that did not call: it says whether the assistant asks
  for a missing value, declines or answers (a structured classification, so the decision never
  rests on how the turn is punctuated), and answers a question with concrete values (ToolAlpaca
  Fig. 9); in multi-turn dialogues it asks a follow-up request.
* The tool executor plays the API: given the function's documentation (and OpenAPI document when
  there is one) and the call, it returns a response that fits the `returns` schema (Fig. 11).
  An invalid call gets the error a real API would give, without an LLM call; a tool whose base
  URL is in `dialogues.http.allowlist` is called for real instead (:mod:`.http_executor`).
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator

from toolfactory.models import Function, Message, Tool, ToolCall
from toolfactory.stages.base import ShardContext
from toolfactory.stages.dialogues.http_executor import call_http, calls_for_real

TOOL_EXECUTOR_PROMPT = """\
You simulate an API. Process the request below according to the function's documentation and
return the response body that the API would send: it must follow the response schema, contain
realistic data (no placeholders) and, when no limit is given, at least three items in lists.
Function: {name}
Description: {description}
Parameters: {parameters}{documentation}
Request arguments: {arguments}"""

READ_TURN_PROMPT = """\
You are the user in the conversation below. Read the AI assistant's last message and say what it
does: it asks you for a value it needs before it can act, it declines (none of its functions can
serve the request), or it answers. If it asks, reply to its question with specific, direct values
(no placeholders), as the user would; otherwise leave the reply empty.
Conversation:
{history}"""

TURN_KINDS = ("asks_for_missing_value", "declines", "answers")

FOLLOW_UP_PROMPT = """\
You are the user in the conversation below with an AI assistant that can use tools. Write your
next request: it continues the conversation naturally (a related need, a change of plan, or a
detail about the previous answer), uses concrete values, and never names a function.
Conversation:
{history}"""

TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"message": {"type": "string", "minLength": 2}},
    "required": ["message"],
}


READ_TURN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"assistant_turn": {"enum": list(TURN_KINDS)}, "reply": {"type": "string"}},
    "required": ["assistant_turn", "reply"],
}


def history_text(messages: list[Message]) -> str:
    lines = []
    for message in messages:
        if message.role == "system":
            continue
        if message.tool_calls:
            calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
            lines.append(f"[assistant calls] {calls}")
        if message.content:
            lines.append(f"[{message.role}] {message.content}")
    return "\n".join(lines)


async def read_turn(messages: list[Message], ctx: ShardContext) -> tuple[str, str]:
    """(what the assistant's last turn does, one of :data:`TURN_KINDS`; the user's reply to it,
    meaningful when it asks)."""
    answer = await ctx.gateway.structured(
        "user", [{"role": "user", "content": READ_TURN_PROMPT.format(history=history_text(messages))}], READ_TURN_SCHEMA,
        name="assistant_turn",
    )
    return str(answer["assistant_turn"]), str(answer["reply"])


async def user_follow_up(messages: list[Message], ctx: ShardContext) -> str:
    """The user's next request in a multi-turn dialogue."""
    answer = await ctx.gateway.structured(
        "user", [{"role": "user", "content": FOLLOW_UP_PROMPT.format(history=history_text(messages))}], TEXT_SCHEMA, name="user_turn"
    )
    return str(answer["message"])


def call_error(function: Function | None, name: str, arguments: str) -> str | None:
    """The error a real API would return for this call, or None when the call is valid."""
    if function is None:
        return f"unknown function {name!r}"
    try:
        values = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return f"arguments are not valid JSON: {exc.msg}"
    error = next(iter(Draft202012Validator(function.parameters).iter_errors(values)), None)
    return None if error is None else f"invalid arguments: {error.message}"


def openapi_operation(tool: Tool | None, function: Function) -> str:
    """The function's operation in its tool's OpenAPI document, as prompt text ('' without one)."""
    if tool is None or not tool.openapi or not function.path or not function.method:
        return ""
    operation = ((tool.openapi.get("paths") or {}).get(function.path) or {}).get(function.method.lower())
    if not isinstance(operation, dict):
        return ""
    return f"\nOpenAPI operation ({function.method} {function.path}): {json.dumps(operation, ensure_ascii=False)[:4000]}"


async def execute(function: Function | None, call: ToolCall, ctx: ShardContext, tool: Tool | None = None) -> tuple[dict[str, Any], int]:
    """The tool's response body to `call`, and the LLM calls it took (0 for an invalid call, and
    for a real HTTP call to an allowlisted API: see `dialogues.http`)."""
    error = call_error(function, call.name, call.arguments)
    if error is not None or function is None:
        return {"status_code": 400, "error": error}, 0
    http = ctx.config.dialogues.http
    if tool is not None and http.allowlist and calls_for_real(tool, function, http):
        return await call_http(tool, function, call, http), 0
    prompt = TOOL_EXECUTOR_PROMPT.format(
        name=function.name, description=function.description, parameters=json.dumps(function.parameters),
        documentation=openapi_operation(tool, function), arguments=call.arguments,
    )
    response = await ctx.gateway.structured("tool", [{"role": "user", "content": prompt}], function.returns, name="api_response")
    return {"status_code": 200, "response": response}, 1
