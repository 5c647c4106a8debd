"""MCP tool listings and call results, in the factory's own terms.

One MCP server is one canonical :class:`~toolfactory.models.Tool` whose functions are the
server's tools: a server is one product with one state, so the tasks stage's single-tool
scenario draws several of its functions into one dialogue (create, then read back), and the
dialogues stage opens one fresh session of it per dialogue. The MCP annotations (read-only,
destructive, idempotent, open-world, title) have no field of their own in a function: they are
kept in the tool's provenance, under ``mcp.functions.<name>``.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types

from toolfactory.models import Function, Tool

#: An MCP result without an output schema is text content.
TEXT_RETURNS: dict[str, Any] = {"type": "string"}
ANNOTATIONS = {
    "title": "title",
    "read_only_hint": "read_only",
    "destructive_hint": "destructive",
    "idempotent_hint": "idempotent",
    "open_world_hint": "open_world",
}


def function_of(tool: mcp_types.Tool) -> Function:
    """One MCP tool as a function: its input schema as parameters, its output schema as returns."""
    return Function(
        name=tool.name,
        description=(tool.description or "").strip(),
        parameters=dict(tool.input_schema),
        returns=dict(tool.output_schema) if tool.output_schema is not None else dict(TEXT_RETURNS),
    )


def hints_of(tool: mcp_types.Tool) -> dict[str, Any]:
    """What the server says about the tool beyond its schemas (only what it said)."""
    hints: dict[str, Any] = {}
    if tool.title:
        hints["title"] = tool.title
    if tool.annotations is not None:
        for field, key in ANNOTATIONS.items():
            value = getattr(tool.annotations, field)
            if value is not None:
                hints.setdefault(key, value)
    hints["structured_output"] = tool.output_schema is not None
    return hints


def tool_of(
    source: str,
    tools: list[mcp_types.Tool],
    server: mcp_types.Implementation | None,
    instructions: str | None,
    transport: str,
) -> Tool:
    """The server `source` as one canonical tool whose functions are `tools`."""
    product = server.title or server.name if server is not None else source
    description = (instructions or "").strip() or f"Tools of the MCP server {product}."
    provenance: dict[str, Any] = {
        "mcp": {
            "transport": transport,
            "server": {"name": server.name, "version": server.version} if server is not None else None,
            "functions": {tool.name: hints_of(tool) for tool in tools},
        }
    }
    return Tool(
        name=source,
        description=description,
        source="mcp",
        category="MCP",
        provenance=provenance,
        functions=[function_of(tool) for tool in tools],
    )


def render_content(content: list[mcp_types.ContentBlock]) -> str:
    """A result's content as the tool message's text: text items verbatim, joined by newlines;
    any other kind (image, audio, resource, link) as its JSON rendering, which keeps its data."""
    parts: list[str] = []
    for item in content:
        if isinstance(item, mcp_types.TextContent):
            parts.append(item.text)
        else:
            parts.append(json.dumps(item.model_dump(mode="json", by_alias=True, exclude_none=True), ensure_ascii=False))
    return "\n".join(parts)


def cap(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to at most `limit` bytes of UTF-8 (never inside a character); whether it was cut."""
    data = text.encode()
    if len(data) <= limit:
        return text, False
    return data[:limit].decode(errors="ignore"), True
