"""Tasks from verified blueprints (APIGen-MT §2): ground truth first, then the dialogue.

For a tool from an executable source (``tools.environments``, ``tools.mcp``), the designer role
writes a task together with its ground truth: the user's request and, for a multi-turn task, the
follow-up requests over the same environment, each with the calls that fulfil it. The answer's
JSON Schema confines every call to the offered functions: one ``anyOf`` branch per function, its
name an ``enum`` of one value and its arguments the function's own parameters (with the values
a BFCL doc lists in prose, ``[Enum]: [...]``, as an ``enum``), so that an endpoint's structured
output can only name real functions with arguments that fit them.

A share of blueprints (``spanning``) is designed over two sources: the anchor's and one drawn
from the pool's other executable sources (APIGen-MT's tasks that read in one place and act in
another: a file's content filed as a ticket). Each call goes to the source of its function.

The calls then run, in order, on fresh sessions of their sources. The blueprint is kept only if
each call takes only values the user states (``blueprint_value_unstated`` otherwise: a value in
neither the requests so far nor an earlier call's answer, since the dialogue's user turns are the
requests word for word and the assistant can take a value from nowhere else), every call succeeds
(``blueprint_call_failed`` otherwise: an error result, an answer with a non-empty error field, or
a failure of the environment itself) and the calls change some source's state. Calls that only read (functions vetting found to change nothing) give
``blueprint_read_only``: the verifier checks a dialogue by the state it reaches, and a read
leaves it as it was, so any dialogue would pass. Calls that should have changed it but did not
give ``blueprint_state_unchanged``. Every call is to a function its source declares read-only
(MCP's ``readOnlyHint``): kept, on the source's word, as a task that changes nothing by design.

A failed blueprint goes back to the designer up to ``repairs`` times, with what each call
answered and why it failed (APIGen-MT's feedback from execution), and is written again whole.

A kept task carries the blueprint with the state the calls left, per source, as its target; the
dialogues stage simulates the dialogue from the requests alone, and the verifier accepts it only
if its calls reach that state.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections import Counter
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from collections.abc import AsyncIterator, Iterator
from typing import Any, Sequence

from toolfactory.config import BlueprintsConfig
from toolfactory.errors import LLMFailure
from toolfactory.executable.registry import environments, source_settings
from toolfactory.executable.session import (
    Environment,
    ExecutionFailed,
    Session,
    executable_source,
)
from toolfactory.executable.pool import open_session, warm
from toolfactory.executable.vetting import vetted_function, vetted_warm
from toolfactory.models import (
    EMPTY_OBJECT_SCHEMA,
    Blueprint,
    BlueprintCall,
    BlueprintTurn,
    Function,
    Rejected,
    Task,
    Tool,
    canonical_json,
    stable_id,
)
from toolfactory.stages.base import ShardContext
from toolfactory.stages.dialogues.modes import OPEN_MODE
from toolfactory.stages.tasks.exploration import Explorer, answer_value, refusal, section_for, with_section
from toolfactory.stages.tasks.sampling import other_source_tool
from toolfactory.stages.tasks.toolalpaca import describe_functions

STAGE = "tasks"
CALL_FAILED = "blueprint_call_failed"
STATE_UNCHANGED = "blueprint_state_unchanged"
READ_ONLY = "blueprint_read_only"
VALUE_UNSTATED = "blueprint_value_unstated"
#: The scenario of a task whose blueprint's calls use two sources.
TWO_SOURCES = "two_sources"
#: The starting state shown to the designer is cut here (a file system can be large).
STATE_CHARS = 4000
#: What a call answered, as the repair prompt shows it, is cut here.
ANSWER_CHARS = 300

_GUIDELINES = """\
Write {turns} user request(s): the first opens the conversation, each later one follows up on
the previous ones over the same data. For each request give the function calls (1 to
{max_calls}) that fulfil it, in the order they run, with concrete argument values.
Guidelines:
1. The calls run one after the other on the tool's starting state (below): they must succeed
   there, using only names, paths and values that exist in it or that earlier calls create.
2. The calls should change the state (create, update, move, delete, send, book, ...).
3. Each request says, in a user's own words, everything its calls need (names, values, amounts)
   and never names a function."""


#: Over two sources: the same guidelines, and a fourth that asks for a task needing both.
SPANNING_PROMPT = """\
You design a task for an assistant that can use the two tools below, together with its ground truth.
""" + _GUIDELINES.replace("on the tool's starting state", "on the tools' starting states") + """
4. The task needs both tools: a value read with one (a file's content, a name, an amount, an id)
   is used in a call of the other (to file a ticket, place an order, send a message, ...).
{tools}"""

_TOOL_BLOCK = """\
<TOOL>
Name: {name}
Description: {description}
Functions:
{functions}
Starting state: {state}
</TOOL>"""

DESIGNER_PROMPT = """\
You design a task for an assistant that can use the tool below, together with its ground truth.
""" + _GUIDELINES + "\n" + _TOOL_BLOCK

REPAIR_PROMPT = """\
That blueprint was run on fresh environments and did not hold: {problem}
What its calls answered, in order:
{trace}
Write the whole blueprint again, in the same form, so that every call succeeds from the starting
state and the calls change the state: a call that needs a login or an id first gets the call that
provides it before it, a call names only what exists or what an earlier call made, and each
request states every value its calls take that no earlier call's answer gives."""

# BFCL's docs give a parameter's allowed values in its description: `... [Enum]: ["engage", "release"]`.
_DOCUMENTED_ENUM = re.compile(r"\[Enum\]:\s*(\[[^\]]*\])")


def _documented_enum(schema: Any) -> list[Any] | None:
    match = _DOCUMENTED_ENUM.search(str(schema.get("description") or "")) if isinstance(schema, dict) else None
    if match is None:
        return None
    try:
        values = json.loads(match.group(1))
    except ValueError:
        return None
    return values if isinstance(values, list) and values and all(isinstance(v, (str, int, float)) for v in values) else None


def confined_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    """`parameters` with the allowed values a property's description lists (``[Enum]: [...]``)
    as its ``enum`` (its items' for an array), where the schema does not already have one."""
    props = parameters.get("properties")
    if not isinstance(props, dict):
        return parameters
    confined: dict[str, Any] = {}
    for name, schema in props.items():
        values = _documented_enum(schema)
        if values is not None and schema.get("type") == "string" and "enum" not in schema:
            schema = {**schema, "enum": values}
        elif values is not None and schema.get("type") == "array" and isinstance(schema.get("items"), dict) \
                and schema["items"].get("type") == "string" and "enum" not in schema["items"]:
            schema = {**schema, "items": {**schema["items"], "enum": values}}
        confined[name] = schema
    return {**parameters, "properties": confined}


def _tools(tools: Tool | Sequence[Tool]) -> list[Tool]:
    return [tools] if isinstance(tools, Tool) else list(tools)


def call_schema(tools: Tool | Sequence[Tool]) -> dict[str, Any]:
    """One call of one of the functions of `tools`: a branch per function, its name and its parameters."""
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {"name": {"type": "string", "enum": [fn.name]},
                               "arguments": confined_parameters(fn.parameters) if fn.parameters else dict(EMPTY_OBJECT_SCHEMA)},
                "required": ["name", "arguments"],
            }
            for tool in _tools(tools) for fn in tool.functions
        ]
    }


def blueprint_schema(tools: Tool | Sequence[Tool], turns: int, max_calls: int) -> dict[str, Any]:
    """The designer's answer: `turns` requests, each with 1..`max_calls` calls of the functions of `tools`."""
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
                        "calls": {"type": "array", "minItems": 1, "maxItems": max_calls, "items": call_schema(tools)},
                    },
                    "required": ["request", "calls"],
                },
            }
        },
        "required": ["turns"],
    }


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(path, value) of each scalar inside an argument's `value` (``entities[0].name``)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def _spellings(value: Any) -> list[str]:
    """How a user may write `value` in a request (none for a flag or a null: a request says
    "unlock the doors", not "true")."""
    if value is None or isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [str(value)]
    if isinstance(value, float):
        return list(dict.fromkeys([repr(value), f"{value:g}", *([str(int(value))] if value.is_integer() else [])]))
    text = " ".join(str(value).split())
    return [text] if text else []


def unstated_value(call: BlueprintCall, function: Function | None, said: str) -> tuple[str, Any] | None:
    """The first value of `call` (its path and value) that `said` (the requests so far and the
    earlier calls' answers) does not hold, ignoring case and spacing; None when all are there. A
    value a parameter takes by default needs no saying: an assistant that leaves it out sends
    the same call."""
    said = " ".join(said.split()).casefold()
    properties = (function.parameters.get("properties") or {}) if function is not None else {}
    for name, value in call.arguments.items():
        schema = properties.get(name)
        if isinstance(schema, dict) and "default" in schema and canonical_json(schema["default"]) == canonical_json(value):
            continue
        for path, leaf in _leaves(value, name):
            spellings = _spellings(leaf)
            if spellings and not any(spelling.casefold() in said for spelling in spellings):
                return path, leaf
    return None


def read_only(tool: Tool, function: str) -> bool:
    """Whether `tool`'s source declares `function` read-only (MCP's ``readOnlyHint``)."""
    hints = ((tool.provenance.get("mcp") or {}).get("functions") or {}).get(function) or {}
    return hints.get("read_only") is True


def only_reads(tool: Tool, function: str) -> bool:
    """Whether `function` changes nothing: declared read-only, or found so by vetting."""
    return read_only(tool, function) or (vetted_function(tool, function) or {}).get("changes_state") is False


@dataclass
class Outcome:
    """What running a blueprint's calls gave: the final state per source, what each call
    answered (for the repair prompt), and the reason it is rejected (None: kept)."""

    final: dict[str, Any] = field(default_factory=dict)
    trace: list[str] = field(default_factory=list)
    reason: str | None = None
    detail: str = ""


class Blueprints:
    """Blueprint tasks of one tasks shard: the configured sources, built once, and a bound on the
    sessions of each source open at once (its ``max_sessions``), as in the dialogues stage."""

    def __init__(self, ctx: ShardContext, explorer: Explorer | None = None) -> None:
        self._ctx = ctx
        self._explorer = explorer
        self._settings: BlueprintsConfig = ctx.config.tasks.blueprints
        self._environments: dict[str, Environment] = environments(ctx.config.tools)
        self._source_settings = source_settings(ctx.config.tools)
        self._slots = {name: asyncio.Semaphore(s.max_sessions) for name, s in self._source_settings.items()}
        self._starting: dict[str, asyncio.Future[Any]] = {}
        self._warm: dict[str, bool | None] = {}  # what vetting found of each source's reset
        self.sessions: Counter[tuple[str, str]] = Counter()
        """Sessions opened, by (source, ``started`` or ``reused``): the stage counts them."""

    def applies(self, tool: Tool) -> bool:
        """Whether `tool`'s tasks are blueprints: blueprints are on and it runs on a configured source."""
        return self._settings.enabled and executable_source(tool) in self._environments

    async def tasks(self, tool: Tool, count: int, rng: random.Random, recipe: str) -> list[Task | Rejected]:
        """`count` blueprint tasks for `tool`, each kept or rejected with its reason; the dialogue
        is simulated by `recipe`'s agents (toolllm's search becomes toolalpaca's simulation: its
        abandoned branches would leave calls in the one environment that no request asked for)."""
        recipe = "toolace" if recipe == "toolace" else "toolalpaca"
        turns = [self._turns(rng) for _ in range(count)]
        designs = [[tool, *self._partner(tool, k)] for k in range(count)]
        for design in designs:
            for used in design:
                self._warm.setdefault(str(executable_source(used)), vetted_warm(used))
        return list(await asyncio.gather(*(self._task(tools, k, n, recipe) for k, (tools, n) in enumerate(zip(designs, turns)))))

    def _turns(self, rng: random.Random) -> int:
        if rng.random() < self._settings.multi_turn:
            return rng.randint(2, self._settings.max_turns)
        return 1

    def _partner(self, tool: Tool, k: int) -> list[Tool]:
        """The second source's tool of blueprint `k` ([] for a one-source blueprint), drawn by
        its own seed, so that the draws of turns are those of a run without `spanning`."""
        if self._explorer is None or self._settings.spanning <= 0:
            return []
        rng = random.Random(f"{self._ctx.config.run.seed}:blueprint-partner:{tool.id}:{k}")
        if rng.random() >= self._settings.spanning:
            return []
        candidates = {name: t for name, t in self._explorer.source_tools().items() if name in self._environments}
        partner = other_source_tool(candidates, str(executable_source(tool)), tool, rng)
        return [partner] if partner is not None else []

    async def _initial_state(self, source: str) -> Any:
        if source not in self._starting:  # every fresh session starts from the same state
            self._starting[source] = asyncio.ensure_future(self._read_state(source))
        return await self._starting[source]

    async def _read_state(self, source: str) -> Any:
        async with self._slots[source], self._session(source) as session:
            return await session.state()

    @asynccontextmanager
    async def _session(self, source: str) -> AsyncIterator[Session]:
        """A fresh session of `source`: a warm process reset for it where vetting found the reset
        keeps sessions apart, as the dialogues stage opens them (:mod:`toolfactory.executable.pool`)."""
        settings = self._source_settings[source]
        async with open_session(self._environments[source], settings, warm(settings, self._warm.get(source))) as session:
            self.sessions[(source, "reused" if getattr(session, "reused", False) else "started")] += 1
            yield session

    def _prompt(self, tools: list[Tool], turns: int, initial: dict[str, Any]) -> str:
        def block(tool: Tool) -> dict[str, str]:
            state = json.dumps(initial[str(executable_source(tool))], ensure_ascii=False)
            return {"name": tool.name, "description": tool.description or tool.introduction,
                    "functions": describe_functions(tool),
                    "state": state if len(state) <= STATE_CHARS else state[:STATE_CHARS] + " …(cut)"}

        if len(tools) == 1:
            return DESIGNER_PROMPT.format(turns=turns, max_calls=self._settings.max_calls, **block(tools[0]))
        return SPANNING_PROMPT.format(turns=turns, max_calls=self._settings.max_calls,
                                      tools="\n".join(_TOOL_BLOCK.format(**block(tool)) for tool in tools))

    async def _task(self, tools: list[Tool], k: int, turns: int, recipe: str) -> Task | Rejected:
        anchor = tools[0]
        sources = [str(executable_source(tool)) for tool in tools]
        try:
            initial = {source: await self._initial_state(source) for source in sources}
        except ExecutionFailed as failed:
            return self._rejected(anchor, tools, k, CALL_FAILED, f"{failed.reason}: {failed.message}", {})
        prompt = with_section(self._prompt(tools, turns, initial), await section_for(self._explorer, tools))
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        schema = blueprint_schema(tools, turns, self._settings.max_calls)
        for attempt in range(self._settings.repairs + 1):
            try:
                answer = await self._ctx.gateway.structured("designer", messages, schema, name="blueprint", sample=k)
            except LLMFailure as failed:
                if failed.transient:
                    raise  # the endpoint's fault: the shard is retried
                # An answer that fits no call (after the gateway's re-asks) loses this blueprint
                # alone, not the other blueprints of the tool.
                return self._rejected(anchor, tools, k, failed.reason, str(failed)[:ANSWER_CHARS], {})
            plan = [BlueprintTurn(request=t["request"], calls=[BlueprintCall(**c) for c in t["calls"]]) for t in answer["turns"]]
            outcome = await self._run(tools, plan, initial)
            if outcome.reason is None:
                return self._kept(tools, k, plan, outcome.final, recipe, attempt)
            if attempt == self._settings.repairs:
                detail = outcome.detail if not attempt else f"{outcome.detail} (after {attempt} repair(s))"
                return self._rejected(anchor, tools, k, outcome.reason, detail, {"turns": [t.model_dump() for t in plan]})
            messages += [{"role": "assistant", "content": json.dumps(answer, ensure_ascii=False)},
                         {"role": "user", "content": REPAIR_PROMPT.format(problem=outcome.detail, trace="\n".join(outcome.trace))}]
        raise AssertionError("unreachable: the last attempt returns")

    async def _run(self, tools: list[Tool], plan: list[BlueprintTurn], initial: dict[str, Any]) -> Outcome:
        """Run `plan`'s calls on fresh sessions of their sources (opened in name order, as the
        dialogues stage takes its slots) and judge what they did."""
        source_of: dict[str, str] = {}
        tool_of: dict[str, Tool] = {}
        for tool in tools:  # the anchor's function wins a name both have (the partner has none)
            for fn in tool.functions:
                source_of.setdefault(fn.name, str(executable_source(tool)))
                tool_of.setdefault(fn.name, tool)
        out = Outcome()
        names = sorted(initial)
        try:
            async with AsyncExitStack() as stack:
                for name in names:
                    await stack.enter_async_context(self._slots[name])
                sessions = {name: await stack.enter_async_context(self._session(name)) for name in names}
                answers: list[str] = []  # what the calls answered so far: the assistant sees it too
                for n, turn in enumerate(plan):
                    for m, call in enumerate(turn.calls):
                        where = f"turns[{n}].calls[{m}] {call.name}"
                        said = "\n".join([*(t.request for t in plan[:n + 1]), *answers])
                        missing = unstated_value(call, tool_of[call.name].function(call.name), said)
                        if missing is not None:
                            out.reason = VALUE_UNSTATED
                            out.detail = (f"{where}: {missing[0]} {json.dumps(missing[1], ensure_ascii=False)[:ANSWER_CHARS]} "
                                          f"is in neither the request{'s' if n else ''} nor an earlier call's answer")
                            return out
                        result = await sessions[source_of[call.name]].call(call.name, call.arguments)
                        answers.append(result.content)
                        out.trace.append(f"- {where}({json.dumps(call.arguments, ensure_ascii=False)}): "
                                         f"{result.content[:ANSWER_CHARS]}")
                        refused = None if result.is_error else refusal(answer_value(result.structured, result.content))
                        if result.is_error or refused is not None:
                            out.reason, out.detail = CALL_FAILED, f"{where}: {(refused or result.content)[:ANSWER_CHARS]}"
                            return out
                out.final = {name: await sessions[name].state() for name in names}
        except ExecutionFailed as failed:
            out.reason, out.detail = CALL_FAILED, f"{failed.reason}: {failed.message}"
            return out
        if all(canonical_json(out.final[name]) == canonical_json(initial[name]) for name in names):
            called = [call.name for turn in plan for call in turn.calls]
            if all(read_only(tool_of[name], name) for name in called):
                return out  # every call declared read-only: a task that changes nothing by design
            if all(out.final[name] is None for name in names):
                out.reason, out.detail = STATE_UNCHANGED, "the source has no observable state"
            elif all(only_reads(tool_of[name], name) for name in called):
                out.reason, out.detail = READ_ONLY, "the calls only read, and a read leaves the state as it was"
            else:
                out.reason, out.detail = STATE_UNCHANGED, "the calls left the state as it was"
        return out

    def _kept(self, tools: list[Tool], k: int, plan: list[BlueprintTurn], final: dict[str, Any], recipe: str,
              repairs: int) -> Task:
        """The task of a blueprint that held: over the tools its calls used (a two-source design
        whose calls kept to one source is a one-source task)."""
        called = [call.name for turn in plan for call in turn.calls]
        used = [tool for tool in tools if any(tool.function(name) for name in called)] if len(tools) > 1 else tools
        target = {source: final[source] for source in (str(executable_source(tool)) for tool in used)}
        return Task(
            id=stable_id(tools[0].id, str(self._ctx.config.run.seed), "blueprint", str(k)),
            tools=used,
            instruction=plan[0].request,
            relevant_functions=list(dict.fromkeys(called)),
            scenario=TWO_SOURCES if len(used) > 1 else "single_tool",
            recipe=recipe,
            mode=OPEN_MODE,
            turns=len(plan),
            blueprint=Blueprint(turns=plan, target_state=target, repairs=repairs),
        )

    def _rejected(self, anchor: Tool, tools: list[Tool], k: int, reason: str, detail: str,
                  record: dict[str, Any]) -> Rejected:
        sources = {"sources": [str(executable_source(tool)) for tool in tools]} if len(tools) > 1 else {}
        return Rejected(id=stable_id(anchor.id, str(self._ctx.config.run.seed), "blueprint", str(k)), stage=STAGE,
                        reasons=[reason], detail=detail, record={"tool": anchor.id, **sources, **record})

