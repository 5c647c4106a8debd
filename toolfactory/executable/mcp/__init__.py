"""MCP servers as executable tool sources (``tools.mcp``): settings, the environment, its sessions.

* :mod:`.settings`: :class:`McpSourceSettings`, one server over stdio or streamable HTTP;
* :mod:`.environment`: :class:`McpEnvironment` (lists the tools, opens fresh sessions);
* :mod:`.transport`: the confined stdio server, its output bounded;
* :mod:`.convert`: MCP listings and results in the factory's terms.
"""

from __future__ import annotations

from toolfactory.executable.mcp.environment import McpEnvironment, McpSession
from toolfactory.executable.mcp.settings import McpSourceSettings

__all__ = ["McpEnvironment", "McpSession", "McpSourceSettings"]
