"""toolalpaca recipe: the user agent writes instructions for one tool (ToolAlpaca §3.2, Fig. 8).

The user agent sees a tool's name, description and functions and writes concrete, varied
requests that never name the API. As in Fig. 8, instructions that need several calls are
preferred: each instruction lists the functions it needs (one or more, possibly one function
called several times), constrained to the tool's real functions by the answer's JSON Schema;
they become the task's relevant functions, in the order given.
"""

from __future__ import annotations

import json
from typing import Any

from toolfactory.models import Task, Tool, stable_id
from toolfactory.stages.base import ShardContext
from toolfactory.stages.dialogues.modes import OPEN_MODE
from toolfactory.stages.tasks.batches import in_batches
from toolfactory.stages.tasks.exploration import Explorer, section_for, with_section

USER_AGENT_PROMPT = """\
Imagine you are a person who wants to use the features of the API below in daily life. Write
{count} realistic requests you might send to an assistant that can use this API.
Guidelines:
1. Each request is one or two sentences. Mix questions, first-person statements and imperatives.
2. Never mention the API's name.
3. Use only features the API offers. Requests that need several API calls are better (several
   functions, or one function called more than once); for each request list the functions it
   needs, in the order they would be called.
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
                        "functions": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": 5,
                            "items": {"type": "string", "enum": [fn.name for fn in tool.functions]},
                        },
                    },
                    "required": ["instruction", "functions"],
                },
            }
        },
        "required": ["instructions"],
    }


async def toolalpaca_tasks(tool: Tool, count: int, ctx: ShardContext, explorer: Explorer | None = None, *,
                           recipe: str) -> list[Task]:
    """`count` instructions the user agent writes for `tool`, made for `recipe`."""
    section = await section_for(explorer, [tool])

    def prompt(n: int) -> str:
        return with_section(USER_AGENT_PROMPT.format(
            count=n, name=tool.name, description=tool.description or tool.introduction, functions=describe_functions(tool),
        ), section)

    async def ask(content: str, n: int) -> list[dict[str, Any]]:
        answer = await ctx.gateway.structured("user", [{"role": "user", "content": content}], instruction_schema(tool, n),
                                              name="instructions")
        return list(answer["instructions"])

    instructions = await in_batches(count, prompt, ask, lambda item: str(item["instruction"]))
    return [
        Task(
            id=stable_id(tool.id, str(ctx.config.run.seed), str(k)),
            tools=[tool],
            instruction=item["instruction"],
            relevant_functions=list(dict.fromkeys(item["functions"])),
            recipe=recipe,
            mode=OPEN_MODE,
        )
        for k, item in enumerate(instructions)
    ]
