"""Vetting: what each tool of an executable source does here, found by calling it.

A source is started as every dialogue starts it (confined, without network unless its
``limits.network`` allows it), its tools are listed, and each tool is called with arguments
that fit its parameters (:mod:`.probes`: documented examples first). The answers classify it:

``works``              a probe was answered without an error;
``needs_network``      every probe failed, and an answer names a refused or unreachable network;
``needs_credentials``  every probe failed, and an answer asks for a key, a token or a login;
``errors``             every probe failed otherwise.

A second, fresh session then makes the same calls in the same order: a tool whose answers
differ is not ``deterministic``. The state (:meth:`Session.state`) read before and after each
tool's calls says whether it ``changes_state`` (unknown where the source has no observable
state); an MCP tool that says it is read-only (``readOnlyHint``) and changes the state has a
dishonest hint. The card of a source also holds its start time, its median call time and the
peak memory of its processes.

The probes run in one session, tool after tool, in the order the source lists them, and then
once more for the tools that got no working answer: strings the source answered or holds in its
state (a file's name, an issued id) are tried after the documented values, so a tool that needs
another's work first (read what was written) sees it, as in a dialogue.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from toolfactory.executable.confine import descendants
from toolfactory.executable.probes import probe_arguments, strings_in
from toolfactory.executable.session import CallResult, Environment, ExecutionFailed, Session
from toolfactory.models import Function

WORKS, NEEDS_NETWORK, NEEDS_CREDENTIALS, ERRORS = "works", "needs_network", "needs_credentials", "errors"
#: The rejection code of a tool that does not work here, by class (counted like any rejection).
REJECTION = {NEEDS_NETWORK: "tool_needs_network", NEEDS_CREDENTIALS: "tool_needs_credentials",
             ERRORS: "tool_errors_on_every_probe"}
_RANK = {WORKS: 0, NEEDS_NETWORK: 1, NEEDS_CREDENTIALS: 2, ERRORS: 3}
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
    """``works``, ``needs_network``, ``needs_credentials`` or ``errors``."""
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
    """The peak resident memory of the session's processes (largest of the two sessions)."""
    tools: list[ToolCard] = field(default_factory=list)
    failure: str | None = None
    """Why the source could not be vetted (it did not start, or its session failed)."""

    def working(self) -> list[str]:
        return [t.name for t in self.tools if t.status == WORKS]

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


async def _state(session: Session) -> Any:
    try:
        return await session.state()
    except ExecutionFailed:
        return None


class _Probing:
    """The first session's probes: each tool until an answer works, and a second round for the
    tools that had none, with what the others answered meanwhile (a folder made, an id issued)."""

    def __init__(self, session: Session, hints: dict[str, Any], attempts: int) -> None:
        self.session, self.hints, self.attempts = session, hints, attempts
        self.cards: dict[str, ToolCard] = {}
        self.answers: dict[str, str] = {}  # the deciding answer in full, by tool
        self.order: list[str] = []  # the tools whose probe worked, in the order it did
        self.times: list[float] = []
        self.found: list[str] = []  # strings the source answered, most recent first

    def _learn(self, value: Any) -> None:
        self.found = list(dict.fromkeys([*strings_in(value), *self.found]))[:FOUND]

    async def probe(self, function: Function) -> None:
        before = await _state(self.session)
        self._learn(before)
        held = self.cards.get(function.name)
        tried = held.probes if held else 0
        status, chosen = (held.status, held.arguments) if held else (ERRORS, None)
        answer = CallResult(content=held.answer if held else "no arguments fit its parameters", is_error=True)
        # A second round tries the same values again too: the state they meet has changed.
        for arguments in probe_arguments(function.parameters, self.attempts, tuple(self.found)):
            tried += 1
            started = time.perf_counter()
            said = await self.session.call(function.name, arguments)
            self.times.append(time.perf_counter() - started)
            # The most telling answer decides: one that works, else one naming the network, a key.
            if _RANK[classify(said)] <= _RANK[status]:
                status, chosen, answer = classify(said), arguments, said
            if status == WORKS:
                self._learn(answer.structured if answer.structured is not None else answer.content)
                self.order.append(function.name)
                break
        after = await _state(self.session)
        hint = (self.hints.get(function.name) or {}).get("read_only")
        changed = None if before is None and after is None else before != after
        if held is not None and held.changes_state:
            changed = True
        self.answers[function.name] = answer.content
        self.cards[function.name] = ToolCard(
            name=function.name, status=status, probes=tried, arguments=chosen, answer=answer.content[:SHOWN],
            read_only_hint=hint if isinstance(hint, bool) else None, changes_state=changed,
            call_seconds=round(self.times[-1], 4) if tried else 0.0)


async def _second_pass(session: Session, probing: _Probing) -> None:
    """The working tools' deciding calls again, in the order they worked, on a fresh session: a
    tool that answers otherwise is not deterministic."""
    for name in probing.order:
        card = probing.cards[name]
        again = await session.call(name, card.arguments or {})
        card.deterministic = not again.is_error and again.content == probing.answers[name]


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
    memory: list[float] = []
    started = time.perf_counter()
    async with environment.session() as session:
        card.start_seconds = round(time.perf_counter() - started, 3)
        probing = _Probing(session, hints, attempts)
        for function in functions:
            await probing.probe(function)
        for function in functions:  # the second round: what failed, with what the others made
            if probing.cards[function.name].status != WORKS:
                await probing.probe(function)
        memory.append(_peak_memory_mb(session) or 0.0)
    async with environment.session() as session:
        await _second_pass(session, probing)
        memory.append(_peak_memory_mb(session) or 0.0)
    card.tools = [probing.cards[function.name] for function in functions]
    card.call_seconds = round(median(probing.times), 4) if probing.times else None
    card.memory_mb = max(memory) or None
