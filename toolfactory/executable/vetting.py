"""Vetting: what each tool of an executable source does here, found by calling it.

A source is started as every dialogue starts it (confined, without network unless its
``limits.network`` allows it), its tools are listed, and each tool is called with arguments
that fit its parameters (:mod:`.probes`: documented examples first). The answers classify it:

``works``              a probe was answered without an error;
``needs_network``      every probe failed, and an answer names a refused or unreachable network;
``needs_credentials``  every probe failed, and an answer asks for a key, a token or a login
                       (admitted when the source has a login tool of its own and refused the
                       probes rather than failing: BFCL's ``authenticate_twitter``);
``errors``             every probe failed otherwise (``refused`` when every failure was answered
                       as data, BFCL's ``{"error": …}`` or a text by the source's error
                       convention, or by an exception naming bad input,
                       ``ValueError``: the tool ran and said no to the arguments; a run admits
                       such a tool);
``fails_session``      a probe failed the session itself (it hung past ``call_timeout_seconds``,
                       crashed, flooded its output): it is not probed again, and the other
                       tools go on in a fresh session.

A second, fresh session then makes the same calls in the same order: a tool whose answers
differ is not ``deterministic``. The first session, every probe's writes in it, is then reset
(:mod:`.pool`) and makes those calls once more, and so does a third, fresh session after it:
when the reset one starts from the fresh state, ends where the fresh ones do, and answers as
they did wherever the two fresh ones agreed, the reset keeps two dialogues apart, and a run
reuses the source's processes (``warm``). A tool the third session answers otherwise is not
deterministic either (a clock read twice within one second looks deterministic). The state (:meth:`Session.state`) read before and after each
tool's calls says whether it ``changes_state`` (unknown where the source has no observable
state); an MCP tool that says it is read-only (``readOnlyHint``) and changes the state has a
dishonest hint. The card of a source also holds its start time, its median call time and the
peak memory of its processes.

Before the probes, a session of its own calls each tool in ways that must fail (a tool that is
not listed, missing or mistyped arguments, a value that names nothing): the answers that are not
flagged as errors teach the source's error convention (:mod:`.error_convention`: ``Error: …``,
``{"error": …}``), kept on the card; a probe answered by it has failed.

The probes run in one session, tool after tool, in the order the source lists them, and then
once more for the tools that got no working answer: strings the source answered or holds in its
state (a file's name, an issued id) are tried after the documented values, so a tool that needs
another's work first (read what was written) sees it, as in a dialogue.
"""

from __future__ import annotations

import asyncio
import hashlib
from contextlib import AsyncExitStack
import json
import re
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from statistics import median
from typing import Any

from toolfactory.executable.confine import descendants
from toolfactory.executable.error_convention import ErrorConvention, InvalidCall, answer_value, invalid_calls, learn
from toolfactory.executable.probes import probe_arguments, strings_in
from toolfactory.executable.session import CallResult, Environment, ExecutionFailed, Session
from toolfactory.models import Function, Tool

WORKS, NEEDS_NETWORK, NEEDS_CREDENTIALS, ERRORS = "works", "needs_network", "needs_credentials", "errors"
FAILS_SESSION = "fails_session"
#: The rejection code of a tool that does not work here, by class (counted like any rejection).
REJECTION = {NEEDS_NETWORK: "tool_needs_network", NEEDS_CREDENTIALS: "tool_needs_credentials",
             ERRORS: "tool_errors_on_every_probe", FAILS_SESSION: "tool_fails_its_session"}
# An exception that says the arguments were wrong (Python's conventions), not that the tool is.
_BAD_INPUT = re.compile(r"^(ValueError|KeyError|IndexError|LookupError|FileNotFoundError|NotADirectoryError"
                        r"|IsADirectoryError|ZeroDivisionError|OverflowError)\b")
# A tool that logs in: a source with one hands out its credentials in the session.
_LOGIN = re.compile(r"(^|_)(auth\w*|login|log_in|sign_?in)($|_)", re.IGNORECASE)
_RANK = {WORKS: 0, NEEDS_NETWORK: 1, NEEDS_CREDENTIALS: 2, ERRORS: 3, FAILS_SESSION: 4}
SHOWN = 160  # characters of an answer kept on the card
FOUND = 8  # strings the source answered, kept as probe values

# What answers say when the network is refused or absent (errno texts, resolver and HTTP client
# messages of Python, Node and Go) ...
_NETWORK = re.compile(
    r"network is unreachable|name or service not known|temporary failure in name resolution|nodename nor servname"
    r"|getaddrinfo|enotfound|eai_again|econnrefused|connection refused|enetunreach|failed to resolve|no route to host"
    r"|could not resolve host|connecterror|connection error|max retries exceeded|fetch failed|dial tcp|urlopen error",
    re.IGNORECASE)
# ... and when a key or a login is missing.
_CREDENTIALS = re.compile(
    r"api[ _-]?key|access[ _-]?token|unauthori[sz]ed|\b401\b|\b403\b|forbidden|credential|not authenticated"
    r"|authentication (?:failed|required)|missing token|invalid token|login required|please log ?in",
    re.IGNORECASE)


@dataclass
class ToolCard:
    """What vetting found of one tool (one function of the source)."""

    name: str
    status: str
    """``works``, ``needs_network``, ``needs_credentials``, ``errors`` or ``fails_session``."""
    probes: int
    arguments: dict[str, Any] | None
    """The arguments of the probe that decided (the working one, else the last)."""
    answer: str
    """The deciding answer, cut at :data:`SHOWN` characters."""
    deterministic: bool | None = None
    """Whether a second fresh session answered the same (None: the tool does not work)."""
    changes_state: bool | None = None
    """Whether its calls changed the source's state (None: the source shows no state)."""
    read_only_hint: bool | None = None
    """What the source says (an MCP ``readOnlyHint``); None when it says nothing."""
    call_seconds: float = 0.0
    refused: bool = False
    """Every failing probe was refused: answered as data (an answer the source's convention
    marks as an error: BFCL's ``{"error": "cd: no such folder"}``, ``Error: …``) or by an exception
    that names bad input (``ValueError``, ``KeyError``, ``LookupError``…). The tool ran and said no
    to the arguments, which says more about the probes than about the tool."""
    login_tool: str | None = None
    """The source's own login tool (``authenticate_twitter``, ``login``), when it has one: a
    credential it refuses for want of is one a dialogue obtains in the session."""

    @property
    def admitted(self) -> bool:
        """Whether a run admits the tool: it works here; or it refused every probe, for other
        reasons than a credential, or for a credential the source's own login tool gives."""
        if self.status == WORKS:
            return True
        return self.refused and (self.status == ERRORS or (self.status == NEEDS_CREDENTIALS and self.login_tool is not None))

    @property
    def hint_honest(self) -> bool | None:
        """Whether a read-only hint holds (None: no hint, or nothing to check it against)."""
        if self.read_only_hint is None or self.changes_state is None:
            return None
        return not (self.read_only_hint and self.changes_state)


@dataclass
class SourceCard:
    """One source's vetting: its tools' cards and what starting and calling it cost."""

    source: str
    start_seconds: float | None = None
    call_seconds: float | None = None
    """The median time of a probe call."""
    memory_mb: float | None = None
    """The peak resident memory of the session's processes (the largest of its sessions)."""
    tools: list[ToolCard] = field(default_factory=list)
    failure: str | None = None
    """Why the source could not be vetted (it did not start, or its session failed)."""
    warm: bool | None = None
    """Whether a reset session is a fresh one (after every probe's writes, it starts from the
    fresh state and answers as a fresh session): a run then reuses the source's processes
    (`warm_sessions`). None: it cannot be reset, or shows nothing to tell by."""
    reset_seconds: float | None = None
    """What the reset took (against `start_seconds` for a new process)."""
    state_reproducible: bool | None = None
    """Whether two fresh sessions that made the same calls showed the same state (None: the source
    shows none). False: a replay's state can never match a dialogue's, so it is not compared."""
    error_convention: ErrorConvention = field(default_factory=ErrorConvention)
    """How the source answers a failed call without flagging it (learnt from calls that must
    fail; empty when it flags its errors)."""

    def working(self) -> list[str]:
        return [t.name for t in self.tools if t.status == WORKS]

    def admitted(self) -> list[str]:
        return [t.name for t in self.tools if t.admitted]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for card, tool in zip(out["tools"], self.tools):
            card["hint_honest"] = tool.hint_honest
        return out


def classify(answer: CallResult) -> str:
    """The class a failed call's answer points to (a working answer is :data:`WORKS`)."""
    if not answer.is_error:
        return WORKS
    if _NETWORK.search(answer.content):
        return NEEDS_NETWORK
    if _CREDENTIALS.search(answer.content):
        return NEEDS_CREDENTIALS
    return ERRORS


def _peak_memory_mb(session: Session) -> float | None:
    """The peak resident memory (VmHWM) of the session's process and its descendants."""
    process = getattr(session, "process", None) or getattr(getattr(session, "link", None), "process", None)
    pid = getattr(process, "pid", None)
    if pid is None:
        return None
    total = 0
    for each in [pid, *descendants(pid)]:
        try:
            status = Path(f"/proc/{each}/status").read_text()
        except OSError:
            continue
        found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
        total += int(found[1]) if found else 0
    return round(total / 1024, 1) if total else None


class _Sessions:
    """One session of a source at a time: a call that fails the session itself (it hung,
    crashed, flooded) closes it, and the next call gets a fresh one, brought to where the
    failed one was by the calls that worked in it, made again."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        self.stack: AsyncExitStack | None = None
        self.current: Session | None = None
        self.started: float | None = None  # seconds the first session took to open
        self.memory: list[float] = []
        self.worked: list[tuple[str, dict[str, Any]]] = []  # this line of sessions' working calls
        self.convention = ErrorConvention()  # answers it matches are errors

    async def session(self) -> Session:
        if self.current is None:
            self.stack = AsyncExitStack()
            began = time.perf_counter()
            self.current = await self.stack.enter_async_context(self.environment.session())
            if self.started is None:
                self.started = round(time.perf_counter() - began, 3)
            for name, arguments in self.worked:
                await self.current.call(name, arguments)
        return self.current

    async def close(self) -> None:
        if self.current is not None:
            self.memory.append(_peak_memory_mb(self.current) or 0.0)
        if self.stack is not None:
            await self.stack.aclose()
        self.stack, self.current = None, None

    async def call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """The answer; a session failure is an error answer naming its reason (the session is
        then closed)."""
        session = await self.session()
        try:
            answer = await session.call(name, arguments)
            if not answer.is_error and self.convention.matches(answer.content, answer.structured):
                answer = replace(answer, is_error=True)
            if not answer.is_error:
                self.worked.append((name, arguments))
            return answer
        except ExecutionFailed as failed:
            await self.close()
            return CallResult(content=f"{failed.reason}: {failed.message}", is_error=True, structured=_FAILED)

    async def state(self) -> Any:
        try:
            return await (await self.session()).state()
        except ExecutionFailed:
            await self.close()
            return None


_FAILED = {"session_failed": True}  # marks an answer made of a session's failure


class _Probing:
    """The first session's probes: each tool until an answer works, and a second round for the
    tools that had none, with what the others answered meanwhile (a folder made, an id issued)."""

    def __init__(self, session: _Sessions, hints: dict[str, Any], attempts: int) -> None:
        self.session, self.hints, self.attempts = session, hints, attempts
        self.convention = session.convention
        self.cards: dict[str, ToolCard] = {}
        self.answers: dict[str, str] = {}  # the deciding answer in full, by tool
        self.order: list[str] = []  # the tools whose probe worked, in the order it did
        self.times: list[float] = []
        self.found: list[str] = []  # strings the source answered, most recent first

    def _learn(self, value: Any) -> None:
        self.found = list(dict.fromkeys([*strings_in(value), *self.found]))[:FOUND]

    async def probe(self, function: Function) -> None:
        before = await self.session.state()
        self._learn(before)
        held = self.cards.get(function.name)
        tried = held.probes if held else 0
        refused = held.refused if held else True
        status, chosen = (held.status, held.arguments) if held else (ERRORS, None)
        answer = CallResult(content=held.answer if held else "no arguments fit its parameters", is_error=True)
        # A second round tries the same values again too: the state they meet has changed.
        for arguments in probe_arguments(function.parameters, self.attempts, tuple(self.found), function.description):
            tried += 1
            started = time.perf_counter()
            said = await self.session.call(function.name, arguments)
            self.times.append(time.perf_counter() - started)
            if said.structured is _FAILED:  # it hung or crashed its session: not probed again
                status, chosen, answer = FAILS_SESSION, arguments, said
                break
            refused = refused and (not said.is_error or isinstance(said.structured, dict) or bool(_BAD_INPUT.match(said.content))
                                   or self.convention.matches(said.content, said.structured))
            # The most telling answer decides: one that works, else one naming the network, a key.
            if _RANK[classify(said)] <= _RANK[status]:
                status, chosen, answer = classify(said), arguments, said
            if status == WORKS:
                self._learn(answer_value(answer.structured, answer.content))
                self.order.append(function.name)
                break
        after = await self.session.state()
        hint = (self.hints.get(function.name) or {}).get("read_only")
        changed = None if before is None and after is None else before != after
        if held is not None and held.changes_state:
            changed = True
        self.answers[function.name] = answer.content
        self.cards[function.name] = ToolCard(
            name=function.name, status=status, probes=tried, arguments=chosen, answer=answer.content[:SHOWN],
            read_only_hint=hint if isinstance(hint, bool) else None, changes_state=changed,
            call_seconds=round(self.times[-1], 4) if tried else 0.0,
            refused=status in (ERRORS, NEEDS_CREDENTIALS) and refused and tried > 0)


@dataclass
class _Pass:
    """What one session answered to the working tools' deciding calls, between its states."""

    before: Any
    answers: list[CallResult]
    after: Any


async def _replay(session: _Sessions, probing: _Probing) -> _Pass:
    """The working tools' deciding calls again, in the order they worked."""
    before = await session.state()
    answers = [await session.call(name, probing.cards[name].arguments or {}) for name in probing.order]
    return _Pass(before, answers, await session.state())


async def _second_pass(session: _Sessions, probing: _Probing) -> _Pass:
    """The deciding calls on a fresh session: a tool that answers otherwise is not deterministic."""
    fresh = await _replay(session, probing)
    for name, again in zip(probing.order, fresh.answers):
        card = probing.cards[name]
        card.deterministic = not again.is_error and again.content == probing.answers[name]
    return fresh


async def _reset_pass(used: _Sessions, probing: _Probing) -> tuple[_Pass | None, float | None, bool]:
    """The probed session (every probe's writes in it) reset, and the deciding calls made on it:
    (that pass, the seconds the reset took, whether the source can be reset at all)."""
    session = await used.session()
    reset = getattr(session, "reset", None)
    if reset is None:
        return None, None, False
    began = time.perf_counter()
    try:
        await reset()
    except ExecutionFailed:
        await used.close()
        return None, None, True
    took = round(time.perf_counter() - began, 4)
    return await _replay(used, probing), took, True


def _isolates(reset: _Pass | None, fresh: _Pass, later: _Pass, probing: _Probing) -> bool | None:
    """Whether the reset session was as fresh as the two fresh ones around it in time: it started
    from their state, ended where they did, and each tool that answered both fresh sessions alike
    answered it so too (a clock's answer may differ between them: it tells nothing here). None
    when there is nothing to compare (no state, no such tool)."""
    if reset is None:
        return False
    stable = [name for name, a, b in zip(probing.order, fresh.answers, later.answers) if not a.is_error and a.content == b.content]
    same_state = fresh.before == later.before and fresh.after == later.after
    if not stable and (not same_state or (fresh.before is None and fresh.after is None)):
        return None
    by_name = dict(zip(probing.order, reset.answers))
    fresh_by_name = dict(zip(probing.order, fresh.answers))
    answers_agree = all(by_name[name].content == fresh_by_name[name].content for name in stable)
    states_agree = not same_state or (reset.before == fresh.before and reset.after == fresh.after)
    return answers_agree and states_agree


async def vet(environment: Environment, attempts: int = 3, timeout_seconds: float = 300.0) -> SourceCard:
    """The card of `environment` (see the module doc); a source that cannot be vetted gets a card
    with its `failure` and no tool. `timeout_seconds` bounds the whole vetting in wall time."""
    card = SourceCard(source=environment.name)
    try:
        await asyncio.wait_for(_vet(environment, attempts, card), timeout_seconds)
    except ExecutionFailed as failed:
        card.failure = f"{failed.reason}: {failed.message}"
        card.tools = []
    except TimeoutError:
        card.failure = f"exec_timeout: vetting took more than {timeout_seconds:.0f} s"
        card.tools = []
    return card


async def _vet(environment: Environment, attempts: int, card: SourceCard) -> None:
    tools = await environment.list_tools()
    functions = [fn for tool in tools for fn in tool.functions]
    hints: dict[str, Any] = {}
    for tool in tools:
        hints.update((tool.provenance.get("mcp") or {}).get("functions") or {})
    card.error_convention = await _learn_convention(environment, functions)
    first, second, third = _Sessions(environment), _Sessions(environment), _Sessions(environment)
    for line in (first, second, third):
        line.convention = card.error_convention
    try:
        await first.session()  # a source that cannot start fails its card
        probing = _Probing(first, hints, attempts)
        for function in functions:
            await probing.probe(function)
        for function in functions:  # the second round: what failed, with what the others made
            if probing.cards[function.name].status in (ERRORS, NEEDS_NETWORK, NEEDS_CREDENTIALS):
                await probing.probe(function)
        fresh = await _second_pass(second, probing)
        # Sessions close in the reverse order of opening (an MCP session is a nest of task groups).
        await second.close()
        reset, card.reset_seconds, resettable = await _reset_pass(first, probing)
        # A third fresh session, after the reset one: what answers alike in both fresh ones is
        # what the reset one must answer too; a tool that differs is not deterministic; a state
        # that differs between them cannot be compared across sessions.
        later = await _replay(third, probing)
        await third.close()
        card.warm = _isolates(reset, fresh, later, probing) if resettable else None
        if fresh.before is not None or fresh.after is not None:
            card.state_reproducible = fresh.before == later.before and fresh.after == later.after
        for name, again in zip(probing.order, later.answers):
            card_of = probing.cards[name]
            card_of.deterministic = bool(card_of.deterministic) and not again.is_error and again.content == probing.answers[name]
    finally:
        await third.close()
        await second.close()
        await first.close()
    card.tools = [probing.cards[function.name] for function in functions]
    login = next((fn.name for fn in functions if _LOGIN.search(fn.name)), None)
    for tool_card in card.tools:
        tool_card.login_tool = login
    card.start_seconds = first.started
    card.call_seconds = round(median(probing.times), 4) if probing.times else None
    card.memory_mb = max(first.memory + second.memory + third.memory, default=0.0) or None


async def _learn_convention(environment: Environment, functions: list[Function]) -> ErrorConvention:
    """The source's error convention, from the unflagged answers to calls that must fail, made
    in a session of their own (what such a call wrote is not seen by the probes). A tool whose
    call failed the session is not called again."""
    session = _Sessions(environment)
    unflagged: list[tuple[InvalidCall, str, Any]] = []
    failed: set[str] = set()
    try:
        await session.session()  # a source that cannot start fails its card
        for call in invalid_calls(functions):
            if call.name in failed:
                continue
            said = await session.call(call.name, call.arguments)
            if said.structured is _FAILED:
                failed.add(call.name)
            elif not said.is_error:
                unflagged.append((call, said.content, said.structured))
    finally:
        await session.close()
    return learn(unflagged)


# --- in a run: the tools stage vets each source once per configuration and version -------------

#: Where a tool keeps what vetting found (``functions``: a card per function, and the source's
#: figures).
PROVENANCE = "vetting"
#: Bumped when what vetting does changes, so that cards made before are not reused.
VETTING_VERSION = 5
CARDS = "vetting"  # the folder of the storage root that keeps the cards


def vetted_function(tool: Tool, name: str) -> dict[str, Any]:
    """What vetting found of `tool`'s function `name` ({} when it was not vetted)."""
    found = (tool.provenance.get(PROVENANCE) or {}).get("functions") or {}
    return found.get(name) or {}


def vetted_error_convention(tool: Tool) -> ErrorConvention:
    """How `tool`'s source answers a failed call without flagging it, as vetting learnt (empty
    when it was not vetted, or flags its errors): `matches` tells such an answer."""
    return ErrorConvention.from_dict((tool.provenance.get(PROVENANCE) or {}).get("error_convention"))


def vetted_warm(tool: Tool) -> bool | None:
    """Whether vetting found that a reset keeps two sessions of `tool`'s source apart."""
    return (tool.provenance.get(PROVENANCE) or {}).get("warm")


def source_version(tool: Tool, settings: Any) -> str:
    """The version of what runs: the MCP server's own (from its initialize answer), or the
    distribution that holds a Python environment's class; "" when unknown."""
    server = ((tool.provenance.get("mcp") or {}).get("server") or {})
    if server.get("version"):
        return f"{server.get('name')} {server['version']}"
    distribution = getattr(settings, "distribution_version", None)
    if distribution is not None:
        return str(distribution())
    return ""


def card_key(settings: Any, version: str, attempts: int) -> str:
    """The name a source's card is kept under: its configuration (secrets left out: only the
    names of its variables and headers count) and the version of what runs."""
    config = settings.model_dump(mode="json", exclude={"env", "headers_from_env", "vet"})
    for key in ("env", "headers_from_env"):
        if hasattr(settings, key):
            config[key] = sorted(getattr(settings, key))
    text = json.dumps([VETTING_VERSION, attempts, config, version], sort_keys=True, default=str)
    return f"{settings.name}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def card_from(data: dict[str, Any]) -> SourceCard:
    """A card as :meth:`SourceCard.to_dict` wrote it (one written before conventions were learnt
    has none: an empty one)."""
    tools = [ToolCard(**{k: v for k, v in t.items() if k != "hint_honest"}) for t in data.get("tools") or []]
    convention = ErrorConvention.from_dict(data.get("error_convention"))
    return SourceCard(**{**{k: v for k, v in data.items() if k not in ("tools", "error_convention")},
                         "tools": tools, "error_convention": convention})


def provenance(card: SourceCard, cached: bool) -> dict[str, Any]:
    """What a vetted tool keeps of its source's card."""
    return {"version": VETTING_VERSION, "cached": cached, "start_seconds": card.start_seconds,
            "call_seconds": card.call_seconds, "memory_mb": card.memory_mb, "warm": card.warm,
            "reset_seconds": card.reset_seconds, "state_reproducible": card.state_reproducible,
            "error_convention": card.error_convention.to_dict(),
            "functions": {t.name: {"status": t.status, "refused": t.refused, "admitted": t.admitted,
                                   "deterministic": t.deterministic,
                                   "changes_state": t.changes_state,
                                   "read_only_hint": t.read_only_hint, "hint_honest": t.hint_honest} for t in card.tools}}
