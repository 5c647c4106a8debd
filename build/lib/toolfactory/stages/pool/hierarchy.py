"""The hierarchy samplers draw tool sets from: category (ToolLLM I2), collection (I3) and the
domain tree (ToolACE same-domain sampling)."""

from __future__ import annotations

from collections import defaultdict

from toolfactory.models import Tool


class PoolHierarchy:
    def __init__(self, tools: list[Tool]) -> None:
        self.tools = {tool.id: tool for tool in tools}
        self.by_category: dict[str, list[str]] = defaultdict(list)
        self.by_collection: dict[str, list[str]] = defaultdict(list)
        self.by_domain: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for tool in tools:
            self.by_category[tool.category].append(tool.id)
            for collection in tool.collections:
                self.by_collection[collection].append(tool.id)
            path = tuple(tool.domain_path or [tool.category])
            for depth in range(1, len(path) + 1):
                self.by_domain[path[:depth]].append(tool.id)

    def same_domain(self, tool_id: str, depth: int = 1) -> list[str]:
        """The tools sharing the first `depth` levels of `tool_id`'s domain path (itself included)."""
        tool = self.tools[tool_id]
        path = tuple(tool.domain_path or [tool.category])[:depth]
        return list(self.by_domain[path])
