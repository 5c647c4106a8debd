"""Sampling tool sets from the pool (ToolLLM §2.2 I1/I2/I3, ToolACE §2.2.1 same domain, APIGen-MT two sources).

Every tool of the pool anchors tool sets; a sampler adds tools that share the anchor's category
(I2), collection (I3) or top-level domain (ToolACE), and picks at most a few APIs of each. When
the pool has no partner for the anchor, the set falls back to the anchor alone and says so: the
task records the scenario it really has, never the one that was asked for.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from toolfactory.models import Tool
from toolfactory.stages.pool.hierarchy import PoolHierarchy


@dataclass(frozen=True)
class ToolSet:
    tools: list[Tool]  # each with only its sampled functions
    scenario: str


def _with_functions(tool: Tool, rng: random.Random, limit: int) -> Tool:
    if len(tool.functions) <= limit:
        return tool
    kept = rng.sample(range(len(tool.functions)), limit)
    return tool.model_copy(update={"functions": [tool.functions[i] for i in sorted(kept)]})


def _partners(hierarchy: PoolHierarchy, anchor: Tool, scenario: str, rng: random.Random) -> list[str]:
    if scenario == "intra_category":
        group = hierarchy.by_category.get(anchor.category, [])
    elif scenario == "intra_collection":  # one of the anchor's collections that has other tools
        shared = [c for c in sorted(anchor.collections) if len(hierarchy.by_collection.get(c, [])) > 1]
        group = hierarchy.by_collection[rng.choice(shared)] if shared else []
    elif scenario == "same_domain":
        group = hierarchy.same_domain(anchor.id)
    else:
        group = []
    return [i for i in group if i != anchor.id]


def sample_tool_set(
    hierarchy: PoolHierarchy, anchor: Tool, scenario: str, rng: random.Random, *, max_tools: int, max_apis: int
) -> ToolSet:
    """The anchor and 1..max_tools-1 partners of `scenario`; the anchor alone as `single_tool`."""
    partners = _partners(hierarchy, anchor, scenario, rng)
    if scenario == "single_tool" or not partners:
        return ToolSet([_with_functions(anchor, rng, max(max_apis, 5))], "single_tool")
    count = rng.randint(1, min(max_tools - 1, len(partners)))
    chosen = [hierarchy.tools[i] for i in rng.sample(partners, count)]
    return ToolSet([_with_functions(t, rng, max_apis) for t in [anchor, *chosen]], scenario)


def other_domain_tools(hierarchy: PoolHierarchy, anchor: Tool, rng: random.Random, count: int) -> list[Tool]:
    """Tools from other top-level domains than the anchor's (for requests no offered tool serves)."""
    domain = (anchor.domain_path or [anchor.category])[0]
    others = [t for t in hierarchy.tools.values() if (t.domain_path or [t.category])[0] != domain]
    return rng.sample(others, min(count, len(others)))


def weighted(rng: random.Random, shares: dict[str, float]) -> str:
    names = sorted(shares)
    return rng.choices(names, [shares[n] for n in names])[0]


def other_source_tool(by_source: dict[str, Tool], source: str, anchor: Tool, rng: random.Random) -> Tool | None:
    """A tool of another executable source than `source` (APIGen-MT's tasks over two
    environments: read in one, act in the other), without the functions whose names the anchor
    has (a call is routed to its source by name); None when no other source has one left."""
    taken = {fn.name for fn in anchor.functions}
    others = []
    for name in sorted(by_source):
        tool = by_source[name]
        functions = [fn for fn in tool.functions if fn.name not in taken]
        if name != source and functions:
            others.append(tool.model_copy(update={"functions": functions}))
    return rng.choice(others) if others else None
