"""Importing the tools of one executable source (an MCP server, a Python environment).

The shard starts the source, lists its tools within ``start_timeout_seconds`` and checks them
like imported ones: the allow and deny lists choose functions by name, and each function the
definition checks reject is a rejection with their reason codes, while the source's other
functions are kept. A source that cannot start or list is one rejection, ``exec_start_failed``,
and the run goes on without it.

Then (``vet``, on by default) each admitted function is called with probe arguments
(:mod:`toolfactory.executable.vetting`): those that do not work here (save those that refused
every probe as data) are rejections with their class's code (``tool_needs_network``, ``tool_needs_credentials``, ``tool_errors_on_every_probe``),
and the tool keeps the card in its provenance (``vetting``), whose ``deterministic`` the
dialogues stage records with each call and the verifier's replay honours. The card is kept in
the storage root (``vetting/<source>-<hash>.json``, by the source's configuration and version)
and reused by later runs.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from toolfactory.executable.counts import SESSIONS_STARTED
from toolfactory.config import ToolsConfig
from toolfactory.executable.session import EXEC_START_FAILED, Environment, ExecutionFailed
from toolfactory.executable.settings import ExecutableSourceSettings
from toolfactory.models import Function, Tool, stable_id
from toolfactory.storage import ObjectStore
from toolfactory.stages.base import StageOutput
from toolfactory.definitions.validity import definition_problems

#: A function its source's documentation names but the source cannot run.
FUNCTION_MISSING = "exec_function_missing"
ATTEMPTS = 3  # argument sets tried per tool and round when a run vets a source
#: Per source, what vetting found of resetting its processes (see toolfactory.executable.pool).
WARM_SOURCES = "warm_sessions"


async def import_executable(name: str, tools: ToolsConfig, stage: str = "tools", store: ObjectStore | None = None) -> StageOutput:
    """The checked tools of the executable source `name` (vetted, with its card kept in `store`)."""
    # Here, not at the top: the MCP SDK takes a second to import, and a run without executable
    # sources never needs it.
    from toolfactory.executable.registry import environments, source_settings

    settings = source_settings(tools)[name]
    environment = environments(tools)[name]
    out = StageOutput(items_in=1)
    try:
        listed = await asyncio.wait_for(environment.list_tools(), settings.start_timeout_seconds)
    except (TimeoutError, ExecutionFailed) as exc:
        out.count(SESSIONS_STARTED, name)
        detail = exc.message if isinstance(exc, ExecutionFailed) else f"no tools listed within {settings.start_timeout_seconds:g} s"
        out.reject(stage, stable_id("executable", name), [EXEC_START_FAILED], {"source": name}, f"{name}: {detail}")
        return out
    from toolfactory.executable.vetting import source_version

    out.count(SESSIONS_STARTED, name)  # the listing's process
    for tool in listed:
        # The version of what runs, recorded with every call a dialogue makes on it: a replay on
        # another version that answers otherwise is drift (exec_source_drifted), not a bad record.
        tool.provenance["executable"] = {**tool.provenance.get("executable", {}), "version": source_version(tool, settings)}
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
        if good and settings.vet:
            good = await _vetted(tool.model_copy(update={"functions": good}), settings, environment, out, stage, store)
            if good is None:
                return out
        if good:
            out.records.append(tool.model_copy(update={"functions": good}))
            out.count("executable_tools", name)
    return out


async def _vetted(tool: Tool, settings: ExecutableSourceSettings, environment: Environment, out: StageOutput,
                  stage: str, store: ObjectStore | None) -> list[Function] | None:
    """The functions of `tool` that work here (its provenance gets the card); the others are
    rejected with their class's code. None when the source could not be vetted (rejected whole)."""
    from toolfactory.executable.vetting import (
        CARDS, PROVENANCE, REJECTION, WORKS, card_from, card_key, provenance, source_version, vet,
    )

    restricted = _Restricted(environment, tool)
    key = f"{CARDS}/{card_key(settings, source_version(tool, settings), ATTEMPTS)}.json"
    held = store.read_bytes_or_none(key) if store is not None else None
    card = card_from(json.loads(held)) if held else await vet(restricted, ATTEMPTS, settings.vet_timeout_seconds)
    if restricted.opened:
        out.count(SESSIONS_STARTED, settings.name, restricted.opened)
    if card.failure is not None:
        reason = card.failure.partition(":")[0]
        out.reject(stage, stable_id("executable", settings.name), [reason if reason.startswith("exec_") else EXEC_START_FAILED],
                   {"source": settings.name}, f"{settings.name}: vetting failed: {card.failure}")
        return None
    if held is None and store is not None:
        store.write_bytes(key, json.dumps(card.to_dict(), default=str).encode())
    out.count("vetting_cache", settings.name + (": reused" if held else ": made"))
    # Whether a reset process is as fresh as a new one: its sessions are then warm (pool.py).
    out.count(WARM_SOURCES, f"{settings.name}: " + {True: "reset keeps sessions apart", False: "a new process per session",
                                                     None: "nothing to tell a reset by"}[card.warm])
    tool.provenance[PROVENANCE] = provenance(card, cached=held is not None)
    found = {t.name: t for t in card.tools}
    working = []
    for fn in tool.functions:
        probed = found.get(fn.name)
        status = probed.status if probed is not None else WORKS
        out.count("vetted_functions", f"{settings.name}: {status}" + (" (refused)" if probed is not None and probed.refused else ""))
        if probed is None or probed.admitted:
            working.append(fn)
            continue
        single = tool.model_copy(update={"functions": [fn], "id": stable_id(tool.id, fn.name)})
        out.reject(stage, single.id, [REJECTION[status]], single.model_dump(),
                   f"{settings.name}.{fn.name}: {status} on {probed.probes} probe(s): {probed.answer}" if probed else "")
    return working


class _Restricted:
    """`environment` listing only the functions of `tool` (those admitted so far)."""

    def __init__(self, environment: Environment, tool: Tool) -> None:
        self._environment, self._tool, self.name = environment, tool, environment.name
        self.opened = 0
        """Sessions opened (each a process started: vetting wants fresh ones)."""

    async def list_tools(self) -> list[Tool]:
        return [self._tool]

    def session(self) -> Any:
        self.opened += 1
        return self._environment.session()


def _unrunnable(tool: Tool, function: str) -> list[tuple[str, str]]:
    # A source that says which functions it can run (a Python environment's public methods)
    # rejects documentation of any other.
    runnable = tool.provenance.get("methods")
    if isinstance(runnable, list) and function not in runnable:
        return [(FUNCTION_MISSING, f"{tool.name}.{function}: documented, but the source has no such function")]
    return []
