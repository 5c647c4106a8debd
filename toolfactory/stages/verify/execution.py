"""The execution layer of the verifier: between the rules and the judges, a dialogue whose calls ran
on executable sources is replayed (APIGen §3's execution check, BFCL's and τ-bench's state checks).

What is replayed: the calls of the dialogue's messages that the dialogues stage executed (a call
to a function of an executable source whose arguments fit its parameters; a call that did not fit
was answered with the 400 without running, and the rule layer judges it), in message order, each
on a fresh session of its source (one session per source, opened at its first call, as the
dialogues stage does). Which source a function belongs to is read from the dialogue's
``generation["execution"]["calls"]``. The replay's results and final states are then judged by
the ``exec_*`` rules (:mod:`toolfactory.stages.verify.rules.execution`).

The state the replay must reach is the task's ``target_state`` when the dialogue carries one
(``generation["execution"]["target_state"]``: a blueprint's, or BFCL's ground truth's), else the
``states`` the dialogue recorded, which the replay must reproduce. So too after each user turn:
the task's ``target_turn_states`` where it has them, else the ``turn_states`` the dialogue
recorded (the dialogues stage keeps them for a dialogue of more than one user message; a record
made before it did is held to its final state alone). A session that also ran calls
that are not on the dialogue's final path (ToolLLM's search abandons branches, but their calls
changed the one session's state) recorded a state that no replay of the path can give: such a
dialogue is compared with its target state only, and its deterministic results must still match.
A result recorded under a state an abandoned branch changed then shows up as a mismatch, which is
the honest verdict: a model that follows the path would not see it.

Sources come from the run's configuration, or from the record itself for BFCL's environments
(``generation["execution"]["environments"]``: a preset and its initial state per source; a class
path from a data file is never run).

**Live or from the record.** :class:`ExecutionLayer` replays (``mode="live"``) or checks each
record against itself without running anything (``mode="record"``, :mod:`.from_record`). When a
source of a record cannot start (not configured, not installed, gone), ``unavailable`` says what
happens: ``reject`` (the record is ``exec_start_failed``), ``record`` (it is checked from the
record, and the source is remembered as unavailable for the layer's later records, so a missing
server costs one failed start, not one per record) or ``raise`` (:class:`SourceUnavailable`, for
``toolfactory verify --live``, which must not pass off a record check as a replay). The layer's
:class:`ExecutionTally` counts per source the records replayed live, checked from the record and
found drifted.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeGuard

from pydantic import ValidationError

from toolfactory.errors import TerminalError
from toolfactory.executable.error_convention import ErrorConvention
from toolfactory.executable.pool import open_session, warm
from toolfactory.executable.python_env import PythonEnvironment
from toolfactory.executable.settings import PythonEnvironmentSettings
from toolfactory.executable.session import EXEC_START_FAILED, CallResult, Environment, ExecutionFailed, Session
from toolfactory.executable.settings import ExecutableSourceSettings
from toolfactory.models import Dialogue, Verdict
from toolfactory.stages.verify.from_record import aligned, inconsistencies
from toolfactory.stages.verify.policy import DEFAULT as DEFAULT_POLICY
from toolfactory.stages.verify.policy import Policy
from toolfactory.stages.verify.rules import RULES, Sample
from toolfactory.stages.verify.rules.execution import RECORD_FINDINGS, REPLAY
from toolfactory.stages.verify.rules.registry import check_error

EXECUTION = "execution"  # the key of generation that holds what ran (see stages/dialogues/execution.py)


@dataclass
class Source:
    """One executable source the replay may open sessions of, with a bound on open sessions."""

    environment: Environment
    settings: ExecutableSourceSettings
    slots: asyncio.Semaphore


@dataclass
class ReplayedCall:
    """One call of the dialogue's path, as recorded and as replayed."""

    path: str
    source: str
    name: str
    arguments: str
    recorded: str | None
    """The tool message the dialogue holds for this call (None when it has none)."""
    recorded_error: bool
    """Whether the dialogue's answer was an error (as the session reported it)."""
    deterministic: bool
    result: CallResult | None = None
    """The replay's answer (None when the replay stopped before this call)."""
    turn: int = 0
    """The user message the call answers (0 for the first): the last one before it."""


@dataclass(frozen=True)
class Failure:
    reason: str
    path: str
    message: str
    source: str | None = None
    """The source that failed, where one did (None: the record itself is at fault)."""


@dataclass
class Replay:
    """What the replay of one dialogue found, for the ``exec_*`` rules."""

    calls: list[ReplayedCall]
    failure: Failure | None = None
    states: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] | None = None
    """The states the replay must reach, by source (None: nothing to compare)."""
    expected_kind: Literal["target", "recorded"] = "recorded"
    turn_states: list[dict[str, Any]] = field(default_factory=list)
    """The states after the calls that answer each user message, of the sources
    :attr:`expected_turns` names."""
    versions: dict[str, str] = field(default_factory=dict)
    """The version of each source the replay ran (what its session says; "" when unknown)."""
    recorded_versions: dict[str, str] = field(default_factory=dict)
    """The version each source had when the dialogue ran (its ``generation.execution.versions``)."""
    began: dict[str, str] = field(default_factory=dict)
    """How each source's session began: ``started`` (a new process) or ``reused`` (a warm one)."""
    expected_turns: list[dict[str, Any]] | None = None
    """The states the task requires after the calls that answer each user message, in order
    (``target_turn_states``: BFCL checks the state after every turn; else the dialogue's recorded
    ``turn_states``), by source; None: the final state alone is compared."""
    expected_turns_kind: Literal["target", "recorded"] = "target"
    live: bool = True
    """Whether the calls ran again (False: the record was checked against itself, nothing ran)."""


def drifted(replay: Replay, source: str) -> bool:
    """Whether `source` ran another version in the replay than when the dialogue was made (both
    known): an answer that changed is then the source's drift, not the dialogue's fault."""
    then, now = replay.recorded_versions.get(source, ""), replay.versions.get(source, "")
    return bool(then and now and then != now)


def applies(dialogue: Dialogue) -> bool:
    """Whether `dialogue` has anything to replay: executed calls or a target state."""
    executed = dialogue.generation.get(EXECUTION)
    return isinstance(executed, dict) and bool(executed.get("calls") or executed.get("target_state"))


def self_contained(dialogue: Dialogue) -> bool:
    """Whether `dialogue` names the environments its replay needs (BFCL's imported trajectories),
    so that it can be replayed without a run's configuration (``toolfactory verify``)."""
    return applies(dialogue) and bool((dialogue.generation.get(EXECUTION) or {}).get("environments"))


def record_sources(dialogue: Dialogue) -> dict[str, ExecutableSourceSettings]:
    """The sources a record names itself: BFCL presets with their initial state (see module doc)."""
    executed = dialogue.generation.get(EXECUTION) or {}
    found: dict[str, ExecutableSourceSettings] = {}
    for name, spec in (executed.get("environments") or {}).items():
        if not isinstance(spec, dict) or not spec.get("preset"):
            raise ValueError(f"generation.execution.environments.{name}: only a BFCL preset may be named by a record")
        found[name] = PythonEnvironmentSettings(name=name, preset=spec["preset"], initial_state=spec.get("initial_state") or {},
                                                deterministic=spec.get("deterministic", True))
    return found


def path_calls(dialogue: Dialogue, settings: Mapping[str, ExecutableSourceSettings]) -> list[ReplayedCall]:
    """The executed calls of the dialogue's messages, in order (see the module doc)."""
    # Imported here: the dialogues stage's modules bring the LLM client, which `toolfactory verify`
    # does not load unless a judge is used.
    from toolfactory.stages.dialogues.agents import call_error

    executed = dialogue.generation.get(EXECUTION) or {}
    recorded = executed.get("calls") or []
    source_of = {str(c.get("name")): str(c.get("source")) for c in recorded}
    vetted_of = {str(c.get("name")): c["deterministic"] for c in recorded if isinstance(c.get("deterministic"), bool)}
    functions = {fn.name: fn for fn in reversed(dialogue.tools)}  # the first offered of a name wins
    answers = {m.tool_call_id: m.content for m in dialogue.messages if m.role == "tool" and m.tool_call_id}
    found: list[ReplayedCall] = []
    ran_up_to = 0  # the path's calls are a subsequence of the session's (abandoned branches between)
    users = 0
    for i, message in enumerate(dialogue.messages):
        users += message.role == "user"
        for j, call in enumerate(message.tool_calls or []):
            source = source_of.get(call.name)
            ran = _ran_at(recorded, ran_up_to, call.name, call.arguments)
            if ran is not None:
                ran_up_to = ran + 1
            # A call the session ran is replayed even where it does not fit the documented
            # parameters (BFCL's ground truth passes `ticket_id='ticket_001'` to a `ticket_id`
            # documented as an integer, and BFCL runs it); a call the record does not say ran
            # was answered with the 400 without running (records without the arguments they sent).
            if source is None or (ran is None and call_error(functions.get(call.name), call.name, call.arguments) is not None):
                continue
            known = settings.get(source)
            # What vetting found when the dialogue was made, recorded with the calls it ran.
            vetted = vetted_of.get(call.name)
            found.append(ReplayedCall(path=f"messages[{i}].tool_calls[{j}]", source=source, name=call.name,
                                      arguments=call.arguments, recorded=answers.get(call.id), recorded_error=False,
                                      deterministic=known is not None and known.deterministic_tool(call.name, vetted),
                                      turn=max(users - 1, 0)))
    if _same_path(found, recorded):
        for call, entry in zip(found, recorded):
            call.recorded_error = bool(entry.get("is_error"))
    return found


def _turn_list(value: Any) -> TypeGuard[list[dict[str, Any]]]:
    """Whether `value` is a list of states by source, one per user turn."""
    return isinstance(value, list) and all(isinstance(states, dict) for states in value)


def _ran_at(recorded: list[dict[str, Any]], start: int, name: str, arguments: str) -> int | None:
    """The index, from `start` on, of the session's call of `name` with exactly `arguments`; None
    when the record does not say it ran (or keeps no arguments to tell)."""
    for index in range(start, len(recorded)):
        entry = recorded[index]
        if entry.get("name") == name and "arguments" in entry and entry["arguments"] == arguments:
            return index
    return None


def _same_path(found: list[ReplayedCall], recorded: list[dict[str, Any]]) -> bool:
    """Whether the session ran exactly the path's calls (no abandoned branch in between)."""
    return len(found) == len(recorded) and all(
        call.source == entry.get("source") and call.name == entry.get("name")
        and ("arguments" not in entry or call.arguments == entry["arguments"])
        for call, entry in zip(found, recorded))


async def replay(dialogue: Dialogue, sources: Mapping[str, Source]) -> Replay:
    """Replay `dialogue`'s executed calls on fresh sessions of `sources` (see the module doc)."""
    executed = dialogue.generation.get(EXECUTION) or {}
    calls = path_calls(dialogue, {name: source.settings for name, source in sources.items()})
    target = executed.get("target_state")
    complete = _same_path(calls, executed.get("calls") or [])
    out = Replay(calls=calls, recorded_versions={str(k): str(v) for k, v in (executed.get("versions") or {}).items()})
    if isinstance(target, dict):
        out.expected, out.expected_kind = target, "target"
    elif complete and isinstance(executed.get("states"), dict):
        out.expected, out.expected_kind = executed["states"], "recorded"
    # A source whose state vetting found to differ between two identical sessions (a database
    # with a timestamp in it) cannot be held to a recorded state: its results still are.
    unreproducible = set(executed.get("state_unreproducible") or ())
    if out.expected is not None and out.expected_kind == "recorded" and unreproducible:
        out.expected = {name: state for name, state in out.expected.items() if name not in unreproducible}
    per_turn = executed.get("target_turn_states")
    recorded_turns = executed.get("turn_states")
    if _turn_list(per_turn):
        out.expected_turns = per_turn
    elif complete and _turn_list(recorded_turns):
        # As the final state: a recorded state is the dialogue's own only if the session ran
        # exactly the path's calls, and an unreproducible source's is not held to.
        out.expected_turns = [{name: state for name, state in states.items() if name not in unreproducible}
                              for states in recorded_turns]
        out.expected_turns_kind = "recorded"
    turn_sources = {name for states in out.expected_turns or [] for name in states}
    needed = sorted({call.source for call in calls} | set(out.expected or {}) | turn_sources)
    missing = [name for name in needed if name not in sources]
    if missing:
        out.failure = Failure(EXEC_START_FAILED, "generation.execution", f"{missing[0]}: no executable source of this name is configured",
                              missing[0])
        return out
    opening: list[str] = []  # the source whose session is being opened (a start failure is its own)
    async with AsyncExitStack() as stack:
        sessions: dict[str, Session] = {}
        for name in needed:  # in name order, as the dialogues stage takes its slots
            await sources[name].slots.acquire()
            stack.callback(sources[name].slots.release)
        # A source whose dialogue session came from the warm pool is replayed on one too (a reset
        # process, which vetting found as fresh as a new one).
        vetted_warm = executed.get("warm") or {}

        async def opened(name: str) -> Session:
            if name not in sessions:
                source = sources[name]
                fresh = open_session(source.environment, source.settings, warm(source.settings, vetted_warm.get(name)))
                opening[:] = [name]
                sessions[name] = await stack.enter_async_context(fresh)
                opening.clear()
                out.began[name] = "reused" if getattr(sessions[name], "reused", False) else "started"
                version = getattr(sessions[name], "version", None)
                out.versions[name] = str(version()) if callable(version) else ""
            return sessions[name]

        async def turns_ended(before: int) -> None:
            """The states after each user turn before `before` not yet taken (of the sources the
            target names for that turn; a source no call touched yet is in its initial state)."""
            expected = out.expected_turns or []
            while len(out.turn_states) < min(before, len(expected)):
                names = sorted(expected[len(out.turn_states)])
                out.turn_states.append({name: await (await opened(name)).state() for name in names})

        path = "generation.execution"
        learnt = executed.get("error_conventions")
        conventions = {name: ErrorConvention.from_dict(value) for name, value in (learnt if isinstance(learnt, dict) else {}).items()
                       if isinstance(value, dict)}
        try:
            for call in calls:
                path = call.path
                await turns_ended(call.turn)
                session = await opened(call.source)
                call.result = await session.call(call.name, json.loads(call.arguments or "{}"))
                convention = conventions.get(call.source)
                if not call.result.is_error and convention is not None and convention.matches(call.result.content, call.result.structured):
                    call.result = replace(call.result, is_error=True)  # an error by the source's learnt convention
                if not complete:  # the recorded flags belong to another sequence of calls: use the replay's
                    call.recorded_error = call.result.is_error
            path = "generation.execution.target_turn_states"
            await turns_ended(len(out.expected_turns or []))
            path = "generation.execution.states"
            for name in needed:  # a source the target names but no call touched: its initial state
                await opened(name)
            out.states = {name: await session.state() for name, session in sorted(sessions.items())}
        except ExecutionFailed as failed:
            source = opening[0] if opening else None
            out.failure = Failure(failed.reason, path, failed.message, source if failed.reason == EXEC_START_FAILED else None)
    return out


def from_record(dialogue: Dialogue, settings: Mapping[str, ExecutableSourceSettings]) -> tuple[Replay, list[tuple[str, str]]]:
    """The record of `dialogue` as a replay that ran nothing, and what it says against itself
    (:mod:`.from_record`): the ``exec_*`` rules then judge what the record alone can show."""
    executed = dialogue.generation.get(EXECUTION) or {}
    recorded = executed.get("calls") or []
    calls = path_calls(dialogue, settings)
    where = aligned([(c.source, c.name, c.arguments) for c in calls], recorded)
    for call, index in zip(calls, where):
        call.recorded_error = index is not None and bool(recorded[index].get("is_error"))
    findings = inconsistencies(dialogue, [(c.path, c.source, c.name, c.arguments, c.recorded) for c in calls], settings)
    recorded_states = executed.get("states")
    states: dict[str, Any] = recorded_states if isinstance(recorded_states, dict) else {}
    out = Replay(calls=calls, states=dict(states), live=False,
                 recorded_versions={str(k): str(v) for k, v in (executed.get("versions") or {}).items()})
    target = executed.get("target_state")
    # The recorded final state stands for the replay's only where the record ran exactly the
    # path's calls (no abandoned branch changed it); a target source the record holds no state
    # of (no call touched it) would need its initial state, which only a replay reads.
    if isinstance(target, dict) and _same_path(calls, recorded) and None not in where:
        out.expected = {name: state for name, state in target.items() if name in states}
        out.expected_kind = "target"
        # Likewise after each turn, where the record keeps its states and the task its targets.
        recorded_turns, per_turn = executed.get("turn_states"), executed.get("target_turn_states")
        if _turn_list(recorded_turns) and _turn_list(per_turn):
            out.turn_states = list(recorded_turns)
            out.expected_turns = [{name: state for name, state in states.items() if name in recorded_turns[turn]}
                                  for turn, states in enumerate(per_turn[:len(recorded_turns)])]
    return out, findings


def judged(dialogue: Dialogue, found: Replay, disabled: frozenset[str] = frozenset(),
           policy: Policy | None = DEFAULT_POLICY, record_findings: list[tuple[str, str]] | None = None) -> list[Verdict]:
    """The failed verdicts of the ``exec_*`` rules on `found` (every finding an error), with what
    a check from the record found (`record_findings`)."""
    sample = Sample(dialogue, policy or DEFAULT_POLICY)
    sample.provide(REPLAY, found)
    sample.provide(RECORD_FINDINGS, record_findings or [])
    out: list[Verdict] = []
    for code, registered in RULES.items():
        if registered.kind != "execution" or code in disabled:
            continue
        try:
            out += registered.run(sample)
        except Exception as exc:  # noqa: BLE001 - one record's fault, never the run's
            out.append(check_error(exc, code))
    return out


Mode = Literal["live", "record"]
Unavailable = Literal["reject", "record", "raise"]
LIVE, FROM_RECORD = "live", "record"


class SourceUnavailable(TerminalError):
    """A source a record names cannot start for a live replay (``toolfactory verify --live``)."""

    def __init__(self, source: str, record_id: str, message: str) -> None:
        super().__init__(f"--live: source {source!r} (named by record {record_id!r}) cannot start: {message}")
        self.source, self.record_id, self.message = source, record_id, message


@dataclass
class ExecutionTally:
    """What the layer did, per source: records replayed live, checked from the record, and
    replayed with another answer on another version of the source (drift)."""

    live: Counter[str] = field(default_factory=Counter)
    from_record: Counter[str] = field(default_factory=Counter)
    drifted: Counter[str] = field(default_factory=Counter)
    unavailable: dict[str, str] = field(default_factory=dict)
    """Sources that could not start, with the first failure's message."""

    def merge(self, other: ExecutionTally) -> None:
        self.live.update(other.live)
        self.from_record.update(other.from_record)
        self.drifted.update(other.drifted)
        for name, message in other.unavailable.items():
            self.unavailable.setdefault(name, message)

    def by_source(self) -> dict[str, dict[str, int]]:
        """``{source: {"live", "from_record", "drifted"}}``, sources in name order."""
        names = sorted(set(self.live) | set(self.from_record) | set(self.drifted))
        return {name: {"live": self.live[name], "from_record": self.from_record[name], "drifted": self.drifted[name]}
                for name in names}


def named_sources(dialogue: Dialogue) -> list[str]:
    """The sources a record's execution names: of its calls, its target and its turn targets."""
    executed = dialogue.generation.get(EXECUTION) or {}
    names = {str(c.get("source")) for c in executed.get("calls") or [] if isinstance(c, dict) and c.get("source")}
    target = executed.get("target_state")
    names |= set(target) if isinstance(target, dict) else set()
    for states in executed.get("target_turn_states") or []:
        names |= set(states) if isinstance(states, dict) else set()
    return sorted(names)


def turns_unproven(dialogue: Dialogue) -> bool:
    """Whether `dialogue`'s task holds the state after each user turn to a target
    (``target_turn_states``) that its record cannot be checked against: it keeps no state per
    user message (``turn_states``), only the final one."""
    executed = dialogue.generation.get(EXECUTION) or {}
    if not executed.get("target_turn_states"):
        return False
    recorded = executed.get("turn_states")
    users = sum(message.role == "user" for message in dialogue.messages)
    return not (isinstance(recorded, list) and len(recorded) == users)


class ExecutionLayer:
    """The execution layer over a set of configured sources (a verify shard, a verify run): see
    the module doc for `mode` and `unavailable`."""

    def __init__(self, configured: Mapping[str, tuple[Environment, ExecutableSourceSettings]],
                 disabled: frozenset[str] = frozenset(), mode: Mode = "live", unavailable: Unavailable = "reject",
                 tally: ExecutionTally | None = None) -> None:
        self._sources = {name: Source(env, settings, asyncio.Semaphore(settings.max_sessions))
                         for name, (env, settings) in configured.items()}
        self._disabled = disabled
        self._mode = mode
        self._unavailable = unavailable
        self.tally = tally if tally is not None else ExecutionTally()
        self.sessions: Counter[tuple[str, str]] = Counter()
        """Sessions the replays opened, by source and how they began (``started``, ``reused``)."""

    @property
    def configured(self) -> bool:
        """Whether the run configures any executable source."""
        return bool(self._sources)

    def _sources_of(self, dialogue: Dialogue) -> dict[str, Source]:
        own = record_sources(dialogue)
        if not own:
            return self._sources
        # A record's own environments (BFCL's initial state per entry) are fresh per record.
        return {**self._sources, **{name: Source(PythonEnvironment(s), s, asyncio.Semaphore(s.max_sessions))
                                    for name, s in own.items() if isinstance(s, PythonEnvironmentSettings)}}

    async def verdicts(self, dialogue: Dialogue, policy: Policy | None = DEFAULT_POLICY) -> list[Verdict]:
        """The failed ``exec_*`` verdicts of `dialogue` (none when there is nothing to replay)."""
        if not applies(dialogue):
            return []
        try:
            sources = self._sources_of(dialogue)
        except (ValueError, ValidationError) as exc:
            found = Replay(calls=[], failure=Failure(EXEC_START_FAILED, "generation.execution.environments",
                                                     " ".join(str(exc).split())[:300]))
            return judged(dialogue, found, self._disabled, policy)
        names = named_sources(dialogue)
        # From the record, unless the record cannot prove what the task asks: the state after each
        # user turn of a record that keeps the final state alone (BFCL's imported trajectories) is
        # a replay's to find, where the sources can start.
        record_only = self._mode == FROM_RECORD and not turns_unproven(dialogue)
        if record_only or (self._unavailable == FROM_RECORD and set(names) & set(self.tally.unavailable)):
            return self._from_record(dialogue, sources, names, policy)
        found = await replay(dialogue, sources)
        self.sessions.update(found.began.items())
        failure = found.failure
        if failure is not None and failure.reason == EXEC_START_FAILED and failure.source is not None:
            self.tally.unavailable.setdefault(failure.source, failure.message)
            if self._mode == FROM_RECORD:  # the replay was a bonus: the record is checked as asked
                return self._from_record(dialogue, sources, names, policy)
            if self._unavailable == "raise":
                raise SourceUnavailable(failure.source, dialogue.id, failure.message)
            if self._unavailable == FROM_RECORD:
                return self._from_record(dialogue, sources, names, policy)
        self.tally.live.update(names)
        self.tally.drifted.update({call.source for call in found.calls if call.deterministic and call.result is not None
                                   and call.result.content != call.recorded and drifted(found, call.source)})
        return judged(dialogue, found, self._disabled, policy)

    def _from_record(self, dialogue: Dialogue, sources: Mapping[str, Source], names: list[str],
                     policy: Policy | None) -> list[Verdict]:
        found, findings = from_record(dialogue, {name: source.settings for name, source in sources.items()})
        self.tally.from_record.update(names)
        return judged(dialogue, found, self._disabled, policy, findings)
