"""The rule registry: the :class:`Rule` type, ``RULES``, the ``@rule`` decorator and :func:`check`.

A rule is a function of a :class:`Sample` (one dialogue with the views every rule needs,
computed once: the offered functions by name, every tool call with its parsed arguments) that
yields ``(path, message)`` for each problem it finds and nothing when the dialogue passes. The
registry turns each finding into a failed :class:`~toolfactory.models.Verdict` carrying the
rule's stable code and severity:

* ``error``: the record is rejected by the verify stage;
* ``warning``: recorded in ``dialogue.verdicts`` but the record is accepted.

:func:`check` runs every enabled rule and returns every failed verdict (errors and warnings), so a
record's verdict lists every failed rule, not only the first. A record over the depth or size
limits (:mod:`toolfactory.stages.verify.limits`) gets that one verdict instead: the rules would
recurse through it.

Every record is judged alone: an exception while judging one record (a value a library refuses,
such as an integer longer than Python converts) is that record's ``record_check_error`` verdict,
with the exception's one-line text, never the end of a verify run or a shard. One rule that fails
costs only its own verdict (the message names the rule); a record whose shared views cannot be
built gets that verdict alone.

Call arguments are read as standard JSON (:func:`~toolfactory.render.parsed.standard_json`): ``NaN``,
``Infinity`` and a number beyond a double's range (``1e400``) are not JSON
(``call_arguments_not_json``), and a key named twice in one object is
recorded for ``call_duplicate_argument``.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal

from toolfactory.formats.base import exception_line
from toolfactory.models import Dialogue, Function, Message, ToolCall, Verdict
from toolfactory.render.parsed import DuplicateKeys, NonStandardNumber, standard_json
from toolfactory.stages.verify.limits import DEFAULT as DEFAULT_LIMITS
from toolfactory.stages.verify.limits import Limits, violation
from toolfactory.stages.verify.rules.function_facts import FunctionFacts, facts_of
from toolfactory.stages.verify.policy import DEFAULT as DEFAULT_POLICY
from toolfactory.stages.verify.policy import POLICIES, Policy, recovered_calls

CHECK_ERROR = "record_check_error"  # judging the record raised: not a rule, so it cannot be disabled

Severity = Literal["error", "warning"]
Kind = Literal["validity", "policy", "execution"]
Finding = tuple[str, str]  # (path, message)
RuleFn = Callable[["Sample"], Iterable[Finding]]


class _NotJson:
    """Marks call arguments that could not be parsed."""

    def __repr__(self) -> str:
        return "NOT_JSON"


NOT_JSON: Any = _NotJson()


class Call:
    """One tool call of a dialogue, with its position and its parsed arguments."""

    __slots__ = ("path", "message_index", "index", "call", "name", "value", "parse_error", "duplicate_keys")

    def __init__(self, message_index: int, index: int, call: ToolCall) -> None:
        self.message_index = message_index
        self.index = index
        self.call = call
        self.name = call.name
        self.path = f"messages[{message_index}].tool_calls[{index}]"
        self.parse_error: str | None = None
        self.duplicate_keys: list[str] = []
        """Keys some object of the arguments names twice (the value is read with the last one)."""
        # An empty argument string means "no arguments", as OpenAI clients send it.
        try:
            try:
                self.value: Any = standard_json(call.arguments, unique_keys=True) if call.arguments else {}
            except DuplicateKeys as exc:
                self.duplicate_keys = exc.keys
                self.value = standard_json(call.arguments)
        except json.JSONDecodeError as exc:
            self.value = NOT_JSON
            self.parse_error = f"{exc.msg} (line {exc.lineno}, column {exc.colno})"
        except NonStandardNumber as exc:
            self.value = NOT_JSON
            self.parse_error = str(exc)

    @property
    def arguments(self) -> dict[str, Any] | None:
        """The arguments as an object, or None when they are not a JSON object."""
        return self.value if isinstance(self.value, dict) else None


class Sample:
    """A dialogue plus the views the rules share, built once per :func:`check`."""

    __slots__ = ("dialogue", "messages", "functions", "facts", "calls", "policy", "builtin_functions", "_memo")

    def __init__(self, dialogue: Dialogue, policy: Policy = DEFAULT_POLICY,
                 facts: list[FunctionFacts] | None = None) -> None:
        self.dialogue = dialogue
        self.policy = policy
        self.messages: list[Message] = dialogue.messages
        self.facts = facts if facts is not None else [facts_of(fn) for fn in dialogue.tools]
        """The facts of each offered function, in tool-list order."""
        functions: dict[str, Function] = {}
        for fn in dialogue.tools:
            functions.setdefault(fn.name, fn)
        self.functions = functions
        recipe = POLICIES.get(dialogue.recipe)
        self.builtin_functions = policy.builtin_functions | (recipe.builtin_functions if recipe else frozenset())
        """Names a call may use besides the offered functions: the built-in actions of the
        dialogue's recipe and of the policy applied (validity: whichever policy is applied)."""
        self.calls: list[Call] = [
            Call(i, j, call)
            for i, message in enumerate(self.messages)
            if message.tool_calls
            for j, call in enumerate(message.tool_calls)
        ]
        self._memo: dict[str, Any] = {}

    def provide(self, key: str, value: Any) -> None:
        """Give the sample a view computed elsewhere (the execution layer's replay), read with
        :meth:`memo` under `key`."""
        self._memo[key] = value

    def memo(self, key: str, compute: Callable[["Sample"], Any]) -> Any:
        """`compute(self)`, computed once per sample (for analyses several rules share)."""
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = compute(self)
            return value

    def facts_for(self, function: Function) -> FunctionFacts:
        """The facts of `function`, one of the offered functions."""
        by_id = self.memo("facts_by_id", lambda sample: {id(fn): f for fn, f in zip(sample.dialogue.tools, sample.facts)})
        return by_id[id(function)]

    def candidate(self, name: str) -> Function | None:
        """The offered function an unknown called `name` obviously means, or None.

        Obvious: the only one equal to `name` up to case and punctuation (``get_weather`` for
        ``getWeather``), else the only one whose name `name` contains (a marker such as
        ToolAlpaca's ``[Optional]`` around it), else the only close spelling (difflib ratio >= 0.8). Its schema still
        checks the call's arguments, so a wrong name does not hide wrong arguments."""
        key = _loose(name)
        same = [fn for fn_name, fn in self.functions.items() if _loose(fn_name) == key]
        if len(same) == 1:
            return same[0]
        # A marker around the offered name (ToolAlpaca's "[Optional]updateUserProfile").
        inside = [fn for fn_name, fn in self.functions.items() if len(_loose(fn_name)) >= 4 and _loose(fn_name) in key]
        if len(inside) == 1:
            return inside[0]
        close = difflib.get_close_matches(name, list(self.functions), n=2, cutoff=0.8)
        return self.functions[close[0]] if len(close) == 1 else None

    def final_answer(self) -> tuple[int, str] | None:
        """(index, text) of the closing assistant text turn, or None if the dialogue has none."""
        if not self.messages:
            return None
        last = self.messages[-1]
        if last.role != "assistant" or last.tool_calls or not (last.content or "").strip():
            return None
        return len(self.messages) - 1, last.content or ""


@dataclass(frozen=True)
class Rule:
    """A registered rule: stable code, severity, family (module), kind and the check itself."""

    code: str
    severity: Severity
    family: str
    fn: RuleFn
    doc: str = ""
    kind: Kind = "validity"

    def run(self, sample: Sample) -> list[Verdict]:
        return [
            Verdict(code=self.code, passed=False, severity=self.severity, message=message, path=path)
            for path, message in self.fn(sample)
        ]

    def __call__(self, dialogue: Dialogue) -> list[Verdict]:
        """The failed verdicts of this rule alone."""
        return self.run(Sample(dialogue))


RULES: dict[str, Rule] = {}


def record_rules() -> dict[str, Rule]:
    """The rules that judge a record alone (every kind but ``execution``, whose rules judge a
    replay of the record's calls and so run only in the execution layer)."""
    return {code: registered for code, registered in RULES.items() if registered.kind != "execution"}


def _loose(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", name.casefold())


def rule(code: str, severity: Severity = "error", kind: Kind = "validity") -> Callable[[RuleFn], RuleFn]:
    """Register `fn` under `code` (codes are stable: they are stored with rejected records);
    `kind` says whether it judges validity, a recipe's policy (:mod:`..policy`) or a replay of
    the calls on their executable sources (``execution``: run by the execution layer only)."""
    if severity not in ("error", "warning"):
        raise ValueError(f"rule {code}: severity must be 'error' or 'warning', not {severity!r}")

    def register(fn: RuleFn) -> RuleFn:
        if code in RULES:
            raise ValueError(f"rule code {code!r} is registered twice")
        family = fn.__module__.rsplit(".", 1)[-1]
        doc = (fn.__doc__ or "").strip().split("\n", 1)[0]
        RULES[code] = Rule(code=code, severity=severity, family=family, fn=fn, doc=doc, kind=kind)
        return fn

    return register


def check(dialogue: Dialogue, disabled: frozenset[str] | set[str] = frozenset(),
          limits: Limits = DEFAULT_LIMITS, policy: Policy | None = DEFAULT_POLICY) -> list[Verdict]:
    """Every failed verdict (errors and warnings) of every enabled rule, in registry order; only
    ``record_too_deep`` / ``record_too_large`` for a record over `limits`. With `policy` None the
    policy rules are skipped (validity only). A policy that keeps error recovery turns the
    findings on a recovered call into warnings; the warning rules a policy lists as `rejecting`
    are errors under it."""
    try:
        facts = [facts_of(fn) for fn in dialogue.tools]
        over = violation(dialogue, limits, facts)
        if over is not None:
            return [over]
        sample = Sample(dialogue, policy or DEFAULT_POLICY, facts)
        recovered: tuple[str, ...] = ()
        if policy is not None and policy.keep_error_recovery:
            recovered = tuple(path + "." for path in sample.memo("recovered", recovered_calls))
    except Exception as exc:  # noqa: BLE001 - one record's fault, never the run's
        return [check_error(exc)]
    out: list[Verdict] = []
    for code, registered in RULES.items():
        # Execution rules judge a replay, which only the execution layer has (see its module).
        if code in disabled or registered.kind == "execution" or (policy is None and registered.kind == "policy"):
            continue
        try:
            findings = list(registered.fn(sample))
        except Exception as exc:  # noqa: BLE001 - this rule cannot judge this record; the others still do
            out.append(check_error(exc, code))
            continue
        for path, message in findings:
            severity = "warning" if recovered and path.startswith(recovered) else \
                "error" if policy is not None and code in policy.rejecting else registered.severity
            out.append(Verdict(code=code, passed=False, severity=severity, message=message, path=path))
    return out


def check_error(exc: BaseException, rule_code: str | None = None) -> Verdict:
    """The ``record_check_error`` verdict of a record whose judging raised `exc` (in `rule_code`)."""
    where = f"{rule_code}: " if rule_code else ""
    return Verdict(code=CHECK_ERROR, passed=False, severity="error", message=where + exception_line(exc), path="")


def errors(verdicts: Iterable[Verdict]) -> list[Verdict]:
    """The verdicts that reject a record."""
    return [v for v in verdicts if v.severity == "error" and not v.passed]
