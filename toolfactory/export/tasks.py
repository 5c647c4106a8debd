"""Verifiable tasks: what a reinforcement-learning trainer needs to replay a record whose tools
really ran, one JSON object a line in ``<split>.jsonl``::

    {"id": <record id>, "system": <system prompt or null>,
     "prompt": [{"role": "user", "content": ...}, ...],           # the user turns, in order
     "tools": [{"type": "function", "function": {...}}, ...],     # OpenAI tools JSON, names as the source has them
     "environments": [{"name": ..., "kind": "python" | "mcp", "config": {...}, "env_names": [...], "header_names": [...]}],
     "initial_state": {<source>: <state>},                        # a Python environment's; null for an MCP server
     "ground_truth": [{"turn": 0, "source": ..., "name": ..., "arguments": {...}, "is_error": false,
                       "deterministic": true}, ...],                # a replay must give its result again
     "target_state": {<source>: <state>},                         # generation.execution.states, of the sources called
     "target_turn_states": [{<source>: <state>}, ...]}            # after each user turn, where the record keeps them

``config`` is the source's entry of ``tools.environments`` or ``tools.mcp`` without secrets
(:func:`~toolfactory.export.executed.public_settings`). With ``initial_state`` put back for a
Python environment, or the variables and headers that ``env_names`` and ``header_names`` name
provided for an MCP server, it configures the same source again. A fresh session of it, given
the ground-truth calls in order, is left in ``target_state`` (for tools whose results depend on
nothing but their arguments and the state). ``ground_truth`` holds every call that ran, a call that raised included (marked
``is_error``: it ran, and the state after it is part of the target). A record that keeps the
state after each user turn (``generation.execution.turn_states``, a dialogue of several user
messages) gives it as ``target_turn_states``: the ground truth's calls of turns ``0..n`` leave
entry ``n`` (of the sources open by then), as BFCL checks after every turn; the last entry is
``target_state`` less the sources with nothing observable. A record made before records kept
them has no such field.

Only records whose calls really ran (``not_executed``), whose executed calls are the
dialogue's calls (``execution_not_replayable``), that call no tool an LLM played
(``played_calls``) and whose sources the run's configuration names (``source_not_configured``)
are written.
"""

from __future__ import annotations

from typing import Any

from toolfactory.export.base import SOURCE_NOT_CONFIGURED, JsonlExporter, Skip
from toolfactory.export.executed import ExecutedCall, environment, executed, initial_state
from toolfactory.models import Dialogue


class TasksExporter(JsonlExporter):
    name = "tasks"
    needs_tools = True
    needs_sources = True

    def _deterministic(self, call: ExecutedCall) -> bool:
        """Whether a replay must give the call's result again: as the source declares, else as
        vetting found when the record was made."""
        settings = self.sources.get(call.source)
        return settings.deterministic_tool(call.name, call.deterministic) if settings is not None else bool(call.deterministic)

    def convert(self, dialogue: Dialogue) -> dict[str, Any]:
        run = executed(dialogue, self.tools)
        missing = [name for name in run.sources if name not in self.sources]
        if missing:
            raise Skip(SOURCE_NOT_CONFIGURED, f"{', '.join(missing)} not in the run's configuration")
        sources = [self.sources[name] for name in run.sources]
        system = next((m.content for m in dialogue.messages if m.role == "system"), None)
        return {
            "id": dialogue.id,
            "system": system,
            "prompt": [{"role": "user", "content": turn} for turn in run.turns],
            "tools": [f.openai_tool() for f in dialogue.tools],
            "environments": [environment(s) for s in sources],
            "initial_state": {s.name: initial_state(s) for s in sources},
            "ground_truth": [{"turn": c.turn, "source": c.source, "name": c.name, "arguments": c.arguments,
                              "is_error": c.is_error, "deterministic": self._deterministic(c)} for c in run.calls],
            # A source the dialogue was offered but never called is left out: its session was never
            # opened, and a fresh one ends as it starts, which is nothing to compare.
            "target_state": {name: run.states[name] for name in run.sources if name in run.states},
            **({"target_turn_states": [{name: states[name] for name in run.sources if name in states} for states in run.turn_states]}
               if run.turn_states is not None else {}),
        }
