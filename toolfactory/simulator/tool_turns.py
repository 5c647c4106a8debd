"""What an assistant turn does when function tools are offered, as real models do it.

A turn either calls functions (one, or several in parallel; after tool results possibly again,
with arguments grounded in those results, see :mod:`.grounding`), asks the user for a missing
required value, declines because no offered function fits, or answers in text. Which one is
decided from generic request features (`tool_choice`, `parallel_tool_calls`, word overlap, the
conversation's tool rounds) and seeded draws against the knobs of :class:`SimulatorSettings`
(`rate_parallel_calls`, `rate_follow_up_call`, `rate_clarify`, `rate_decline`, and the switch
`decline_when_irrelevant`): each draw is a function of the request hash, the behaviour and the
choice index, so the same request always gets the same kind of turn, and a knob at 0 (or off)
never changes an answer.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from . import lexicon
from .functions import FunctionSpec, choose_function, shares_stem, wanted_words, word_score
from .grounding import ResultValues, ground_arguments, groundable, parameter_key
from .mentions import mentioned_values, spells_out
from .schema_instance import instance_for, is_valid_instance
from .seeding import canonical_json, unit_draw
from .settings import SimulatorSettings
from .stated_values import documented_source
from .text import identifier_words, join_phrase, lower_words, words

MAX_TOOL_ROUNDS = 3  # assistant turns with tool calls per conversation before a final answer
MAX_PARALLEL_CALLS = 3
DISTINCT_ATTEMPTS = 6  # tries to give a repeated call arguments differing from earlier ones
MAX_ENUM_OPTIONS = 4  # a clarifying question lists the options of an enum up to this size
QUOTE_WORDS = 20  # a decline quotes at most this many words of the request

REDRAWS = 8  # draws for another value than one an error refused


class Turn(StrEnum):
    """The kind of assistant turn."""

    CALL = "call"
    CLARIFY = "clarify"
    DECLINE = "decline"
    TEXT = "text"


@dataclass(frozen=True)
class ToolHistory:
    """What the conversation already holds of tool use."""

    rounds: int = 0  # assistant messages with tool calls
    results_seen: bool = False  # any tool (or legacy function) result message
    trailing_results: bool = False  # the last message is a tool result
    asked_before: bool = False  # an earlier assistant text turn (a model asks or declines once)
    values: ResultValues = field(default_factory=dict)  # see grounding.result_values
    calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # name -> arguments
    failed: str | None = None  # a function whose trailing result is an error
    refused: frozenset[str] = frozenset()  # argument values a trailing error quotes (not sent again)


# How a tool that answers in plain text says it failed: "Error executing tool convert_time: ..."
# (an MCP server's isError result), "Error: ...", a Python traceback.
_TEXT_ERROR = re.compile(r"^\s*(?:error|exception|traceback|invalid|failed)\b", re.I)


def is_error_result(content: Any) -> bool:
    """Whether a tool result is an error: a JSON object with a 4xx/5xx `status_code`, or an
    `error` key and no success status; a text that opens as an error message does."""
    text = content if isinstance(content, str) else ""
    try:
        body = json.loads(text)
    except ValueError:
        return bool(_TEXT_ERROR.match(text))
    if not isinstance(body, dict):
        return False
    status = body.get("status_code")
    if isinstance(status, int):
        return status >= 400
    return "error" in body


def behaviour_hit(request_hash: str, behaviour: str, choice: int, rate: float) -> bool:
    """The seeded draw deciding whether `behaviour` happens for this choice of this request."""
    return rate > 0 and unit_draw(request_hash, "behaviour", behaviour, choice) < rate


def decide_turn(
    settings: SimulatorSettings,
    request_hash: str,
    choice: int,
    *,
    can_call: bool,
    forced: bool,
    relevant: bool,
    said_something: bool,
    history: ToolHistory,
    intent: str | None = None,
    obeyed: bool = False,
) -> Turn:
    """The kind of turn, in the decision order documented in :mod:`.chat`.

    `relevant`: the user's message relates to a callable function (see
    :func:`.functions.is_relevant`); `said_something`: it has content words at all (a bare
    "hi" or "thanks" gets a plain text answer, not a refusal). `intent`: the mode the user's
    request asks for (see :mod:`.instructions`), acted on when `obeyed`.
    """
    if not can_call:
        return Turn.TEXT
    if intent is not None and obeyed and not forced:
        return _as_requested(intent, history)
    if history.trailing_results:
        deeper = history.rounds < MAX_TOOL_ROUNDS
        if history.failed is not None and deeper:
            return Turn.CALL  # a model reads the error and tries again
        follow = behaviour_hit(request_hash, "follow_up", choice, settings.rate_follow_up_call)
        return Turn.CALL if deeper and follow else Turn.TEXT
    if forced:
        return Turn.CALL
    if settings.decline_when_irrelevant and not relevant:
        return Turn.DECLINE if said_something else Turn.TEXT
    if not history.results_seen and not history.asked_before:
        if behaviour_hit(request_hash, "decline", choice, settings.rate_decline):
            return Turn.DECLINE
        if behaviour_hit(request_hash, "clarify", choice, settings.rate_clarify):
            return Turn.CLARIFY
    return Turn.CALL


def _as_requested(intent: str, history: ToolHistory) -> Turn:
    """The turn a request that says what it needs gets from a model following it: none of the
    unasked-for behaviours (extra calls, questions, declines) are drawn."""
    if history.trailing_results:
        return Turn.CALL if intent == "dependent" and history.rounds < 2 else Turn.TEXT
    if intent == "non_tool" and not history.asked_before:
        return Turn.DECLINE
    if intent == "missing" and not history.results_seen and not history.asked_before:
        return Turn.CLARIFY
    return Turn.CALL


def wants_parallel(
    body: dict[str, Any], settings: SimulatorSettings, request_hash: str, choice: int
) -> bool:
    """Whether this choice's tool-call turn holds several calls."""
    if body.get("parallel_tool_calls") is False:
        return False
    return behaviour_hit(request_hash, "parallel", choice, settings.rate_parallel_calls)


# -- calls ---------------------------------------------------------------------------------


Call = tuple[FunctionSpec, dict[str, Any]]


def _relation(
    spec: FunctionSpec, context: list[str], history: ToolHistory
) -> tuple[bool, int, int]:
    """(related to the request or the results, parameters the results can fill, shared words)."""
    fillable = groundable(spec.properties(), history.values)
    related = fillable > 0 or shares_stem([spec], context)
    return related, fillable, word_score(spec, wanted_words(context))


def _follow_up_function(
    functions: list[FunctionSpec],
    context: list[str],
    history: ToolHistory,
    rng: random.Random,
    follows: bool = False,
) -> FunctionSpec:
    """After tool results: preferably a related function not called yet, then the one most of
    whose parameters the results can fill (search -> book), then by shared words. A model that
    `follows` the request goes first to a function whose parameters are documented as coming
    from a function it called ("Alert id as returned by list_active_alerts"), then by the
    request's words before the results ("then get the air quality")."""

    def rank(spec: FunctionSpec) -> tuple[int, ...]:
        related, fillable, shared = _relation(spec, context, history)
        fresh = spec.name not in history.calls
        if follows:
            fed = _documented_after(spec, history.calls)
            return fresh and (related or fed), fresh and fed, shared, fillable, fresh
        return fresh and related, fillable, shared, fresh

    ranks = [rank(spec) for spec in functions]
    best = max(ranks)
    return rng.choice([spec for spec, r in zip(functions, ranks, strict=True) if r == best])


def _documented_after(spec: FunctionSpec, called: Iterable[str]) -> bool:
    """Whether a parameter's description names one of the `called` functions as its source."""
    return any(documented_source(schema, name) for name in called for schema in spec.properties().values())


def _arguments(
    spec: FunctionSpec,
    rng: random.Random,
    context: list[str],
    history: ToolHistory,
    earlier: list[dict[str, Any]],
    said: list[str] | None = None,
) -> dict[str, Any]:
    """Arguments drawn from the schema; with `said` (the user's messages, when the model
    follows them) those the user states are taken from the text and optional ones the user
    does not state are left out, as the prompt asks ("argument values taken from the
    conversation"). Values from tool results come last (a dependent call uses the result)."""
    arguments = instance_for(spec.parameters, rng, context)
    if not isinstance(arguments, dict):
        arguments = {}
    used: dict[str, list[Any]] = {}
    for previous in earlier:
        for key, value in previous.items():
            used.setdefault(key, []).append(value)
    if said is not None:
        stated = mentioned_values(spec.properties(), said)
        if spells_out(spec.properties(), said):
            _drop_unstated(arguments, spec, stated)
        ground_arguments(arguments, spec.parameters, stated, used, distinct=True)
    ground_arguments(arguments, spec.parameters, history.values, used)
    if spec.name == history.failed and history.refused:
        _avoid_refused(arguments, spec, rng, context, history.refused)
    return arguments


def refused_values(arguments: str | None, error: str) -> set[str]:
    """The string values of a call's `arguments` (JSON) that its `error` quotes: "No time zone
    found with key America/San_Francisco" refuses that value, and a model does not send it again."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return set()
    values = parsed.values() if isinstance(parsed, dict) else []
    return {value for value in values if isinstance(value, str) and len(value) > 1 and value in error}


def _avoid_refused(arguments: dict[str, Any], spec: FunctionSpec, rng: random.Random, context: list[str],
                   refused: frozenset[str]) -> None:
    """Draw again each argument whose value an error refused (kept if no other value comes)."""
    for name, value in list(arguments.items()):
        if not (isinstance(value, str) and value in refused):
            continue
        single = {"type": "object", "properties": {name: spec.properties().get(name, {})}, "required": [name]}
        for _ in range(REDRAWS):
            drawn = instance_for(single, rng, context)
            if isinstance(drawn, dict) and drawn.get(name) not in refused:
                arguments[name] = drawn[name]
                break


def _drop_unstated(arguments: dict[str, Any], spec: FunctionSpec, stated: ResultValues) -> None:
    """Leave out the optional arguments the user gave no value for, unless the schema then
    fails (a `minProperties`, a `dependentRequired`). Only for a request that spells its values
    out: otherwise the values are the model's own (ToolLLM's `Finish` and its `final_answer`)."""
    required = set(spec.required())
    kept = {
        name: value
        for name, value in arguments.items()
        if name in required or stated.get(parameter_key(name))
    }
    if len(kept) < len(arguments) and is_valid_instance(spec.parameters, kept):
        arguments.clear()
        arguments.update(kept)


def statement(spec: FunctionSpec, said: list[str]) -> tuple[bool, int]:
    """(whether `said` gives every required parameter of the function a value, how many of its
    parameters it gives a value of their own): "weather in Lyon" gives `city` one value, and
    `origin` and `destination` one between them."""
    stated = mentioned_values(spec.properties(), said)
    claimed: set[str] = set()
    for name in spec.properties():
        free = [mark for mark in map(canonical_json, stated.get(parameter_key(str(name)), [])) if mark not in claimed]
        claimed.update(free[:1])
    complete = all(stated.get(parameter_key(name)) for name in spec.required())
    return complete and bool(claimed), len(claimed)


def _unused_context(context: list[str], earlier: list[dict[str, Any]]) -> list[str]:
    """The context without words earlier calls already passed as values, so a repeated call
    picks the next thing the user mentioned ("Paris and Tokyo")."""
    taken = {
        word.lower()
        for previous in earlier
        for value in previous.values()
        if isinstance(value, str)
        for word in words(value)
    }
    rest = [word for word in context if word.lower() not in taken]
    return rest or context


def plan_calls(
    functions: list[FunctionSpec],
    context: list[str],
    history: ToolHistory,
    rng: random.Random,
    parallel_rng: random.Random | None,
    said: list[str] | None = None,
) -> list[Call]:
    """The functions to call and their arguments; several when `parallel_rng` is given.

    The first call is exactly the single call this turn would make (same function, same
    draws from `rng`). Extra calls go to the other functions related to the request or to
    earlier results (best first), or, if there are none, repeat the first function with other
    argument values; a repeat that cannot get different values is dropped.

    With `said` (the user's messages, when the model follows them, see :func:`_arguments`)
    the request's stated values also choose, when the latest message states some (a message
    that states none, like ToolLLM's "try something different", leaves the choice to the words):
    first the function the user gives most values for, and for the extra calls exactly the
    other functions the user gives values for.
    """
    stated = {spec.name: statement(spec, said) if said is not None else (False, 0) for spec in functions}
    latest = {spec.name: statement(spec, said[:1]) if said else (False, 0) for spec in functions}
    retried = [spec for spec in functions if spec.name == history.failed]
    if retried:
        first = retried[0]
    elif history.trailing_results:
        first = _follow_up_function(functions, context, history, rng, said is not None)
    elif len(functions) == 1:
        first = functions[0]
    elif said and any(count for _, count in latest.values()):
        # The function the latest message gives all it needs, then the words, then the values.
        wanted = wanted_words(context)
        ranks = {
            spec.name: (latest[spec.name][0], word_score(spec, wanted), stated[spec.name][1])
            for spec in functions
        }
        best = max(ranks.values())
        first = rng.choice([spec for spec in functions if ranks[spec.name] == best])
    else:
        first = choose_function(functions, context, rng)
    calls: list[Call] = [
        (first, _arguments(first, rng, context, history, history.calls.get(first.name, []), said))
    ]
    if parallel_rng is None:
        return calls
    count = parallel_rng.randint(2, MAX_PARALLEL_CALLS)
    others = [spec for spec in functions if spec.name != first.name]
    parallel_rng.shuffle(others)
    relations = {spec.name: _relation(spec, context, history) for spec in others}
    related = [spec for spec in others if relations[spec.name][0]]
    related.sort(key=lambda spec: relations[spec.name][1:], reverse=True)
    asked = sorted(
        (spec for spec in related if stated[spec.name][0]),
        key=lambda spec: (-stated[spec.name][1], spec.name),
    )
    # Repeats that follow the request: one per value it states ("Lyon and Oslo"), no more; a
    # request stating none for the function leaves the count to the draw.
    repeats = MAX_PARALLEL_CALLS - 1 if stated[first.name][1] else count - 1
    targets = asked[: MAX_PARALLEL_CALLS - 1] or related[: count - 1] or [first] * repeats
    for spec in targets:
        same = [arguments for other, arguments in calls if other.name == spec.name]
        earlier = history.calls.get(spec.name, []) + same
        seen = {_distinct_part(arguments, spec, said) for arguments in same}
        for _ in range(DISTINCT_ATTEMPTS):
            arguments = _arguments(
                spec, parallel_rng, _unused_context(context, earlier), history, earlier, said
            )
            if _distinct_part(arguments, spec, said) not in seen:
                calls.append((spec, arguments))
                break
    return calls


def _distinct_part(arguments: dict[str, Any], spec: FunctionSpec, said: list[str] | None) -> str:
    """What must differ between two calls of one turn to the same function: the arguments, or
    those the user states when the model follows the request (another city, not another
    invented day count)."""
    if said is not None:
        stated = mentioned_values(spec.properties(), said)
        part = {name: value for name, value in arguments.items() if stated.get(parameter_key(name))}
        if part:
            return canonical_json(part)
    return canonical_json(arguments)


# -- texts ---------------------------------------------------------------------------------

_QUESTIONS = (
    "Could you tell me which {words} you mean?",
    "Which {words} would you like me to use?",
    "Happy to help with that. What {words} should I use?",
    "To {action}, I need the {words} - which one do you mean?",
    "Before I {action}, could you tell me the {words}?",
    # Real models often ask without a question mark.
    "Please tell me the {words} you have in mind, and I will {action} right away.",
    "I need the {words} to {action}. Let me know and I will take care of it.",
)
_CONFIRMATIONS = (
    "Just to be sure, which {words} do you mean?",
    "Before I {action}, can you confirm the {words} you want?",
)
_OPTION_QUESTIONS = (
    "Should the {words} be {options}?",
    "Which {words} would you like: {options}?",
)
_DECLINES = (
    "I'm sorry, but none of the available functions can help with {request}.",
    "Unfortunately I can't help with {request}: the tools I have can only {abilities}.",
    "None of my tools fit {request} - they can {abilities}, but not this.",
    "I don't have a function for {request}. I can {abilities}, if that helps.",
)


def _given(spec: FunctionSpec, name: str, arguments: dict[str, Any], user_text: str) -> bool:
    """Whether the user's message seems to hold this parameter's value already: the generated
    value itself, any number for a numeric parameter, or a known value (a city for `city`)."""
    value = arguments.get(name)
    text = user_text.lower()
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        if str(value) and str(value).lower() in text:
            return True
    schema = spec.properties().get(name)
    if isinstance(schema, dict) and schema.get("type") in ("integer", "number"):
        if any(char.isdigit() for char in text):
            return True
    spoken = f" {' '.join(lower_words(user_text))} "
    known = lexicon.known_values(identifier_words(name))
    return any(f" {option.lower()} " in spoken for option in known)


def clarify_question(
    spec: FunctionSpec, arguments: dict[str, Any], user_text: str, rng: random.Random
) -> str | None:
    """A question asking for one required parameter of `spec` (None if it requires none).

    `arguments` are those the call would have had. A parameter the user's message does not
    seem to give is asked for; if it seems to give them all, one is asked to be confirmed.
    """
    required = spec.required()
    if not required:
        return None
    missing = [name for name in required if not _given(spec, name, arguments, user_text)]
    name = rng.choice(missing or required)
    words_text = " ".join(identifier_words(name)) or name
    schema = spec.properties().get(name)
    options = schema.get("enum") if isinstance(schema, dict) else None
    if (
        isinstance(options, list)
        and 2 <= len(options) <= MAX_ENUM_OPTIONS
        and all(isinstance(option, str) for option in options)
    ):
        choices = ", ".join(options[:-1]) + " or " + options[-1]
        return rng.choice(_OPTION_QUESTIONS).format(words=words_text, options=choices)
    templates = _QUESTIONS if missing else _CONFIRMATIONS
    return rng.choice(templates).format(words=words_text, action=spec.phrase())


def decline_answer(functions: list[FunctionSpec], user_text: str, rng: random.Random) -> str:
    """A refusal saying that no offered function can serve the request."""
    said = words(user_text)
    quoted = " ".join(said[:QUOTE_WORDS]) + ("..." if len(said) > QUOTE_WORDS else "")
    request = f'"{quoted}"' if said else "that request"
    abilities = join_phrase([spec.phrase() for spec in functions[:3]])
    if len(functions) > 3:
        abilities = ", ".join(spec.phrase() for spec in functions[:3]) + " and more"
    return rng.choice(_DECLINES).format(request=request, abilities=abilities)
