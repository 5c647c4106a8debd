"""The dialogues stage: multi-agent simulation of one task (ToolAlpaca §3.2, ToolACE §2.2).

The assistant agent answers with native function calls; each call is checked against the
function's schema and either answered by the tool executor agent (an LLM playing the API, with a
response shaped by the function's `returns` schema, Fig. 11) or, when the call is invalid, by
the error a real API would give. The loop ends with the assistant's final answer or after
`MAX_STEPS` assistant turns. Verification of the result is the verify stage's job.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from jsonschema import Draft202012Validator

from toolfactory.models import Dialogue, Function, Message, Record, Task, ToolCall, ToolRef, stable_id
from toolfactory.stages.base import Planning, ShardContext, ShardSpec, StageOutput, one_to_one
from toolfactory.stages.records import map_records

MAX_STEPS = 4

SYSTEM_PROMPT = (
    "You are a helpful assistant that can use the functions provided. Call a function when it "
    "helps to answer the request, with argument values taken from the conversation. When you "
    "have the results, give the user a complete final answer in plain language."
)

TOOL_EXECUTOR_PROMPT = """\
You simulate an API. Process the request below according to the function's documentation and
return the response body that the API would send: it must follow the response schema, contain
realistic data (no placeholders) and, when no limit is given, at least three items in lists.
Function: {name}
Description: {description}
Parameters: {parameters}
Request arguments: {arguments}"""


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


class DialoguesStage:
    name: ClassVar[str] = "dialogues"

    def plan(self, planning: Planning) -> list[ShardSpec]:
        return one_to_one(self.name, planning, "tasks")

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        tasks = [Task.model_validate(data) for data in inputs]
        return await map_records(self.name, tasks, lambda t: self._simulate(t, ctx), lambda t: (t.id, t.model_dump()))

    async def _simulate(self, task: Task, ctx: ShardContext) -> list[Record]:
        functions = [fn for tool in task.tools for fn in tool.functions]
        by_name = {fn.name: fn for fn in functions}
        offered = [fn.openai_tool() for fn in functions]
        messages = [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=task.instruction)]
        calls = 0
        for _ in range(MAX_STEPS):
            reply = await ctx.gateway.chat("assistant", _wire(messages), tools=offered, tool_choice="auto")
            calls += 1
            tool_calls = [
                ToolCall(id=c.get("id") or f"call_{i}", name=c["function"]["name"], arguments=c["function"].get("arguments") or "")
                for i, c in enumerate(reply.get("tool_calls") or [])
            ]
            messages.append(Message(role="assistant", content=reply.get("content"), tool_calls=tool_calls or None))
            if not tool_calls:
                break
            for call in tool_calls:
                function = by_name.get(call.name)
                error = call_error(function, call.name, call.arguments)
                if error is None and function is not None:
                    body = await self._execute(function, call, ctx)
                    calls += 1
                else:
                    body = {"status_code": 400, "error": error}
                messages.append(Message(role="tool", tool_call_id=call.id, name=call.name, content=json.dumps(body)))
        return [
            Dialogue(
                id=stable_id("dialogue", task.id),
                task_id=task.id,
                tools=functions,
                messages=messages,
                recipe=task.recipe,
                scenario=task.scenario,
                mode=task.mode,
                models={role: ctx.gateway.model_for(role) for role in ("user", "assistant", "tool")},
                llm_calls=calls,  # this stage's requests for this record (assistant and tool executor)
                source_tools=[ToolRef(id=t.id, name=t.name, category=t.category, source=t.source) for t in task.tools],
            )
        ]

    async def _execute(self, function: Function, call: ToolCall, ctx: ShardContext) -> dict[str, Any]:
        prompt = TOOL_EXECUTOR_PROMPT.format(
            name=function.name, description=function.description,
            parameters=json.dumps(function.parameters), arguments=call.arguments,
        )
        response = await ctx.gateway.structured(
            "tool", [{"role": "user", "content": prompt}], function.returns, name="api_response"
        )
        return {"status_code": 200, "response": response}


def _wire(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages in OpenAI's chat format (reasoning is never sent)."""
    wire = []
    for message in messages:
        item: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.tool_calls:
            item["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in message.tool_calls
            ]
        if message.tool_call_id:
            item["tool_call_id"] = message.tool_call_id
        wire.append(item)
    return wire
