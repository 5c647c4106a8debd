"""Tasks from verified blueprints (APIGen-MT §2): ground truth first, then the dialogue.

For a tool from an executable source (``tools.environments``, ``tools.mcp``), the designer role
writes a task together with its ground truth: the user's request and, for a multi-turn task, the
follow-up requests over the same environment, each with the calls that fulfil it. The answer's
JSON Schema confines every call to the offered functions: one ``anyOf`` branch per function, its
name an ``enum`` of one value and its arguments the function's own parameters, so that an
endpoint's structured output can only name real functions with arguments that fit them.

The calls then run, in order, on a fresh session of the source. The blueprint is kept only if
every call succeeds (``blueprint_call_failed`` otherwise: an error result, or a failure of the
environment itself) and the calls change the environment's state
(``blueprint_state_unchanged``), unless every call is to a function its source declares
read-only (MCP's ``readOnlyHint``), whose task changes nothing by design. A kept task carries the
blueprint with the state the calls left as its target; the dialogues stage simulates the dialogue
from the requests alone, and the verifier accepts it only if its calls reach that state.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

from toolfactory.config import BlueprintsConfig
from toolfactory.executable.registry import environments, source_settings
from toolfactory.executable.session import (
    Environment,
    ExecutionFailed,
    executable_source,
)
from toolfactory.models import (
    EMPTY_OBJECT_SCHEMA,
    Blueprint,
    BlueprintCall,
    BlueprintTurn,
    Rejected,
    Task,
    Tool,
    canonical_json,
    stable_id,
)
from toolfactory.stages.base import ShardContext
from toolfactory.stages.dialogues.modes import OPEN_MODE
from toolfactory.stages.tasks.exploration import Explorer, section_for, with_section
from toolfactory.stages.tasks.toolalpaca import describe_functions

STAGE = "tasks"
CALL_FAILED = "blueprint_call_failed"
STATE_UNCHANGED = "blueprint_state_unchanged"
#: The starting state shown to the designer is cut here (a file system can be large).
STATE_CHARS = 4000

DESIGNER_PROMPT = """\
You design a task for an assistant that can use the tool below, together with its ground truth.
Write {turns} user request(s): the first opens the conversation, each later one follows up on
the previous ones over the same data. For each request give the function calls (1 to
{max_calls}) that fulfil it, in the order they run, with concrete argument values.
Guidelines:
1. The calls run one after the other on the tool's starting state (below): they must succeed
   there, using only names, paths and values that exist in it or that earlier calls create.
2. The calls should change the state (create, update, move, delete, send, book, ...).
3. Each request says, in a user's own words, everything its calls need (names, values, amounts)
   and never names a function.
<TOOL>
Name: {name}
Description: {description}
Functions:
{functions}
Starting state: {state}
</TOOL>"""


def call_schema(tool: Tool) -> dict[str, Any]:
    """One call of one of `tool`'s functions: a branch per function, its name and its parameters."""
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {"name": {"type": "string", "enum": [fn.name]}, "arguments": fn.parameters or dict(EMPTY_OBJECT_SCHEMA)},
                "required": ["name", "arguments"],
            }
            for fn in tool.functions
        ]
    }


def blueprint_schema(tool: Tool, turns: int, max_calls: int) -> dict[str, Any]:
    """The designer's answer: `turns` requests, each with 1..`max_calls` calls of `tool`'s functions."""
    return {
        "type": "object",
        "properties": {
            "turns": {
                "type": "array",
                "minItems": turns,
                "maxItems": turns,
                "items": {
                    "type": "object",
                    "properties": {
                        "request": {"type": "string", "minLength": 10},
                        "calls": {"type": "array", "minItems": 1, "maxItems": max_calls, "items": call_schema(tool)},
                    },
                    "required": ["request", "calls"],
                },
            }
        },
        "required": ["turns"],
    }


def read_only(tool: Tool, function: str) -> bool:
    """Whether `tool`'s source declares `function` read-only (MCP's ``readOnlyHint``)."""
    hints = ((tool.provenance.get("mcp") or {}).get("functions") or {}).get(function) or {}
    return hints.get("read_only") is True


class Blueprints:
    """Blueprint tasks of one tasks shard: the configured sources, built once, and a bound on the
    sessions of each source open at once (its ``max_sessions``), as in the dialogues stage."""

    def __init__(self, ctx: ShardContext, explorer: Explorer | None = None) -> None:
        self._ctx = ctx
        self._explorer = explorer
        self._settings: BlueprintsConfig = ctx.config.tasks.blueprints
        self._environments: dict[str, Environment] = environments(ctx.config.tools)
        self._slots = {name: asyncio.Semaphore(s.max_sessions) for name, s in source_settings(ctx.config.tools).items()}
        self._starting: dict[str, asyncio.Future[Any]] = {}

    def applies(self, tool: Tool) -> bool:
        """Whether `tool`'s tasks are blueprints: blueprints are on and it runs on a configured source."""
        return self._settings.enabled and executable_source(tool) in self._environments

    async def tasks(self, tool: Tool, count: int, rng: random.Random, recipe: str) -> list[Task | Rejected]:
        """`count` blueprint tasks for `tool`, each kept or rejected with its reason; the dialogue
        is simulated by `recipe`'s agents (toolllm's search becomes toolalpaca's simulation: its
        abandoned branches would leave calls in the one environment that no request asked for)."""
        recipe = "toolace" if recipe == "toolace" else "toolalpaca"
        source = str(executable_source(tool))
        if source not in self._starting:  # every fresh session starts from the same state
            self._starting[source] = asyncio.ensure_future(self._initial_state(source))
        try:
            initial = await self._starting[source]
        except ExecutionFailed as failed:
            return [self._rejected(tool, k, [CALL_FAILED], f"{failed.reason}: {failed.message}", {}) for k in range(count)]
        turns = [self._turns(rng) for _ in range(count)]
        section = await section_for(self._explorer, [tool])
        return list(await asyncio.gather(*(self._task(tool, source, initial, k, n, recipe, section) for k, n in enumerate(turns))))

    def _turns(self, rng: random.Random) -> int:
        if rng.random() < self._settings.multi_turn:
            return rng.randint(2, self._settings.max_turns)
        return 1

    async def _initial_state(self, source: str) -> Any:
        async with self._slots[source], self._environments[source].session() as session:
            return await session.state()

    async def _task(self, tool: Tool, source: str, initial: Any, k: int, turns: int, recipe: str,
                    section: str = "") -> Task | Rejected:
        state_text = json.dumps(initial, ensure_ascii=False)
        prompt = DESIGNER_PROMPT.format(
            turns=turns, max_calls=self._settings.max_calls, name=tool.name,
            description=tool.description or tool.introduction, functions=describe_functions(tool),
            state=state_text if len(state_text) <= STATE_CHARS else state_text[:STATE_CHARS] + " …(cut)",
        )
        prompt = with_section(prompt, section)
        answer = await self._ctx.gateway.structured(
            "designer", [{"role": "user", "content": prompt}], blueprint_schema(tool, turns, self._settings.max_calls),
            name="blueprint", sample=k,
        )
        plan = [BlueprintTurn(request=t["request"], calls=[BlueprintCall(**c) for c in t["calls"]]) for t in answer["turns"]]
        detail = {"turns": [t.model_dump() for t in plan]}
        async with self._slots[source]:
            try:
                async with self._environments[source].session() as session:
                    for n, turn in enumerate(plan):
                        for m, call in enumerate(turn.calls):
                            result = await session.call(call.name, call.arguments)
                            if result.is_error:
                                return self._rejected(tool, k, [CALL_FAILED],
                                                      f"turns[{n}].calls[{m}] {call.name}: {result.content[:300]}", detail)
                    final = await session.state()
            except ExecutionFailed as failed:
                return self._rejected(tool, k, [CALL_FAILED], f"{failed.reason}: {failed.message}", detail)
        names = [call.name for turn in plan for call in turn.calls]
        if canonical_json(final) == canonical_json(initial) and not all(read_only(tool, name) for name in names):
            why = "the source has no observable state" if final is None else "the calls left the state as it was"
            return self._rejected(tool, k, [STATE_UNCHANGED], why, detail)
        return Task(
            id=stable_id(tool.id, str(self._ctx.config.run.seed), "blueprint", str(k)),
            tools=[tool],
            instruction=plan[0].request,
            relevant_functions=list(dict.fromkeys(names)),
            recipe=recipe,
            mode=OPEN_MODE,
            turns=len(plan),
            blueprint=Blueprint(turns=plan, target_state={source: final}),
        )

    def _rejected(self, tool: Tool, k: int, reasons: list[str], detail: str, record: dict[str, Any]) -> Rejected:
        return Rejected(id=stable_id(tool.id, str(self._ctx.config.run.seed), "blueprint", str(k)), stage=STAGE,
                        reasons=reasons, detail=detail, record={"tool": tool.id, **record})
