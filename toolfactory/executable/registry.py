"""Every executable source a run's configuration names, by name.

The tools stage lists each source's tools; the dialogues stage opens sessions of the source a
tool came from (:func:`~toolfactory.executable.session.executable_source`). Both build the
sources from the configuration here, so a worker needs nothing but the run's config.
"""

from __future__ import annotations

from toolfactory.config import ToolsConfig
from toolfactory.executable.python_env import PythonEnvironment
from toolfactory.executable.session import Environment
from toolfactory.executable.settings import ExecutableSourceSettings


def environments(tools: ToolsConfig) -> dict[str, Environment]:
    """The configured executable sources by name (names are unique: see ``ToolsConfig``)."""
    found: dict[str, Environment] = {}
    for settings in tools.environments:
        found[settings.name] = PythonEnvironment(settings)
    if tools.mcp:
        # The MCP SDK is imported only by a run that has an MCP source: every stage of every
        # run imports this module.
        from toolfactory.executable.mcp import McpEnvironment

        for mcp in tools.mcp:
            found[mcp.name] = McpEnvironment(mcp)
    return found


def source_settings(tools: ToolsConfig) -> dict[str, ExecutableSourceSettings]:
    """The settings of every configured executable source by name."""
    found: dict[str, ExecutableSourceSettings] = {settings.name: settings for settings in tools.environments}
    found.update({settings.name: settings for settings in tools.mcp})
    return found
