"""The pool stage: the run's tools, without near-duplicates, placed in the pool.

One shard reads every tools shard and the pool of earlier runs (the files that existed when the
run was planned). In order, each tool is

* rejected as ``tool_near_duplicate`` when it is a near-duplicate of a tool kept before it in
  this run (across sources: the same API imported twice, a synthesized API too close to its
  example);
* kept as ``known`` when it is a near-duplicate of a pool tool (or rejected as
  ``tool_known_in_pool`` with ``tools.pool.skip_known``);
* otherwise kept as ``new``; new tools join the pool when the run publishes it.

A tool of an executable source (``tools.environments``, ``tools.mcp``) is kept as it is
(``executable``): it is neither compared with nor merged into tools an LLM plays, and it is not
published, since only the configuration that names its source can run it.

Kept tools without a collection get one derived by clustering within their category
(:mod:`.collections`), so that ToolLLM's I3 sets can be drawn from imports too.

The shard's profile is what the stats show of the pool: tools and functions by source, tools by
top-level domain, parameter types, nesting depth and functions per tool.
"""

from __future__ import annotations

from typing import Any, ClassVar

from toolfactory.executable.session import executable_source
from toolfactory.models import Tool
from toolfactory.stages.base import FAN_IN, GROW, Inputs, Planning, ShardContext, ShardSpec, StageOutput, upstream_of
from toolfactory.stages.pool.collections import DERIVED, derive_collections
from toolfactory.stages.pool.dedup import NearDuplicates, signature
from toolfactory.stages.tools.fields import nesting_depth, parameter_types

KNOWN, RUN = "known", "run"
EXECUTABLE = "executable"


class PoolStage:
    name: ClassVar[str] = "pool"
    # Shared with later runs, which may have planned on it: late tools grow it by a supplement.
    inputs: ClassVar[Inputs] = Inputs("tools", FAN_IN, late=GROW)

    def plan(self, planning: Planning) -> list[ShardSpec]:
        tools = planning.outputs(upstream_of(self.inputs))
        return [ShardSpec(self.name, 0, tools, {"pool_tools": list(planning.pool_tools)})] if tools else []

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        settings = ctx.config.tools.pool
        index = NearDuplicates(settings.near_duplicate_threshold)
        for path in shard.params.get("pool_tools", []):
            for k, record in enumerate(ctx.read(path)):
                index.add(f"{KNOWN}:{path}:{k}", KNOWN, signature(Tool.model_validate(record)))
        out = StageOutput(items_in=len(inputs))
        names: dict[str, str] = {}
        # A supplement shard (toolfactory/run/fan_in.py): the run's tools already in its earlier pool
        # parts count as kept before these.
        for path in shard.params.get("prior", []):
            for k, record in enumerate(ctx.read(path)):
                tool = Tool.model_validate(record)
                index.add(f"{RUN}:{path}:{k}", RUN, signature(tool))
                names[f"{RUN}:{path}:{k}"] = f"{tool.name} ({tool.source})"
        for k, record in enumerate(inputs):
            tool = Tool.model_validate(record)
            if executable_source(tool) is not None:
                # Its calls run on its source: never merged with a tool an LLM plays, never
                # published to the pool (its source is this run's configuration).
                tool.provenance = {**tool.provenance, "pool": EXECUTABLE}
                out.records.append(tool)
                continue
            sig = signature(tool)
            matches = index.matches(sig)
            twin = next((key for key, label, _ in matches if label == RUN), None)
            if twin is not None:
                out.reject(self.name, tool.id, ["tool_near_duplicate"], tool.model_dump(),
                           f"{tool.name} ({tool.source}) is a near-duplicate of {names[twin]}")
                continue
            known = any(label == KNOWN for _, label, _ in matches)
            if known and settings.skip_known:
                out.reject(self.name, tool.id, ["tool_known_in_pool"], tool.model_dump(), f"{tool.name} is already in the pool")
                continue
            key = f"{RUN}:{k}"
            index.add(key, RUN, sig)
            names[key] = f"{tool.name} ({tool.source})"
            tool.provenance = {**tool.provenance, "pool": KNOWN if known else "new"}
            out.records.append(tool)
        kept = [t for t in out.records if isinstance(t, Tool)]
        derived = derive_collections([t for t in kept if executable_source(t) is None], size=settings.collection_size)
        for tool in kept:
            if tool.id in derived:
                tool.collections = derived[tool.id]
                tool.provenance = {**tool.provenance, "collections": DERIVED}
            out.count("collections", DERIVED if tool.id in derived else ("source" if tool.collections else "none"))
            profile(out, tool)
        return out


NO_DOMAIN = "(no domain)"


def domain_label(tool: Tool) -> str:
    """The top-level domain a tool is counted under; a tool that names none, under one label."""
    return " ".join((tool.domain_path or [tool.category])[0].split()) or NO_DOMAIN


def profile(out: StageOutput, tool: Tool) -> None:
    out.count("tools_by_source", tool.source)
    out.count("functions_by_source", tool.source, len(tool.functions))
    out.count("tools_by_domain", domain_label(tool))
    out.count("functions_per_tool", str(len(tool.functions)))
    out.count("pool", str(tool.provenance["pool"]))
    for fn in tool.functions:
        for kind, n in parameter_types(fn.parameters).items():
            out.count("parameter_types", kind, n)
        out.count("nesting_depth", str(nesting_depth(fn.parameters)))
