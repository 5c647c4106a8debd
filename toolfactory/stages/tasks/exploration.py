"""Exploring an executable source before its requests are written (FireFly, APIGen-MT, TOUCAN).

A request written without looking names what the writer imagines: a file ``report.txt``, a user
``john``, the time zone ``America/San_Francisco``. Over a tool that really runs, a dialogue about
something that does not exist can only fail. So, for an anchor tool from an executable source,
the tasks stage first opens a fresh session of the source and reads what is there: the session's
starting state (:meth:`~toolfactory.executable.session.Session.state`) and the answers of the
functions that change nothing. The request-writing prompts then list these *facts* and ask to
name only them where a request refers to something that exists.

What is called:

* the functions vetting found to work, to answer the same in fresh sessions (a clock does not:
  its answer would make each run's prompts differ) and not to change the state (the tool's provenance
  ``vetting``, :func:`~toolfactory.executable.vetting.vetted_function`), with arguments that fit
  their parameters (:func:`~toolfactory.executable.probes.probe_arguments`, the strings already
  found tried among the values, so a ``cat`` may read a file the state holds);
* where the source was not vetted, its functions in the order it lists them, with the same
  arguments, while the state shows nothing changed (a call that changed it is not read, and no
  other unvetted function is called: the session is no longer a fresh one); an MCP server that
  shows no state gets only the functions it declares read-only.

Bounds: one exploration per source and tasks shard, at most :data:`MAX_CALLS` calls, at most
:data:`MAX_FACTS` facts (:data:`PER_LABEL` under one label), and a wall time of the source's
``start_timeout_seconds`` plus ``call_timeout_seconds``. A source whose exploration fails (it
did not start, a call hung or crashed it, the deadline passed) gets no facts; its tasks are made
as without exploration, and the reason is counted in the stage's profile (``exploration``).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from toolfactory.executable.probes import probe_arguments
from toolfactory.executable.registry import environments, source_settings
from toolfactory.executable.session import Environment, ExecutionFailed, executable_source
from toolfactory.executable.counts import SESSIONS_REUSED, SESSIONS_STARTED
from toolfactory.executable.pool import open_session, warm
from toolfactory.executable.vetting import vetted_function, vetted_warm
from toolfactory.models import Function, Tool
from toolfactory.stages.base import ShardContext, StageOutput

log = logging.getLogger(__name__)

MAX_CALLS = 24  # calls of one source's exploration
MAX_FACTS = 40  # facts kept of one source
PER_LABEL = 8  # facts kept under one label (a long list of airports does not crowd out the rest)
PROBES_PER_FUNCTION = 2  # argument sets tried per function
VALUE_CHARS = 64  # longer strings are content, not names
EXPLORE_TIMEOUT = "explore_timeout"  # the reason counted when the deadline passed
EXPLORE_ERROR = "explore_error"  # the reason counted when exploring raised anything else
#: A profile dimension of the tasks stage: per source, ``explored`` or the reason it failed.
PROFILE = "exploration"
FACTS_PROFILE = "exploration_facts"  # facts found, per source
CALLS_PROFILE = "exploration_calls"  # calls made, per source

# Fields whose values say what went wrong, not what exists (BFCL's travel API answers
# `{"booking_status": false, "error": "Invalid access token"}` without its error convention).
_ERROR_FIELDS = frozenset({"error", "errors", "exception", "traceback", "detail", "failure", "verification_failure"})
# A value that says nothing was found is no thing (BFCL's trading bot answers an unknown company
# with `{"symbol": "Stock not found"}`).
_NOTHING = re.compile(r"\bnot (found|available|exist)\b|^(no such|unknown|invalid|none found)\b", re.IGNORECASE)
# A key that names a field (``contents``, ``user_map``) rather than a thing (``notes.txt``,
# ``Alice``, ``USR002``): lower-case identifiers are fields.
_FIELD = re.compile(r"^[a-z_][a-z0-9_]*$")

SECTION_HEADING = "What exists in a fresh environment of the tool (found by exploring it before writing):"
SECTION_RULE = ("Where a request refers to something that already exists (a file, a folder, a user, an id, a "
                "place, a time zone, an account), name only values from this list, exactly as written; "
                "something a request creates may have a new name.")


@dataclass(frozen=True)
class Fact:
    """A value found in a fresh environment, with the field it was found under."""

    label: str
    value: str


@dataclass
class Exploration:
    """What exploring one source found."""

    source: str
    facts: list[Fact] = field(default_factory=list)
    calls: int = 0
    failure: str | None = None
    """The reason code when the exploration failed (then there are no facts)."""
    began: str | None = None
    """How its session began: ``started`` (a new process) or ``reused`` (a warm one reset)."""


def facts_in(value: Any, label: str = "") -> list[Fact]:
    """The names and values an answer or a state holds: short strings under their field's name,
    the keys that are things rather than fields (a folder's entries, a map of users: keys that are
    no lower-case identifier, or the keys of a mapping of records), and numbers under a field that
    names an id (never a value that says nothing was found). What sits inside such a thing says so in its label
    (``contents (in reports)``: a file of the folder ``reports``, not of the current one)."""
    found: list[Fact] = []

    def named(where: str, inside: str) -> str:
        return (f"{where} (in {inside})" if inside else where).replace(":", " ")

    def walk(item: Any, where: str, inside: str, top: bool = False) -> None:
        if isinstance(item, dict):
            # Below the top, a mapping whose values are all records maps names to things (a
            # folder's entries): its keys are things whatever they look like ("reports").
            entries = not top and bool(item) and all(isinstance(inner, dict) for inner in item.values())
            for key, inner in item.items():
                key = str(key)
                if key in _ERROR_FIELDS:
                    continue
                if _FIELD.match(key) and not entries:
                    walk(inner, key, inside)
                else:
                    if 0 < len(key) <= VALUE_CHARS and "\n" not in key:
                        found.append(Fact(named(where, inside), key))
                    # A thing that holds things (a folder) is where they are; a map's value is its key's.
                    walk(inner, where, f"{inside}/{key}".lstrip("/") if isinstance(inner, dict) else inside)
        elif isinstance(item, list):
            for inner in item:
                walk(inner, where, inside)
        elif isinstance(item, str):
            text = item.strip()
            if 0 < len(text) <= VALUE_CHARS and "\n" not in text and not _NOTHING.search(text):
                found.append(Fact(named(where, inside), text))
        elif isinstance(item, int) and not isinstance(item, bool) and re.search(r"(^|_)ids?$", where):
            found.append(Fact(named(where, inside), str(item)))

    walk(value, label, "", top=True)
    return found


def answer_value(structured: Any, content: str) -> Any:
    """A call's answer as a value: its structured content, else its text read as JSON, else the text."""
    if structured is not None:
        return structured
    try:
        return json.loads(content)
    except ValueError:
        return content


def refusal(value: Any) -> str | None:
    """What an answer that did not do what was asked says, though not marked an error: a
    non-empty error field beside others (BFCL's travel API answers
    ``{"cancel_status": false, "error": "Invalid access token"}``); None for any other answer."""
    if not isinstance(value, dict):
        return None
    said = next((value[key] for key in _ERROR_FIELDS if value.get(key)), None)
    return None if said is None else str(said)


def _read_only_hint(tool: Tool, name: str) -> bool:
    hints = ((tool.provenance.get("mcp") or {}).get("functions") or {}).get(name) or {}
    return hints.get("read_only") is True


class _Facts:
    """Facts gathered in order, without repeats, within the bounds."""

    def __init__(self) -> None:
        self.items: list[Fact] = []
        self._values: set[str] = set()
        self._labels: dict[str, int] = {}

    def add(self, facts: list[Fact]) -> None:
        for fact in facts:
            if len(self.items) >= MAX_FACTS:
                return
            # "./notes.txt" (a search's answer) is the "notes.txt" the state holds.
            key = fact.value.removeprefix("./")
            if key in self._values or self._labels.get(fact.label, 0) >= PER_LABEL:
                continue
            self._values.add(key)
            self._labels[fact.label] = self._labels.get(fact.label, 0) + 1
            self.items.append(fact)

    def values(self) -> tuple[str, ...]:
        return tuple(fact.value for fact in self.items)


async def explore(environment: Environment, tool: Tool) -> Exploration:
    """Explore a fresh session of `environment`, the source of `tool` (see the module doc).
    Raises :class:`ExecutionFailed` when the environment fails; the caller bounds the time."""
    found = _Facts()
    result = Exploration(source=environment.name)
    settings = getattr(environment, "settings", None)
    # A warm process reset for it where vetting found the reset keeps sessions apart (as the
    # dialogues stage opens its sessions), else a new one.
    fresh = open_session(environment, settings, warm(settings, vetted_warm(tool))) if settings is not None else environment.session()
    async with fresh as session:
        result.began = "reused" if getattr(session, "reused", False) else "started"
        initial = await session.state()
        # Only what a fresh environment holds every time: a clock's answer or a state with a
        # timestamp would make the request prompts differ from run to run, so a re-run could not
        # take its answers from the LLM cache and would write other requests.
        if initial is not None and (tool.provenance.get("vetting") or {}).get("state_reproducible") is not False:
            found.add(facts_in(initial))
        vetted = [fn for fn in tool.functions if vetted_function(tool, fn.name)]
        safe = [fn for fn in vetted if vetted_function(tool, fn.name).get("status") == "works"
                and vetted_function(tool, fn.name).get("changes_state") is not True
                and vetted_function(tool, fn.name).get("deterministic") is True]
        unvetted = [fn for fn in tool.functions if not vetted_function(tool, fn.name)
                    and (initial is not None or _read_only_hint(tool, fn.name))]
        # Functions without parameters first: listings, whose answers name what others take.
        going = True
        for fn in sorted(safe, key=lambda f: bool(f.parameters.get("required"))):
            going = await _call(session, fn, found, result, watch=None)
            if not going:
                break
        for fn in unvetted if going else []:
            if not await _call(session, fn, found, result, watch=initial):
                break
    result.facts = found.items
    return result


async def _call(session: Any, fn: Function, found: _Facts, result: Exploration, watch: Any) -> bool:
    """Call `fn` with up to :data:`PROBES_PER_FUNCTION` argument sets, keeping the facts of its
    working answers; with `watch` (the fresh state), an answer that changed the state is not
    read. False when exploring should stop (the call cap, or the state changed)."""
    for arguments in probe_arguments(fn.parameters or {"type": "object", "properties": {}},
                                     PROBES_PER_FUNCTION, found.values()):
        if result.calls >= MAX_CALLS:
            return False
        result.calls += 1
        answer = await session.call(fn.name, arguments)
        if watch is not None and await session.state() != watch:
            return False
        value = answer_value(answer.structured, answer.content)
        refused = isinstance(value, dict) and (refusal(value) is not None or any(
            inner is False and re.search(r"(status|success|ok)$", str(key)) for key, inner in value.items()))
        if not answer.is_error and not refused:
            found.add([fact for fact in facts_in(value, fn.name) if not _of_today(fact.value)])
    return True


def _of_today(text: str) -> bool:
    """Whether `text` holds today's date (ISO, as UTC or this machine's zone has it): a value a
    clock wrote (a time converted "today"), which a run on another day reads otherwise, so that
    its prompts, and what the LLM cache holds for them, would differ. Two sessions of one vetting
    run cannot tell such a function from a deterministic one."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return any(day in text for day in {now.date().isoformat(), now.astimezone().date().isoformat()})


class Explorer:
    """Exploration for one tasks shard: each configured source explored once, on first need,
    whatever the number of anchors and recipes that need it; outcomes counted in `out`."""

    def __init__(self, ctx: ShardContext, out: StageOutput, pool: list[Tool] | None = None) -> None:
        self._tools = ctx.config.tools
        self._out = out
        # A recipe may offer a tool cut to a few functions: the source is explored with all of
        # the functions its tool has in the pool.
        self._whole: dict[str, Tool] = {}
        for tool in pool or []:
            source = executable_source(tool)
            if source is not None and (source not in self._whole or len(tool.functions) > len(self._whole[source].functions)):
                self._whole[source] = tool
        self._environments: dict[str, Environment] | None = None
        self._running: dict[str, asyncio.Future[Exploration]] = {}

    def source_tools(self) -> dict[str, Tool]:
        """The pool's tool of each executable source, with all of its functions (by source name)."""
        return dict(self._whole)

    def _configured(self) -> dict[str, Environment]:
        if self._environments is None:
            self._environments = environments(self._tools)
        return self._environments

    async def facts(self, tool: Tool) -> list[Fact]:
        """The facts of `tool`'s source ([] for a tool an LLM plays, or when exploration failed)."""
        source = executable_source(tool)
        if source is None or source not in self._configured():
            return []
        if source not in self._running:
            self._running[source] = asyncio.ensure_future(self._explore(source, self._whole.get(source, tool)))
        return (await self._running[source]).facts

    async def section(self, tools: list[Tool]) -> str:
        """The prompt section listing the facts of every executable tool among `tools` ("" if none)."""
        per_tool = [(tool, await self.facts(tool)) for tool in tools]
        per_tool = [(tool, facts) for tool, facts in per_tool if facts]
        if not per_tool:
            return ""
        return facts_section(per_tool)

    async def _explore(self, source: str, tool: Tool) -> Exploration:
        settings = source_settings(self._tools)[source]
        deadline = settings.start_timeout_seconds + settings.call_timeout_seconds
        try:
            found = await asyncio.wait_for(explore(self._configured()[source], tool), deadline)
        except ExecutionFailed as failed:
            found = Exploration(source=source, failure=failed.reason)
        except asyncio.TimeoutError:
            found = Exploration(source=source, failure=EXPLORE_TIMEOUT)
        except Exception:  # noqa: BLE001 - whatever breaks, the tasks are made as without exploration
            log.warning("exploring %s failed", source, exc_info=True)
            found = Exploration(source=source, failure=EXPLORE_ERROR)
        self._out.count(PROFILE, f"{source}: {found.failure or 'explored'}")
        if found.began is not None:
            self._out.count(SESSIONS_REUSED if found.began == "reused" else SESSIONS_STARTED, source)
        if found.failure is None:
            self._out.count(FACTS_PROFILE, source, len(found.facts))
            self._out.count(CALLS_PROFILE, source, found.calls)
        return found


async def section_for(explorer: Explorer | None, tools: list[Tool]) -> str:
    """The facts section of a request-writing prompt over `tools` ("" with exploration off)."""
    return await explorer.section(tools) if explorer is not None else ""


def with_section(prompt: str, section: str) -> str:
    """`prompt` with the facts section after it (unchanged when there is none)."""
    return f"{prompt}\n{section}" if section else prompt


def facts_section(per_tool: list[tuple[Tool, list[Fact]]]) -> str:
    """The prompt section: one line per field, ``- label: "value", "value"`` (the tool's name
    leads the label when several tools are listed), then the rule to name only these."""
    lines = [SECTION_HEADING]
    for tool, facts in per_tool:
        grouped: dict[str, list[str]] = {}
        for fact in facts:
            grouped.setdefault(fact.label or "value", []).append(fact.value)
        for label, values in grouped.items():
            shown = f"{tool.name} {label}" if len(per_tool) > 1 else label
            lines.append(f"- {shown}: {', '.join(json.dumps(v, ensure_ascii=False) for v in values)}")
    lines.append(SECTION_RULE)
    return "\n".join(lines)
