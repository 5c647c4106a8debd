"""One rollout of a task: the policy's tool calls run on real sessions of the task's sources
(:mod:`toolfactory.executable`), opened at a source's first call and closed with the episode,
as the dialogues stage runs them. What ran is kept, in the shape the verifier's execution layer
reads (``generation["execution"]["calls"]``), for :func:`toolfactory.rl.reward.score`, each call
with the user turn it answers (:attr:`Episode.turn` when it ran; an environment moves the episode
on with :meth:`Episode.next_turn` as it gives the policy the task's next user message), so that
the state after every turn can be held to the task's ``target_turn_states``.

A call to a function the task does not offer, or whose arguments are not a JSON object, is
answered with an error and does not run. A failure of the source itself (it hung, crashed,
flooded its output) ends the episode: :class:`~toolfactory.executable.session.ExecutionFailed`
propagates and the trajectory scores 0.
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from toolfactory.executable.pool import open_session, warm
from toolfactory.executable.session import CallResult, Environment, Session
from toolfactory.executable.settings import ExecutableSourceSettings
from toolfactory.rl.tasks import Task


@dataclass
class Episode:
    """The sessions and executed calls of one rollout of `task`."""

    task: Task
    calls: list[dict[str, Any]] = field(default_factory=list)
    failure: str | None = None
    """The reason code of a source failure that ended the episode."""
    turn: int = 0
    """The user turn the policy is answering (0 for the first)."""

    def __post_init__(self) -> None:
        self._sources: dict[str, tuple[Environment, ExecutableSourceSettings]] = self.task.sources()
        self._owners = self.task.owners()
        self._offered = {str(t["function"]["name"]) for t in self.task.tools}
        self._sessions: dict[str, Session] = {}
        self._stack = AsyncExitStack()
        self._listed = False

    async def __aenter__(self) -> Episode:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        self._sessions.clear()
        await self._stack.aclose()

    def next_turn(self) -> str | None:
        """Move on to the task's next user turn: its message, or None when the last one was answered."""
        turns = self.task.user_turns
        self.turn = min(self.turn + 1, len(turns))
        return turns[self.turn] if self.turn < len(turns) else None

    async def _owner(self, name: str) -> str | None:
        if name in self._owners:
            return self._owners[name]
        if len(self._sources) == 1:
            return next(iter(self._sources))
        if not self._listed:  # a function the ground truth never calls: ask the sources
            self._listed = True
            for source, (env, _) in self._sources.items():
                for tool in await env.list_tools():
                    for fn in tool.functions:
                        self._owners.setdefault(fn.name, source)
        return self._owners.get(name)

    async def call(self, name: str, arguments: str) -> CallResult:
        """Run one call of the policy (`arguments` as the raw JSON text it produced)."""
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            return CallResult(content=f"Error: the arguments are not valid JSON ({exc.msg})", is_error=True)
        if not isinstance(parsed, dict):
            return CallResult(content="Error: the arguments must be a JSON object", is_error=True)
        source = await self._owner(name) if name in self._offered else None
        if source is None or source not in self._sources:
            return CallResult(content=f"Error: no function named {name!r} is available", is_error=True)
        if source not in self._sessions:
            environment, settings = self._sources[source]
            # A warm process, reset, where the source's settings ask for one (`warm_sessions`).
            self._sessions[source] = await self._stack.enter_async_context(open_session(environment, settings, warm(settings, None)))
        result = await self._sessions[source].call(name, parsed)
        self.calls.append({"turn": self.turn, "source": source, "name": name, "arguments": arguments, "is_error": result.is_error,
                           "truncated": result.truncated, "deterministic": self.task.deterministic().get(name, False)})
        return result
