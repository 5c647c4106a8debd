"""toolllm recipe: instructions with their relevant APIs (ToolLLM §2.2, appendix A.7).

A sampled tool set (I1 single tool, I2 intra-category, I3 intra-collection) is shown with the
documentation of its APIs and three in-context seed examples drawn from the project's own seed
pool (single-tool seeds for I1, multi-tool seeds for I2/I3). The model writes detailed requests,
each with the APIs it needs. As in the paper, relevant APIs that are not in the sampled set
(hallucinated) are dropped and counted, and an instruction left with none is rejected. Before
any of this, the set's APIs are probed and only the working ones kept (:mod:`.api_filter`, A.1);
a set left with no working API is rejected (`task_no_working_api`).
"""

from __future__ import annotations

import json
import random
from typing import Any

from toolfactory.catalog.seeds import load_instruction_seeds, render_seed
from toolfactory.models import Rejected, Task, stable_id
from toolfactory.stages.base import ShardContext, StageOutput
from toolfactory.stages.dialogues.modes import OPEN_MODE
from toolfactory.stages.tasks.api_filter import ApiFilter
from toolfactory.stages.tasks.batches import in_batches
from toolfactory.stages.tasks.exploration import Explorer, section_for, with_section
from toolfactory.stages.tasks.sampling import ToolSet

PROMPT = """\
You will be given {what}, with the descriptions of their API functions and the parameters each
function takes. Create {count} diverse, creative and detailed user queries that use SEVERAL of
these API functions{multi}. Give every value a call needs in the query itself, as concrete
information (an exact street and district instead of "an address", "a blue wool blanket" instead
of "a product", an invented company name instead of "my company"). Never ask which API to use and
never name an API: state the need the APIs can solve. Most queries should be specific; the last
ones may be long and describe a complex scenario that uses all the APIs. For each query, list its
relevant APIs, strictly from the API names given below, with as little overlap between queries as
possible.

Examples (these only show how to write queries; do not use their APIs):
{seeds}

The APIs to use:
{apis}"""

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "queries": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 10},
                    "relevant_apis": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "properties": {"tool": {"type": "string"}, "api": {"type": "string"}},
                            "required": ["tool", "api"],
                        },
                    },
                },
                "required": ["query", "relevant_apis"],
            },
        }
    },
    "required": ["queries"],
}


def _apis_text(tool_set: ToolSet) -> str:
    lines = []
    for tool in tool_set.tools:
        lines.append(f"Tool {tool.name} ({tool.category}): {tool.description}")
        for fn in tool.functions:
            params = json.dumps(fn.parameters.get("properties", {}), ensure_ascii=False)
            lines.append(f"  - API {fn.name}: {fn.description} Parameters: {params} Required: {fn.parameters.get('required', [])}")
    return "\n".join(lines)


async def toolllm_tasks(tool_set: ToolSet, count: int, rng: random.Random, ctx: ShardContext, out: StageOutput,
                        api_filter: ApiFilter | None = None, explorer: Explorer | None = None, *,
                        recipe: str) -> list[Task | Rejected]:
    """`count` instructions with their relevant APIs over `tool_set`, made for `recipe`."""
    if api_filter is not None:
        working = await api_filter.working(tool_set.tools)
        if not working:
            anchor = tool_set.tools[0]
            return [Rejected(id=stable_id(recipe, anchor.id, str(ctx.config.run.seed), "no_working_api"), stage="tasks",
                             reasons=["task_no_working_api"], record={"tools": [t.model_dump() for t in tool_set.tools]},
                             detail="every API of the sampled tool set failed its probe (ToolLLM A.1)")]
        if working != tool_set.tools:
            # The set records the scenario it really has once its failing tools are gone.
            scenario = tool_set.scenario if len(working) > 1 else "single_tool"
            tool_set = ToolSet(working, scenario)
    seeds = load_instruction_seeds()
    pool = seeds.single_tool if tool_set.scenario == "single_tool" else seeds.multi_tool
    examples = rng.sample(pool, min(3, len(pool)))
    multi = "" if tool_set.scenario == "single_tool" else ", from at least two different tools in each query"
    what = "a tool" if len(tool_set.tools) == 1 else f"{len(tool_set.tools)} tools"
    section = await section_for(explorer, tool_set.tools)

    def prompt(n: int) -> str:
        return with_section(PROMPT.format(
            what=what, count=n, multi=multi, seeds="\n\n".join(render_seed(s) for s in examples), apis=_apis_text(tool_set)
        ), section)

    schema = json.loads(json.dumps(ANSWER_SCHEMA))
    # API names are constrained to the sampled ones: decoders that enforce the schema cannot
    # hallucinate one, and elsewhere a hallucinated name fails the schema and is re-asked. What
    # the filter below still drops is an API paired with a tool that does not have it (as
    # ToolLLM's filter does).
    pair = schema["properties"]["queries"]["items"]["properties"]["relevant_apis"]["items"]["properties"]
    pair["tool"]["enum"] = sorted({tool.name for tool in tool_set.tools})
    pair["api"]["enum"] = sorted({fn.name for tool in tool_set.tools for fn in tool.functions})

    async def ask(content: str, n: int) -> list[dict[str, Any]]:
        schema["properties"]["queries"]["maxItems"] = n
        answer = await ctx.gateway.structured("user", [{"role": "user", "content": content}], schema, name="instructions")
        return list(answer["queries"])

    queries = await in_batches(count, prompt, ask, lambda item: str(item["query"]))
    offered = {(tool.name.casefold(), fn.name.casefold()): fn.name for tool in tool_set.tools for fn in tool.functions}
    anchor = tool_set.tools[0]
    results: list[Task | Rejected] = []
    for k, item in enumerate(queries):
        task_id = stable_id(recipe, anchor.id, str(ctx.config.run.seed), str(k))
        relevant: list[str] = []
        for api in item["relevant_apis"]:
            name = offered.get((api["tool"].casefold(), api["api"].casefold()))
            if name is None:
                out.count("hallucinated_relevant_apis", recipe)
            elif name not in relevant:
                relevant.append(name)
        if not relevant:
            results.append(Rejected(id=task_id, stage="tasks", reasons=["task_no_relevant_api"], record=item,
                                    detail="every relevant API of the instruction is outside the sampled set"))
            continue
        results.append(Task(
            id=task_id, tools=tool_set.tools, instruction=item["query"], relevant_functions=relevant,
            scenario=tool_set.scenario, mode=OPEN_MODE, recipe=recipe,
        ))
    return results
