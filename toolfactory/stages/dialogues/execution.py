"""Real execution of the calls to executable tools in one dialogue.

A tool from an executable source (``tools.environments``, ``tools.mcp``) is never played by an
LLM: each of its calls goes to a session of its source, opened at the dialogue's first call to
it, so every dialogue starts from a fresh environment and never sees another's state. The tool
message holds the result verbatim; a result that is an error (a Python exception, an MCP
``isError``) is the answer the assistant sees and may recover from. A call whose arguments do
not fit the function's parameters is still answered with the 400 of the other tools, without
running (as a real API's validation would), unless its source's ``near_miss_types`` is
``coerce`` and its arguments only miss their types narrowly (:mod:`toolfactory.executable.coercion`):
:meth:`DialogueExecution.well_typed` then gives the assistant's message the well-typed call
before anything checks or runs it, so the record holds the call as it ran.

What happened is kept in the dialogue's ``generation["execution"]``: each executed call (its
source, name, arguments as run, whether it was an error and whether the output cap cut it; for a
coerced call also ``sent_arguments``, the model's text, and its ``coercions``, each a ``kind`` and
the ``path`` of the value as a JSON Pointer) and, when the dialogue ends, the state each session
was left in, which the verifier's replay compares against. A dialogue of more than one user
message also keeps ``turn_states``: for each user message in order, the state of each session
open by then after the calls that answer it (BFCL checks the state after every turn: a booking
made, changed and cancelled ends where the task does, but not through its states). The driver
says when the calls of a later user message begin (:meth:`DialogueExecution.user_turn`), and the
states are taken then, so a dialogue costs one state read per source and turn; a source whose
state is ``None`` (nothing observable) is left out, and the last entry is the final ``states``.

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
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from typing import Any

from toolfactory.config import ToolsConfig
from toolfactory.executable.coercion import Coercion, coerce
from toolfactory.executable.registry import environments, source_settings
from toolfactory.executable.session import (
    EXEC_START_FAILED,
    CallResult,
    Environment,
    ExecutionFailed,
    Session,
    executable_source,
)
from toolfactory.executable.settings import ExecutableSourceSettings
from toolfactory.executable.pool import open_session, warm
from toolfactory.executable.error_convention import ErrorConvention
from toolfactory.executable.vetting import vetted_error_convention, vetted_function, vetted_warm
from toolfactory.models import Function, Message, Task, Tool, ToolCall, canonical_json
from toolfactory.stages.dialogues.agents import call_error, unsendable
from toolfactory.stages.verify.from_record import RESULT_DIGEST, result_digest

EXECUTION = "execution"


@dataclass
class _Source:
    environment: Environment
    settings: ExecutableSourceSettings
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
        by_config[key] = {name: _Source(built[name], s, asyncio.Semaphore(s.max_sessions)) for name, s in settings.items()}
    return by_config[key]


class DialogueExecution:
    """The executable sources of one dialogue; use it as an async context manager around the
    dialogue (its sessions close and its slots free when the dialogue ends)."""

    def __init__(self, task: Task, tools: ToolsConfig) -> None:
        self._names = sorted({name for tool in task.tools if (name := executable_source(tool)) is not None})
        self._sources = _sources(tools) if self._names else {}
        # Each executable function by name, as the stage finds a call's tool (the first offered).
        self._functions: dict[str, tuple[str, Function]] = {}
        self._versions: dict[str, str] = {}
        self._unreproducible: set[str] = set()  # sources whose state two identical sessions disagree on
        # How each source answers a failed call without flagging it, as vetting learnt: such an
        # answer is recorded (and shown to the simulation) as the error it is.
        self._conventions: dict[str, ErrorConvention] = {}
        for tool in task.tools:
            source = executable_source(tool)
            if source is not None and (tool.provenance.get("executable") or {}).get("version"):
                self._versions.setdefault(source, str(tool.provenance["executable"]["version"]))
            if source is not None and (tool.provenance.get("vetting") or {}).get("state_reproducible") is False:
                self._unreproducible.add(source)
            if source is not None and source not in self._conventions and vetted_error_convention(tool):
                self._conventions[source] = vetted_error_convention(tool)
            for function in tool.functions if source is not None else []:
                self._functions.setdefault(function.name, (source, function))
        # The coerced calls, by what they hold as run: what the model sent and how it was changed.
        self._coerced: dict[tuple[str, str, str], tuple[str, tuple[Coercion, ...]]] = {}
        self._sessions: dict[str, Session] = {}
        self._stack = AsyncExitStack()
        self._lock = asyncio.Lock()  # calls run one at a time, in the order they were made
        self.calls: list[dict[str, Any]] = []
        self.warm: dict[str, bool] = {}  # the sources whose session came from the warm pool
        self._turn_states: list[dict[str, Any]] = []  # after each user message whose calls are done

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

    def well_typed(self, calls: list[ToolCall]) -> list[ToolCall]:
        """`calls` as they will run: a call to an executable function whose source coerces
        near-miss types and whose arguments coercion makes valid, as a copy with those arguments
        (the other calls as they are). The assistant's message is to hold what this returns."""
        return [self._well_typed(call) for call in calls]

    def _well_typed(self, call: ToolCall) -> ToolCall:
        found = self._functions.get(call.name)
        source = self._sources.get(found[0]) if found is not None else None
        if found is None or source is None or source.settings.near_miss_types != "coerce":
            return call
        function = found[1]
        if unsendable(function, call.name, call.arguments) is not None:
            return call
        try:
            coerced = coerce(function.parameters, json.loads(call.arguments or "{}"))
        except Exception:  # noqa: BLE001 - a schema jsonschema cannot use: the call is checked as it was sent
            return call
        if not coerced.coercions:
            return call
        fixed = call.model_copy(update={"arguments": json.dumps(coerced.arguments, ensure_ascii=False)})
        self._coerced[(fixed.id, fixed.name, fixed.arguments)] = (call.arguments, coerced.coercions)
        return fixed

    async def respond(self, tool: Tool, function: Function | None, call: ToolCall) -> CallResult:
        """The answer to `call` (as :meth:`well_typed` made it): run, or the 400 the other tools
        give a call that cannot be valid."""
        error = call_error(function, call.name, call.arguments)
        if error is not None:
            return CallResult(content=json.dumps({"status_code": 400, "error": error}, ensure_ascii=False), is_error=True)
        return await self.call(tool, call, json.loads(call.arguments or "{}"))

    async def user_turn(self, turn: int) -> None:
        """The calls that follow answer user message `turn` (0 for the first): the states the
        earlier user messages' calls left are taken now, before any of these runs."""
        if not self._names:
            return  # nothing here runs for real
        async with self._lock:
            while len(self._turn_states) < turn:
                self._turn_states.append(await self._observed())

    async def _observed(self) -> dict[str, Any]:
        """The state of each open session that has an observable one (the lock held)."""
        states = {name: await session.state() for name, session in sorted(self._sessions.items())}
        return {name: state for name, state in states.items() if state is not None}

    async def call(self, tool: Tool, call: ToolCall, arguments: dict[str, Any]) -> CallResult:
        """Run `call` on the session of `tool`'s source (opened at its first call)."""
        name = str(executable_source(tool))
        if name not in self._sources:
            raise ExecutionFailed(EXEC_START_FAILED, f"{name}: no executable source of this name is configured")
        try:
            async with self._lock:
                session = self._sessions.get(name)
                if session is None:
                    session = self._sessions[name] = await self._open(name, vetted_warm(tool))
                result = await session.call(call.name, arguments)
            convention = self._conventions.get(name)
            if not result.is_error and convention is not None and convention.matches(result.content, result.structured):
                result = replace(result, is_error=True)
        except ExecutionFailed as failed:
            # The call was made and its environment failed it: kept with the rejected dialogue, so
            # that it counts with the calls its source was given.
            self.calls.append({"source": name, "name": call.name, "arguments": call.arguments, "is_error": True,
                               "failure": failed.reason})
            raise
        # The arguments as run (the message's) let the verifier's replay tell the calls of the
        # dialogue's final path from calls the session ran on abandoned branches (ToolLLM's search
        # backtracks).
        entry: dict[str, Any] = {"source": name, "name": call.name, "arguments": call.arguments,
                                 "is_error": result.is_error, "truncated": result.truncated,
                                 # What the model is shown, so a verify from the record can tell an edited answer.
                                 RESULT_DIGEST: result_digest(result.content)}
        vetted = vetted_function(tool, call.name)
        if isinstance(vetted.get("deterministic"), bool):  # the replay holds it to its result if so
            entry["deterministic"] = vetted["deterministic"]
        coerced = self._coerced.get((call.id, call.name, call.arguments))
        if coerced is not None:
            entry["sent_arguments"] = coerced[0]
            entry["coercions"] = [{"kind": c.kind, "path": c.pointer} for c in coerced[1]]
        self.calls.append(entry)
        return result

    async def _open(self, name: str, vetted: bool | None) -> Session:
        """A session of source `name`, held open by a task of its own until the dialogue ends.

        A dialogue makes its calls from whichever task reaches them first (parallel calls and
        self-consistency samples run in tasks of their own), but an MCP session is an anyio task
        group, which must be left by the task that entered it: so one task enters and leaves
        it, and the dialogue only uses it."""
        ready: asyncio.Future[Session] = asyncio.get_running_loop().create_future()
        done = asyncio.Event()

        async def hold() -> None:
            try:
                source = self._sources[name]
                reused = warm(source.settings, vetted)
                async with open_session(source.environment, source.settings, reused) as session:
                    self.warm[name] = reused
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

    async def metadata(self, messages: Sequence[Message] = ()) -> dict[str, Any] | None:
        """What was executed and the state each session was left in (None when nothing ran);
        with the dialogue's `messages`, the states after each user message too (when it has more
        than one, see the module doc)."""
        if not self._sessions:
            return None
        async with self._lock:
            states = {name: await session.state() for name, session in sorted(self._sessions.items())}
        users = sum(message.role == "user" for message in messages)
        observed = {name: state for name, state in states.items() if state is not None}
        # The user messages after the last one whose calls ran left the final state.
        turn_states = [*self._turn_states[:users], *[observed] * max(users - len(self._turn_states), 0)]
        # How each session began: a process started for it, or a warm one reset (the verifier's
        # replay opens its sessions the same way).
        began = {name: "reused" if getattr(session, "reused", False) else "started" for name, session in sorted(self._sessions.items())}
        out = {"calls": self.calls, "states": states, "sessions": began,
               "warm": {name: self.warm.get(name, False) for name in sorted(self._sessions)}}
        if users > 1 and observed:
            out["turn_states"] = turn_states
        versions = {name: self._versions[name] for name in sorted(self._sessions) if self._versions.get(name)}
        if versions:
            out["versions"] = versions  # what ran, by source: a replay on another version may drift
        conventions = {name: self._conventions[name].to_dict() for name in sorted(self._sessions) if name in self._conventions}
        if conventions:
            out["error_conventions"] = conventions  # the replay and the record check read errors alike
        unreproducible = sorted(self._unreproducible & set(self._sessions))
        if unreproducible:
            out["state_unreproducible"] = unreproducible  # vetting: the replay cannot compare their state
        return out
