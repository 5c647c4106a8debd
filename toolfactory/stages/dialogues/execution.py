"""Real execution of the calls to executable tools in one dialogue.

A tool from an executable source (``tools.environments``, ``tools.mcp``) is never played by an
LLM: each of its calls goes to a session of its source, opened at the dialogue's first call to
it, so every dialogue starts from a fresh environment and never sees another's state. The tool
message holds the result verbatim; a result that is an error (a Python exception, an MCP
``isError``) is the answer the assistant sees and may recover from. A call whose arguments do
not fit the function's parameters is still answered with the 400 of the other tools, without
running (as a real API's validation would).

What happened is kept in the dialogue's ``generation["execution"]``: each executed call (its
source, name, arguments as sent, whether it was an error and whether the output cap cut it) and, when the dialogue
ends, the state each session was left in, which the verifier's replay compares against.

A failure of the environment itself (:class:`~toolfactory.executable.session.ExecutionFailed`)
rejects the dialogue with its reason code; the shard goes on. At most ``max_sessions`` sessions of
one source are open at once in a worker process's event loop: a dialogue takes a slot of every
executable source its task offers when it starts (in name order, so two dialogues never wait on
each other) and frees them when it ends, its sessions closed whatever happened.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from toolfactory.config import ToolsConfig
from toolfactory.executable.registry import environments, source_settings
from toolfactory.executable.session import (
    EXEC_START_FAILED,
    CallResult,
    Environment,
    ExecutionFailed,
    Session,
    executable_source,
)
from toolfactory.models import Function, Task, Tool, ToolCall, canonical_json
from toolfactory.stages.dialogues.agents import call_error

EXECUTION = "execution"


@dataclass
class _Source:
    environment: Environment
    slots: asyncio.Semaphore


# Per event loop (a semaphore belongs to one loop) and per configuration of the sources: the one
# piece of state a worker process keeps between dialogues, because the bound is per process.
_SOURCES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, dict[str, _Source]]] = weakref.WeakKeyDictionary()


def _sources(tools: ToolsConfig) -> dict[str, _Source]:
    by_config = _SOURCES.setdefault(asyncio.get_running_loop(), {})
    settings = source_settings(tools)
    key = canonical_json({name: s.model_dump(mode="json") for name, s in sorted(settings.items())})
    if key not in by_config:
        built = environments(tools)
        by_config[key] = {name: _Source(built[name], asyncio.Semaphore(s.max_sessions)) for name, s in settings.items()}
    return by_config[key]


class DialogueExecution:
    """The executable sources of one dialogue; use it as an async context manager around the
    dialogue (its sessions close and its slots free when the dialogue ends)."""

    def __init__(self, task: Task, tools: ToolsConfig) -> None:
        self._names = sorted({name for tool in task.tools if (name := executable_source(tool)) is not None})
        self._sources = _sources(tools) if self._names else {}
        self._sessions: dict[str, Session] = {}
        self._stack = AsyncExitStack()
        self._lock = asyncio.Lock()  # calls run one at a time, in the order they were made
        self.calls: list[dict[str, Any]] = []

    async def __aenter__(self) -> DialogueExecution:
        await self._stack.__aenter__()
        for name in self._names:
            if name not in self._sources:
                continue  # its calls fail (see `call`)
            slots = self._sources[name].slots
            await slots.acquire()
            self._stack.callback(slots.release)
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        return await self._stack.__aexit__(*exc)

    def runs(self, tool: Tool | None) -> bool:
        """Whether calls to `tool`'s functions are executed here."""
        return tool is not None and executable_source(tool) is not None

    async def respond(self, tool: Tool, function: Function | None, call: ToolCall) -> CallResult:
        """The answer to `call`: run, or the 400 the other tools give a call that cannot be valid."""
        error = call_error(function, call.name, call.arguments)
        if error is not None:
            return CallResult(content=json.dumps({"status_code": 400, "error": error}, ensure_ascii=False), is_error=True)
        return await self.call(tool, call, json.loads(call.arguments or "{}"))

    async def call(self, tool: Tool, call: ToolCall, arguments: dict[str, Any]) -> CallResult:
        """Run `call` on the session of `tool`'s source (opened at its first call)."""
        name = str(executable_source(tool))
        if name not in self._sources:
            raise ExecutionFailed(EXEC_START_FAILED, f"{name}: no executable source of this name is configured")
        async with self._lock:
            session = self._sessions.get(name)
            if session is None:
                session = self._sessions[name] = await self._open(name)
            result = await session.call(call.name, arguments)
        # The arguments as sent let the verifier's replay tell the calls of the dialogue's final
        # path from calls the session ran on abandoned branches (ToolLLM's search backtracks).
        self.calls.append({"source": name, "name": call.name, "arguments": call.arguments, "is_error": result.is_error,
                           "truncated": result.truncated})
        return result

    async def _open(self, name: str) -> Session:
        """A session of source `name`, held open by a task of its own until the dialogue ends.

        A dialogue makes its calls from whichever task reaches them first (parallel calls and
        self-consistency samples run in tasks of their own), but an MCP session is an anyio task
        group, which must be left by the task that entered it: so one task enters and leaves
        it, and the dialogue only uses it."""
        ready: asyncio.Future[Session] = asyncio.get_running_loop().create_future()
        done = asyncio.Event()

        async def hold() -> None:
            try:
                async with self._sources[name].environment.session() as session:
                    ready.set_result(session)
                    await done.wait()
            except BaseException as exc:
                if ready.done():
                    raise  # a failure while closing: the dialogue's end reports it
                ready.set_exception(exc)  # a failure to open: the call reports it

        holder = asyncio.create_task(hold(), name=f"session {name}")

        async def close() -> None:
            done.set()
            await holder

        self._stack.push_async_callback(close)
        return await ready

    async def metadata(self) -> dict[str, Any] | None:
        """What was executed and the state each session was left in (None when nothing ran)."""
        if not self._sessions:
            return None
        async with self._lock:
            states = {name: await session.state() for name, session in sorted(self._sessions.items())}
        return {"calls": self.calls, "states": states}
