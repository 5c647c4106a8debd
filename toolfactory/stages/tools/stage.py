"""The tools stage: raw source entries → canonical, checked tools (ToolAlpaca §3.1, ToolLLM §2.1).

This first version converts and checks tools from the shipped catalog and from files the user
names; generation from brief introductions and self-evolving synthesis build on it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from toolfactory.config import Config
from toolfactory.stages.base import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.tools.definition import definition_problems
from toolfactory.stages.tools.importers import MalformedTool, convert
from toolfactory.stages.tools.sources import SourceItem


class ToolsStage:
    name: ClassVar[str] = "tools"

    def plan(self, config: Config, run_id: str, upstream: list[ShardSpec]) -> list[ShardSpec]:
        return [ShardSpec(self.name, spec.index, spec.inputs) for spec in upstream]

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        return import_items([SourceItem.model_validate(data) for data in inputs], self.name)


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
