"""Self-evolving API synthesis (ToolACE §2.1 TSS): adaptation and evolution.

Each new API is made in three moves:

* adaptation: a subtree of the context tree is sampled, a fine-grained domain and k of its
  functionalities, where the complexity level k follows ``synthesis.complexity_weights`` (more
  functionalities, a more complex API with more specific functions);
* evolution: an example API is sampled from the example buffer, and the designer model adapts it
  to the subtree while applying sampled diversity operations (add functionality or parameters,
  add constraints, change parameter types, update the returned result);
* type balance: the model is asked for the parameter types furthest below their target share
  (``synthesis.parameter_types``) in the buffer so far, and for nested types on complex APIs;
  the answer's schema requires the first of them, or a nested object parameter on a complex API
  (a decoder that follows schemas keeps it, and an answer without it is re-asked).

The buffer starts as the seed catalog plus the pool of earlier runs; APIs are made in
generations of ``synthesis.generation_size``, and each generation joins the buffer of the next.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

from toolfactory.catalog import load_seed_catalog
from toolfactory.config import SynthesisConfig
from toolfactory.models import DomainNode, Function, Rejected, Tool, stable_id
from toolfactory.stages.base import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.domains.tree import ContextTree
from toolfactory.stages.records import map_records
from toolfactory.definitions.validity import definition_problems, lookup_problems
from toolfactory.stages.tools.fields import fields_schema, object_schema, parameter_types, with_field_defs

STAGE = "tools"

OPERATIONS = {
    "add_functionality": "add a function or a feature beyond the example's",
    "add_parameters": "add optional parameters that refine what a function does",
    "add_constraints": "add constraints to parameters: enums, numeric bounds, formats",
    "change_parameter_types": "use richer parameter types than plain strings where they fit (numbers, booleans, lists, nested objects)",
    "update_returns": "return a richer, more structured result",
}

EVOLVE_PROMPT = """\
You design web APIs. Write the definition of a new API for the domain "{domain}", subdomain
"{subdomain}", that offers these functionalities:
{functionalities}
Start from the example API below, but adapt it to the new functionalities, and while doing so:
{operations}
Requirements:
- Complexity level {level}: about {level} function(s), each with a clear and distinct purpose.
- Give every parameter and returned field a type and a description; mark required parameters.
- Use at least one parameter of each of these types: {types}.{nested}
- If a function needs a value a user cannot know (such as an id), another function must return
  it (a search or list function).
- Names: the API in CamelCase, functions in snake_case.
Example API:
{example}"""


def api_schema(max_functions: int, required_type: str | None = None, nested: bool = False) -> dict[str, Any]:
    """The answer's shape. Some function must have a top-level parameter (`contains`) that is an
    object with properties of its own when `nested`, else of `required_type`; decoders that
    follow the schema keep the balance, and an answer that ignores it is re-asked (one
    requirement: JSON Schema has one `contains` per array)."""
    schema = with_field_defs({
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": "^[A-Z][A-Za-z0-9]{2,39}$"},
            "description": {"type": "string", "minLength": 10},
            "functions": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_functions,
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "pattern": "^[a-z][a-z0-9_]{2,39}$"},
                        "description": {"type": "string", "minLength": 5},
                        "parameters": fields_schema(0, 8),
                        "returns": fields_schema(1, 10),
                    },
                    "required": ["name", "description", "parameters", "returns"],
                },
            },
        },
        "required": ["name", "description", "functions"],
    })
    parameter: dict[str, Any] | None = None
    if nested:
        parameter = {"properties": {"type": {"const": "object"}, "properties": {"minItems": 1}}, "required": ["properties"]}
    elif required_type:
        parameter = {"properties": {"type": {"const": required_type}}}
    if parameter is not None:
        schema["properties"]["functions"]["contains"] = {"properties": {"parameters": {"contains": parameter}}}
    return schema


def wanted_types(counts: Counter[str], targets: dict[str, float], n: int = 2) -> list[str]:
    """The `n` parameter types furthest below their target share in `counts`."""
    total = sum(counts[t] for t in targets) or 1
    deficit = {t: share / sum(targets.values()) - counts[t] / total for t, share in targets.items()}
    return sorted(targets, key=lambda t: (-deficit[t], t))[:n]


def _example_text(tool: Tool, rng: random.Random) -> str:
    functions = rng.sample(tool.functions, min(3, len(tool.functions)))
    return json.dumps({
        "name": tool.name,
        "description": tool.description,
        "functions": [{"name": f.name, "description": f.description, "parameters": f.parameters, "returns": f.returns} for f in functions],
    }, indent=1)


def build_tool(answer: dict[str, Any], subdomain: DomainNode, provenance: dict[str, Any]) -> tuple[Tool, list[tuple[str, str]]]:
    """The tool of a designer answer, with its definition problems."""
    problems: list[tuple[str, str]] = []
    functions = [
        Function(
            name=fn["name"],
            description=fn["description"],
            parameters=object_schema(fn["parameters"], fn["name"], problems),
            returns=object_schema(fn["returns"], f"{fn['name']} returns", problems),
        )
        for fn in answer["functions"]
    ]
    domain, sub = subdomain.path[0], subdomain.path[1]
    tool = Tool(
        name=answer["name"],
        description=answer["description"],
        category=domain,
        collections=[f"{domain} / {sub}"],  # the coarse subdomain groups tools as a collection
        domain_path=list(subdomain.path),
        source="synthesized",
        provenance=provenance,
        functions=functions,
    )
    return tool, problems + definition_problems(tool) + lookup_problems(tool)


async def synthesize(shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
    settings: SynthesisConfig = ctx.config.tools.synthesis
    job = shard.params["synthesize"]
    pool_tree = [r for path in shard.params.get("pool_tree", []) for r in ctx.read(path)]
    tree = ContextTree(DomainNode.model_validate(r) for r in [*pool_tree, *inputs])
    buffer = load_seed_catalog() + [Tool.model_validate(r) for path in shard.params.get("pool_tools", []) for r in ctx.read(path)]
    types: Counter[str] = Counter()
    for tool in buffer:
        for fn in tool.functions:
            types.update(parameter_types(fn.parameters))
    out = StageOutput()
    slots = list(range(job["first"], job["first"] + job["count"]))

    async def generate(slot: int) -> list[Tool | Rejected]:
        rng = random.Random(f"{ctx.config.run.seed}:synthesis:{slot}")
        slot_id = stable_id("synthesis", ctx.run_id, str(slot))
        level = rng.choices(range(1, len(settings.complexity_weights) + 1), settings.complexity_weights)[0]
        sampled = tree.sample_subtree(rng, level)
        if sampled is None:
            return [Rejected(id=slot_id, stage=STAGE, reasons=["synthesis_no_context"],
                             detail="the context tree has no functionality to synthesize an API for")]
        subdomain, leaves = sampled
        example = rng.choice(buffer)
        operations = rng.sample(sorted(OPERATIONS), min(settings.operations_per_api, len(OPERATIONS)))
        asked_types = wanted_types(types, settings.parameter_types)
        nested = level > 1 or "change_parameter_types" in operations
        prompt = EVOLVE_PROMPT.format(
            domain=subdomain.path[0],
            subdomain=" > ".join(subdomain.path[1:]),
            functionalities="\n".join(f"- {leaf.path[-1]}: {leaf.description}" for leaf in leaves),
            operations="\n".join(f"- {OPERATIONS[op]}" for op in operations) or "- keep its style",
            level=len(leaves),
            types=", ".join(asked_types),
            nested="\n- At least one parameter must be an object with properties, or a list of objects." if nested else "",
            example=_example_text(example, rng),
        )
        provenance = {
            "origin": "tss",
            "complexity": len(leaves),
            "functionalities": [leaf.path[-1] for leaf in leaves],
            "example": example.id,
            "operations": operations,
            "asked_types": asked_types,
            "nested": nested,
        }
        built: dict[str, Tool] = {}

        def check(answer: dict[str, Any]) -> list[tuple[str, str]]:
            tool, problems = build_tool(answer, subdomain, provenance)
            if not problems:
                built["tool"] = tool
            return problems

        await ctx.gateway.structured(
            "designer", [{"role": "user", "content": prompt}], api_schema(len(leaves) + 1, asked_types[0], nested), name="api_definition",
            check=check
        )
        return [built["tool"]]

    for start in range(0, len(slots), settings.generation_size):
        generation = await map_records(
            STAGE, slots[start : start + settings.generation_size], generate,
            lambda slot: (stable_id("synthesis", ctx.run_id, str(slot)), {"slot": slot}),
        )
        out.merge(generation)
        for tool in generation.records:
            assert isinstance(tool, Tool)
            buffer.append(tool)
            for fn in tool.functions:
                types.update(parameter_types(fn.parameters))
    return out
