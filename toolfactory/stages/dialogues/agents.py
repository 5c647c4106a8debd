"""The user and tool-executor agents of the multi-agent simulation (ToolAlpaca §3.2, ToolACE §2.2).

* The user agent reads an assistant turn that did not call: it says whether the assistant asks
  for a missing value, declines or answers (a structured classification, so the decision never
  rests on how the turn is punctuated), and answers a question with concrete values (ToolAlpaca
  Fig. 9); in multi-turn dialogues it asks a follow-up request.
* The tool executor plays the API: given the function's documentation (and OpenAPI document when
  there is one) and the call, it returns a response that fits the `returns` schema (Fig. 11).
  For the recipes in `dialogues.api_errors` (toolalpaca) it is the paper's error-aware executor:
  it validates the request against the documentation and answers either the success or the
  error a real API would give to bad inputs and edge cases (missing or invalid parameters,
  values out of range), as a status code and a message; the choice is the model's (the answer's
  schema offers both), which is what gives the assistant errors to recover from. Otherwise an
  invalid call gets a 400 without an LLM call. A call that cannot reach any API (an unknown
  function, arguments that are not JSON) always gets the 400 without an LLM call; a tool whose
  base URL is in `dialogues.http.allowlist` is called for real instead (:mod:`.http_executor`).
  A response is stored as ``{"status_code": 200, "response": …}``, an error as
  ``{"status_code": 4xx, "error": "<message>"}``; the executor's explanation is not stored (it
  is the simulator's note, not the API's answer).
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

API_EXECUTOR_PROMPT = """\
As an API simulator, your task is to process API requests and generate appropriate responses
based on the provided API documentation. Please adhere to the following guidelines:
1. Validate the HTTP method and parameters in the request according to the documentation.
2. Generate a response that strictly adheres to the documented response format, in JSON.
3. Responses should contain realistic data. Avoid using placeholders.
4. Handle edge cases by providing appropriate error responses: a request with a missing or
   invalid parameter, or a value out of range, gets the error status code and message the API
   would send, never a made-up success.
5. For requests without any length limit, ensure to return at least 3 samples in the response.
Output: the status code; for a success the response body, for an error the error message; and a
brief explanation of the response.
API Details:
Name: {tool}
Function: {name}: {description}
Parameters: {parameters}
Error responses: {errors}{documentation}
Request Details:
{request}"""

READ_TURN_PROMPT = """\
You are the user in the conversation below. Read the AI assistant's last message and say what it
does: it asks you for a value it needs before it can act, it declines (none of its functions can
serve the request), or it answers. If it asks, reply to its question with specific, direct values
(no placeholders), as the user would; otherwise leave the reply empty.
Conversation:
{history}"""

TURN_KINDS = ("asks_for_missing_value", "declines", "answers")

ADDITIONAL_INFORMATION_PROMPT = """\
As a user, you ask the AI assistant some questions, but the assistant believes you have missed
crucial information. Please respond to the AI assistant's inquiries with specific and direct
answers using text or formatted text. Avoid using placeholders. If a file is necessary, please
provide the contents of the file in your response.
Conversation:
{history}"""

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


async def user_details(messages: list[Message], ctx: ShardContext) -> str:
    """The user's answer to the assistant's question for missing information (Fig. 9)."""
    answer = await ctx.gateway.structured(
        "user", [{"role": "user", "content": ADDITIONAL_INFORMATION_PROMPT.format(history=history_text(messages))}], TEXT_SCHEMA,
        name="user_details",
    )
    return str(answer["message"])


async def user_follow_up(messages: list[Message], ctx: ShardContext) -> str:
    """The user's next request in a multi-turn dialogue."""
    answer = await ctx.gateway.structured(
        "user", [{"role": "user", "content": FOLLOW_UP_PROMPT.format(history=history_text(messages))}], TEXT_SCHEMA, name="user_turn"
    )
    return str(answer["message"])


def unsendable(function: Function | None, name: str, arguments: str) -> str | None:
    """Why this call cannot be sent to any API (unknown function, arguments that are not JSON)."""
    if function is None:
        return f"unknown function {name!r}"
    try:
        json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return f"arguments are not valid JSON: {exc.msg}"
    return None


def call_error(function: Function | None, name: str, arguments: str) -> str | None:
    """The error a real API would return for this call, or None when the call is valid."""
    problem = unsendable(function, name, arguments)
    if problem is not None or function is None:
        return problem
    values = json.loads(arguments or "{}")
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


DEFAULT_ERROR_STATUSES = (400, 404, 422)


def error_statuses(tool: Tool | None, function: Function) -> list[int]:
    """The error statuses the API documents for the function's operation (4xx/5xx), with 400
    always among them (every API rejects a malformed request); the usual ones when none is
    documented."""
    operation: Any = None
    if tool is not None and tool.openapi and function.path and function.method:
        operation = ((tool.openapi.get("paths") or {}).get(function.path) or {}).get(function.method.lower())
    responses = operation.get("responses") if isinstance(operation, dict) else None
    documented = {int(code) for code in responses or {} if str(code).isdigit() and int(code) >= 400}
    return sorted(documented | {400}) if documented else list(DEFAULT_ERROR_STATUSES)


_DEFINITIONS = ("$defs", "definitions")


def api_answer_schema(function: Function, statuses: list[int]) -> dict[str, Any]:
    """A success in the shape of `returns`, or an error with one of the API's error statuses.

    `returns` is nested under `response`, but its local references (`#/$defs/TimeResult`, as an
    MCP server's pydantic output schema writes them) point at its own root: its definitions move
    to the answer schema's root, where those references then resolve."""
    explanation = {"type": "string", "minLength": 3}
    returns = {k: v for k, v in function.returns.items() if k not in _DEFINITIONS}
    return {
        **{k: function.returns[k] for k in _DEFINITIONS if isinstance(function.returns.get(k), dict)},
        "oneOf": [
            {"type": "object", "properties": {"status_code": {"const": 200}, "response": returns, "explanation": explanation},
             "required": ["status_code", "response", "explanation"], "additionalProperties": False},
            {"type": "object", "properties": {"status_code": {"enum": statuses}, "error": {"type": "string", "minLength": 3},
                                              "explanation": explanation},
             "required": ["status_code", "error", "explanation"], "additionalProperties": False},
        ]
    }


async def execute_with_errors(function: Function, call: ToolCall, ctx: ShardContext, tool: Tool | None) -> dict[str, Any]:
    """ToolAlpaca's executor (Fig. 11): the model validates the request and answers it with the
    success or the error the API would give."""
    statuses = error_statuses(tool, function)
    request = f"{function.method or 'POST'} {function.path or '/' + function.name}\nArguments: {call.arguments or '{}'}"
    prompt = API_EXECUTOR_PROMPT.format(
        tool=tool.name if tool is not None else function.name, name=function.name, description=function.description,
        parameters=json.dumps(function.parameters), errors=", ".join(map(str, statuses)),
        documentation=openapi_operation(tool, function), request=request,
    )
    answer = await ctx.gateway.structured("tool", [{"role": "user", "content": prompt}], api_answer_schema(function, statuses),
                                          name="api_response")
    if int(answer["status_code"]) < 400:
        return {"status_code": 200, "response": answer["response"]}
    return {"status_code": int(answer["status_code"]), "error": answer["error"]}


async def execute(function: Function | None, call: ToolCall, ctx: ShardContext, tool: Tool | None = None,
                  *, api_errors: bool = False) -> tuple[dict[str, Any], int]:
    """The tool's response body to `call`, and the LLM calls it took (0 for a call rejected
    without the model, and for a real HTTP call to an allowlisted API: see `dialogues.http`).
    `api_errors`: the model plays the API's validation too (see the module doc)."""
    error = unsendable(function, call.name, call.arguments) if api_errors else call_error(function, call.name, call.arguments)
    if error is not None or function is None:
        return {"status_code": 400, "error": error}, 0
    http = ctx.config.dialogues.http
    if tool is not None and http.allowlist and calls_for_real(tool, function, http):
        if call_error(function, call.name, call.arguments) is None:
            return await call_http(tool, function, call, http), 0
    if api_errors:
        return await execute_with_errors(function, call, ctx, tool), 1
    prompt = TOOL_EXECUTOR_PROMPT.format(
        name=function.name, description=function.description, parameters=json.dumps(function.parameters),
        documentation=openapi_operation(tool, function), arguments=call.arguments,
    )
    response = await ctx.gateway.structured("tool", [{"role": "user", "content": prompt}], function.returns, name="api_response")
    return {"status_code": 200, "response": response}, 1
