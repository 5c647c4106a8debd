"""MCP servers as executable tool sources (``tools.mcp``): settings, the environment, its sessions.

* :mod:`.settings`: :class:`McpSourceSettings`, one server over stdio or streamable HTTP;
* :mod:`.environment`: :class:`McpEnvironment` (lists the tools, opens fresh sessions);
* :mod:`.transport`: the confined stdio server, its output bounded;
* :mod:`.convert`: MCP listings and results in the factory's terms.
"""

from __future__ import annotations

from typing import Any

from toolfactory.executable.mcp.settings import McpSourceSettings

__all__ = ["McpEnvironment", "McpSession", "McpSourceSettings"]


def __getattr__(name: str) -> Any:
    # The environment imports the MCP SDK: only when a source is used, not when the
    # configuration (which holds the settings) is read.
    if name in ("McpEnvironment", "McpSession"):
        from toolfactory.executable.mcp import environment

        return getattr(environment, name)
    raise AttributeError(name)
