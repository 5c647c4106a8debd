"""Importing the tools of one executable source (an MCP server, a Python environment).

The shard starts the source, lists its tools within ``start_timeout_seconds`` and checks them
like imported ones: the allow and deny lists choose functions by name, and each function the
definition checks reject is a rejection with their reason codes, while the source's other
functions are kept. A source that cannot start or list is one rejection, ``exec_start_failed``,
and the run goes on without it.
"""

from __future__ import annotations

import asyncio

from toolfactory.config import ToolsConfig
from toolfactory.executable.session import EXEC_START_FAILED, ExecutionFailed
from toolfactory.models import Tool, stable_id
from toolfactory.stages.base import StageOutput
from toolfactory.definitions.validity import definition_problems

#: A function its source's documentation names but the source cannot run.
FUNCTION_MISSING = "exec_function_missing"


async def import_executable(name: str, tools: ToolsConfig, stage: str = "tools") -> StageOutput:
    """The checked tools of the executable source `name`."""
    # Here, not at the top: the MCP SDK takes a second to import, and a run without executable
    # sources never needs it.
    from toolfactory.executable.registry import environments, source_settings

    settings = source_settings(tools)[name]
    out = StageOutput(items_in=1)
    try:
        listed = await asyncio.wait_for(environments(tools)[name].list_tools(), settings.start_timeout_seconds)
    except (TimeoutError, ExecutionFailed) as exc:
        detail = exc.message if isinstance(exc, ExecutionFailed) else f"no tools listed within {settings.start_timeout_seconds:g} s"
        out.reject(stage, stable_id("executable", name), [EXEC_START_FAILED], {"source": name}, f"{name}: {detail}")
        return out
    for tool in listed:
        kept = [fn for fn in tool.functions if settings.admits(fn.name)]
        out.count("executable_functions_filtered", name, len(tool.functions) - len(kept))
        good = []
        for fn in kept:
            single = tool.model_copy(update={"functions": [fn], "id": stable_id(tool.id, fn.name)})
            problems = definition_problems(single) + _unrunnable(tool, fn.name)
            if problems:
                detail = "; ".join(message for _, message in problems)
                out.reject(stage, single.id, sorted({code for code, _ in problems}), single.model_dump(), detail)
            else:
                good.append(fn)
        if good:
            out.records.append(tool.model_copy(update={"functions": good}))
            out.count("executable_tools", name)
    return out


def _unrunnable(tool: Tool, function: str) -> list[tuple[str, str]]:
    # A source that says which functions it can run (a Python environment's public methods)
    # rejects documentation of any other.
    runnable = tool.provenance.get("methods")
    if isinstance(runnable, list) and function not in runnable:
        return [(FUNCTION_MISSING, f"{tool.name}.{function}: documented, but the source has no such function")]
    return []
