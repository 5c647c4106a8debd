"""The contract between an executable tool source and the stages that use it.

An :class:`Environment` is one configured source (an MCP server, a Python environment). It lists
its tools as canonical :class:`~toolfactory.models.Tool` records, and opens :class:`Session` s:
each session is a fresh environment (a new server process, or a new instance of the class in
its own process) with its own temporary working folder, so two dialogues never see each other's
state. Closing a session stops every process it started, whatever state they are in.

A call's *result* is what the tool answered, error or not: an MCP ``isError`` result or a
Python exception is a :class:`CallResult` with ``is_error`` set, which the assistant sees and may
recover from. Only a failure of the environment itself (it hung, crashed, flooded its output,
forked past its limit, or could not start) raises :class:`ExecutionFailed`, whose reason code
rejects the dialogue; the shard goes on.
"""

from __future__ import annotations

import shutil
from contextlib import AbstractAsyncContextManager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from toolfactory.errors import ToolfactoryError
from toolfactory.models import Tool

#: Reason codes of :class:`ExecutionFailed` (counted in DuckDB like every reason code).
EXEC_TIMEOUT = "exec_timeout"  # a call did not answer within its timeout
EXEC_CRASHED = "exec_server_crashed"  # the process exited or broke its protocol mid-session
EXEC_OUTPUT_FLOOD = "exec_output_flood"  # the process wrote more than its output cap
EXEC_PROCESS_LIMIT = "exec_process_limit"  # it started more processes than allowed
EXEC_START_FAILED = "exec_start_failed"  # the environment could not be started or listed
EXEC_REASONS = frozenset({EXEC_TIMEOUT, EXEC_CRASHED, EXEC_OUTPUT_FLOOD, EXEC_PROCESS_LIMIT, EXEC_START_FAILED})


@dataclass(frozen=True)
class CallResult:
    """What one call answered, stored verbatim in the tool message (``content``)."""

    content: str
    """The answer as text: MCP text content joined, a Python return value as JSON (``str`` of it
    when it is not JSON-able), an error's message."""
    is_error: bool = False
    """An error response (MCP ``isError``, a Python exception): the call ran and failed."""
    truncated: bool = False
    """The output cap cut ``content``."""
    structured: Any = None
    """The machine-readable answer when there is one (MCP ``structuredContent``, a JSON-able
    Python return value); ``None`` otherwise."""


class ExecutionFailed(ToolfactoryError):
    """The environment failed (not the call): the dialogue is rejected with ``reason``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


class Session(Protocol):
    """One fresh environment, open for the calls of one dialogue (or of one replay)."""

    async def call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """Run one call. Raises :class:`ExecutionFailed` only when the environment failed."""
        ...

    async def state(self) -> Any:
        """A JSON-able snapshot of the environment's state, compared across runs of the same
        calls; ``None`` when the source has no observable state."""
        ...


class Environment(Protocol):
    """One configured executable source."""

    name: str
    """The source's name in the configuration; tools carry it (see :func:`executable_source`)."""

    async def list_tools(self) -> list[Tool]:
        """Its tools as canonical records (each marked with :func:`mark_executable`).
        Raises :class:`ExecutionFailed` (``exec_start_failed``) when it cannot be listed."""
        ...

    def session(self) -> AbstractAsyncContextManager[Session]:
        """A fresh environment; leaving the context stops everything it started."""
        ...


def mark_executable(tool: Tool, kind: str, source: str) -> Tool:
    """`tool`, marked as coming from the executable source named `source` of kind `kind`
    (``"mcp"`` or ``"python"``): the dialogues stage runs its calls instead of asking an LLM."""
    provenance = {**tool.provenance, "executable": {"kind": kind, "source": source}}
    return tool.model_copy(update={"source": kind, "provenance": provenance})


def executable_source(tool: Tool) -> str | None:
    """The name of the executable source `tool` comes from, or ``None`` for a tool an LLM plays."""
    marker = tool.provenance.get("executable")
    return marker.get("source") if isinstance(marker, dict) else None


def empty_folder(folder: Path) -> None:
    """Remove everything inside `folder` (links are removed, not followed); the folder stays."""
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with suppress(FileNotFoundError):
                entry.unlink()
