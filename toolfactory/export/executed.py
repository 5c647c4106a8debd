"""What an export needs to know about a record whose calls really ran (``tools.environments``,
``tools.mcp``): which executed call is which of the dialogue's calls, in which user turn, and
the state the sessions were left in.

The dialogues stage keeps, in ``generation["execution"]``, each call it ran (source and name,
in order) and the final ``states`` of its sessions, but not the arguments: those are in the
messages. :func:`executed` lines the two up. The dialogue's calls to executable functions,
less those answered with a 400 without running (arguments that do not fit the parameters,
:func:`~toolfactory.stages.dialogues.agents.call_error`), must be exactly the calls that ran.
When they are not, the record's state was reached through calls the messages do not show (a
search that backtracked: ToolLLM's DFSDT runs the calls of abandoned branches in the same
session), so the recorded state is not the state of the dialogue's calls, and the record is
skipped as ``execution_not_replayable`` instead of being exported with a target state that its
own ground truth does not reach.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolfactory.executable.mcp.settings import McpSourceSettings
from toolfactory.executable.settings import PythonEnvironmentSettings
from toolfactory.executable.session import executable_source
from toolfactory.executable.settings import ExecutableSourceSettings
from toolfactory.export.base import NOT_EXECUTED, NOT_REPLAYABLE, PLAYED_CALLS, Skip
from toolfactory.llm.identity import public_url
from toolfactory.models import Dialogue, Function, Tool
from toolfactory.stages.dialogues.agents import call_error
from toolfactory.stages.dialogues.execution import EXECUTION


@dataclass(frozen=True)
class ExecutedCall:
    turn: int
    """The user turn the call answers (0 for the first)."""
    source: str
    name: str
    arguments: dict[str, Any]
    is_error: bool
    """The call ran and raised (a Python exception, an MCP ``isError``)."""
    deterministic: bool | None = None
    """Whether vetting found the tool to answer the same twice (None: not vetted)."""


@dataclass(frozen=True)
class Execution:
    turns: list[str]
    """The user messages, in order."""
    calls: list[ExecutedCall]
    states: dict[str, Any]
    """The state each session was left in, by source name."""
    sources: list[str]
    """The executable sources the record's tools come from, in name order."""
    turn_states: list[dict[str, Any]] | None = None
    """The state after the calls that answer each user message, by source (None: the record
    keeps the final state alone)."""


def function_sources(dialogue: Dialogue, tools: Mapping[str, Tool]) -> dict[str, str]:
    """The executable source of each of the dialogue's functions that has one (through the pool
    tools the record names)."""
    found: dict[str, str] = {}
    for ref in dialogue.source_tools:
        tool = tools.get(ref.id)
        source = executable_source(tool) if tool is not None else None
        if tool is not None and source is not None:
            found.update((f.name, source) for f in tool.functions)
    return found


def executed(dialogue: Dialogue, tools: Mapping[str, Tool]) -> Execution:
    """The record's executed calls lined up with its messages (see the module doc), or :class:`Skip`."""
    record = dialogue.generation.get(EXECUTION)
    if not isinstance(record, dict) or not isinstance(record.get("states"), dict):
        raise Skip(NOT_EXECUTED, "no call of the record ran on an executable tool")
    owners = function_sources(dialogue, tools)
    functions: dict[str, Function] = {f.name: f for f in dialogue.tools}
    turns: list[str] = []
    calls: list[ExecutedCall] = []
    for message in dialogue.messages:
        if message.role == "user":
            turns.append(message.content or "")
        for call in message.tool_calls or []:
            if call_error(functions.get(call.name), call.name, call.arguments) is not None:
                continue  # answered with a 400 without running, for played and executed tools alike
            if call.name not in owners:
                raise Skip(PLAYED_CALLS, f"{call.name} is played by an LLM")
            calls.append(ExecutedCall(max(len(turns) - 1, 0), owners[call.name], call.name,
                                      json.loads(call.arguments or "{}"), False))
    ran = [(str(c.get("source")), str(c.get("name"))) for c in record.get("calls") or []]
    if ran != [(c.source, c.name) for c in calls]:
        raise Skip(NOT_REPLAYABLE, f"{len(ran)} calls ran, the messages show {len(calls)} of them")
    entries = record.get("calls") or []
    calls = [ExecutedCall(c.turn, c.source, c.name, c.arguments, bool(entry.get("is_error")),
                          entry.get("deterministic") if isinstance(entry.get("deterministic"), bool) else None)
             for c, entry in zip(calls, entries)]
    # The states after each turn as recorded, else (BFCL's imported trajectories) their ground
    # truth's; only one per user message, else the final state alone is the target.
    per_turn = next((found for found in (record.get("turn_states"), record.get("target_turn_states"))
                     if isinstance(found, list) and len(found) == len(turns) and all(isinstance(s, dict) for s in found)), None)
    return Execution(turns, calls, dict(record["states"]), sorted(set(owners.values())),
                     [dict(states) for states in per_turn] if per_turn is not None else None)


def public_settings(settings: ExecutableSourceSettings) -> dict[str, Any]:
    """A source's configuration entry as an export may show it: never a secret. An MCP server's
    ``env`` and ``headers_from_env`` are left out (a value may be a secret, and which variable
    holds a header's token says where it is kept; :func:`environment` names what a replay must
    provide), and a URL loses its user info and query. A Python environment's ``initial_state``
    is given apart. What is left is a valid entry of ``tools.environments`` or ``tools.mcp``."""
    entry = settings.model_dump(mode="json", exclude_defaults=True, exclude={"initial_state", "env", "headers_from_env"})
    entry["name"] = settings.name
    if isinstance(settings, McpSourceSettings) and settings.url is not None:
        entry["url"] = public_url(settings.url)
    return entry


def environment(settings: ExecutableSourceSettings) -> dict[str, Any]:
    """How an export describes a source: its kind, its public configuration, and the names of
    the environment variables and HTTP headers a replay must provide (an MCP server's)."""
    mcp = isinstance(settings, McpSourceSettings)
    return {
        "name": settings.name,
        "kind": source_kind(settings),
        "config": public_settings(settings),
        "env_names": sorted(settings.env) if mcp else [],
        "header_names": sorted(settings.headers_from_env) if mcp else [],
    }


def source_kind(settings: ExecutableSourceSettings) -> str:
    return "mcp" if isinstance(settings, McpSourceSettings) else "python"


def initial_state(settings: ExecutableSourceSettings) -> Any:
    """The state a session of the source starts from, as configured (``None`` for an MCP server,
    whose fresh process starts as it starts)."""
    return settings.initial_state if isinstance(settings, PythonEnvironmentSettings) else None
