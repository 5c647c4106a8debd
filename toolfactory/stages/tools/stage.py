"""The tools stage: source entries and synthesis slots → canonical, checked tools.

Three ways into the pool, one shard kind each:

* import (ToolLLM §2.1 and every other source format): entries converted and checked;
* documentation from brief introductions (ToolAlpaca §3.1, :mod:`.introductions`): entries of
  the ``introductions`` format, in the same shards as the imports of their file;
* self-evolving synthesis (ToolACE §2.1, :mod:`.synthesis`): ``synthesis.count`` new APIs in
  shards of ``tools_per_shard``, from the context tree of the domains stage;
* executable sources (:mod:`.executable`): one shard per source, which lists its tools.
"""

from __future__ import annotations

from typing import Any, ClassVar

from toolfactory.config import executable_source_lists
from toolfactory.stages.base import SOURCES, Inputs, Planning, ShardContext, ShardSpec, StageOutput
from toolfactory.stages.records import map_records
from toolfactory.definitions.validity import definition_problems
from toolfactory.stages.tools.executable import import_executable
from toolfactory.definitions.convert import MalformedTool, convert
from toolfactory.stages.tools.introductions import document_entry
from toolfactory.stages.tools.sources import SourceItem
from toolfactory.stages.tools.synthesis import synthesize

GENERATED_FORMATS = frozenset({"introductions"})


class ToolsStage:
    name: ClassVar[str] = "tools"
    # `sources` part i; its synthesis shards read the domains output, which they run after
    inputs: ClassVar[Inputs] = Inputs(None, SOURCES)

    def plan(self, planning: Planning) -> list[ShardSpec]:
        sources = planning.plans["sources"]
        specs = [ShardSpec(self.name, spec.index, (path,)) for spec, path in zip(sources, planning.outputs("sources"))]
        settings = planning.config.tools
        pool = {"pool_tree": list(planning.pool_tree), "pool_tools": list(planning.pool_tools)}
        for k, first in enumerate(range(0, settings.synthesis.count, settings.tools_per_shard)):
            job = {"first": first, "count": min(settings.tools_per_shard, settings.synthesis.count - first)}
            specs.append(ShardSpec(self.name, len(sources) + k, planning.outputs("domains"), {"synthesize": job, **pool}))
        for source in executable_names(settings):
            specs.append(ShardSpec(self.name, len(specs), (), {"executable": source}))
        return specs

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        if "synthesize" in shard.params:
            return await synthesize(shard, inputs, ctx)
        if "executable" in shard.params:
            return await import_executable(str(shard.params["executable"]), ctx.config.tools, self.name, ctx.store)
        items = [SourceItem.model_validate(data) for data in inputs]
        out = import_items([item for item in items if item.format not in GENERATED_FORMATS], self.name)
        generated = [item for item in items if item.format in GENERATED_FORMATS]
        if generated:
            out.merge(await map_records(
                self.name, generated, lambda item: document_entry(item, ctx), lambda item: (item.id, item.model_dump())
            ))
        return out


def executable_names(settings: Any) -> list[str]:
    """The names of the executable sources, in configuration order."""
    return [source.name for sources in executable_source_lists(settings).values() for source in sources]


def import_items(items: list[SourceItem], stage: str = "tools") -> StageOutput:
    """Convert and check raw entries: the tools that may enter the pool, the others rejected."""
    out = StageOutput(items_in=len(items))
    for item in items:
        try:
            tools = convert(item.format, item.raw)
        except MalformedTool as exc:
            out.reject(stage, item.id, [exc.reason], item.model_dump(), str(exc))
            continue
        for tool in tools:
            tool.provenance.setdefault("origin", item.origin)
            problems = definition_problems(tool)
            if problems:
                detail = "; ".join(message for _, message in problems)
                out.reject(stage, tool.id, sorted({code for code, _ in problems}), tool.model_dump(), detail)
            else:
                out.records.append(tool)
    return out
