"""The tasks stage: user instructions for each tool (ToolAlpaca §3.2 user agent, Fig. 8).

The user agent sees a tool's name, description and functions and writes concrete, varied
requests that never name the API; each instruction states the function it needs, constrained to
the tool's real functions by the answer's JSON Schema.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from toolfactory.models import Record, Task, Tool, stable_id
from toolfactory.stages.base import Planning, ShardContext, ShardSpec, StageOutput
from toolfactory.stages.records import map_records

USER_AGENT_PROMPT = """\
Imagine you are a person who wants to use the features of the API below in daily life. Write
{count} realistic requests you might send to an assistant that can use this API.
Guidelines:
1. Each request is one or two sentences. Mix questions, first-person statements and imperatives.
2. Never mention the API's name.
3. Use only features the API offers; for each request give the function that serves it.
4. Use concrete values (real places, dates, names, amounts), never placeholders such as "a city"
   or "this item".
5. Vary the verbs and the wording from one request to the next.
<API>
Name: {name}
Description: {description}
Functions:
{functions}
</API>"""


def describe_functions(tool: Tool) -> str:
    return "\n".join(
        f"- {fn.name}: {fn.description} Parameters: {json.dumps(fn.parameters.get('properties', {}))}"
        for fn in tool.functions
    )


def instruction_schema(tool: Tool, count: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "instructions": {
                "type": "array",
                "minItems": count,
                "maxItems": count,
                "items": {
                    "type": "object",
                    "properties": {
                        "instruction": {"type": "string", "minLength": 10},
                        "function": {"type": "string", "enum": [fn.name for fn in tool.functions]},
                    },
                    "required": ["instruction", "function"],
                },
            }
        },
        "required": ["instructions"],
    }


class TasksStage:
    name: ClassVar[str] = "tasks"

    def plan(self, planning: Planning) -> list[ShardSpec]:
        # The pool is one shard; the tasks stage reads it in as many parts as there were
        # tools shards, part i holding every n-th tool.
        pool, parts = planning.outputs("pool"), len(planning.plans["tools"])
        return [ShardSpec(self.name, i, pool, {"part": i, "parts": parts}) for i in range(parts)] if pool else []

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        count = ctx.config.tasks.instructions_per_tool
        tools = [Tool.model_validate(data) for data in inputs[shard.params["part"] :: shard.params["parts"]]]

        async def instructions_for(tool: Tool) -> list[Record]:
            prompt = USER_AGENT_PROMPT.format(
                count=count, name=tool.name, description=tool.description or tool.introduction,
                functions=describe_functions(tool),
            )
            answer = await ctx.gateway.structured(
                "user", [{"role": "user", "content": prompt}], instruction_schema(tool, count), name="instructions"
            )
            return [
                Task(
                    id=stable_id(tool.id, str(ctx.config.run.seed), str(k)),
                    tools=[tool],
                    instruction=item["instruction"],
                    relevant_functions=[item["function"]],
                )
                for k, item in enumerate(answer["instructions"])
            ]

        return await map_records(self.name, tools, instructions_for, lambda t: (t.id, t.model_dump()))
