"""Instruction-following: acting on a target mode stated in the prompt (ToolACE §2.2.1).

A model asked to write requests that need parallel calls, dependent calls, a value the user
leaves out, or no offered function, mostly writes such requests; a model given such a request
mostly acts on it. The simulator does both with probability ``obedience``, reading the mode from
the text it receives, as a model would (there is no other channel):

* writing (a JSON answer whose items have a ``request`` text): the prompt's wording of the mode
  is recognised (:func:`stated_mode`) and each request gets that mode's cue sentence, or, for
  ``non_tool``, is written about the subject the prompt says no function serves; a request
  written with its own ``calls`` (a blueprint) says what each call does (its function's own
  description) and states their values when the prompt asks so;
* writing over a prompt that lists what exists in the tool's environment (see
  :func:`~.stated_values.listed_facts`): a request (``request``, ``instruction`` or ``query``)
  names, for the string parameters of its functions, the listed values that fit them, and a
  request written with its own calls gives those calls the listed values (never for a function
  that creates something, whose values are new names), so the calls it asks for find what
  they name;
* acting (a tool turn): the last user message's cue (:func:`requested_mode`) makes the turn
  parallel, a follow-up call after the first results, a question for the missing value, a
  decline (a request about a subject, opened the way :func:`write_for_mode` writes it) or one
  call, without the behaviours the request did not ask for.
"""

from __future__ import annotations

import re
from typing import Any

from toolfactory.stages import prompt_markers as said

from .seeding import derive_rng, unit_draw
from .settings import SimulatorSettings
from .stated_values import (Offered, asks_for_call_values, asks_for_values, calls_sentence, chained_pair, creates,
                            fitting_fact, listed_facts, offered_functions, request_context, stated_links,
                            values_sentences)
from .text import words



def _phrases(*markers: str, other: str) -> re.Pattern[str]:
    """The product prompts' markers of a mode (toolfactory.stages.prompt_markers), or `other`
    wording of the same mode a prompt of another's might use."""
    return re.compile("|".join([*map(re.escape, markers), other]), re.I)


# How request-writing prompts phrase each mode (ToolACE's multi-mode prompting and its kin).
_STATED = (
    ("non_tool", _phrases(said.MODE_NON_TOOL_SUBJECT, said.MODE_NON_TOOL, other=r"no offered function can")),
    ("missing", _phrases(said.MODE_MISSING_VALUE, said.MODE_MISSING, other=r"leaves? out .{0,40}value|missing (value|parameter)")),
    ("dependent", _phrases(said.MODE_DEPENDENT, other=r"comes? from an earlier call|depends? on (an|the) earlier|uses? the result of (an|the) earlier")),
    ("parallel", _phrases(said.MODE_PARALLEL, said.MODE_PARALLEL_AT_ONCE, other=r"in parallel|at the same time")),
    ("single", _phrases(said.MODE_SINGLE, said.MODE_MULTIPLE, other=r"a single call")),
)
# What a user writes when a request needs that mode (and what the acting side recognises).
CUES = {
    "parallel": "Please look up each of them at the same time.",
    "dependent": "Then use what the first answer tells you for the next step.",
    "missing": "I am not sure about one of the details yet.",
    "single": "That one thing is all I need.",
}
NON_TOOL_OPENING = "I need some help with"
_REQUESTED = (
    ("parallel", re.compile(r"at the same time|all at once|in parallel|each of them", re.I)),
    ("dependent", re.compile(r"\bthen use\b|based on what you find|use (the|that) result", re.I)),
    ("missing", re.compile(r"not sure about|haven't decided|have not decided|don't know (the|which|what)", re.I)),
    ("non_tool", re.compile(r"^\s*i need some help with\b", re.I)),
    ("single", re.compile(r"one thing is all i need|just this one", re.I)),
)
_SUBJECT = re.compile(r"subject[^:\n]*:\s*(.+)", re.I)
SUBJECT_WORDS = 14


def stated_mode(prompt: str) -> str | None:
    """The mode a request-writing prompt asks for, if it states one."""
    return next((mode for mode, pattern in _STATED if pattern.search(prompt)), None)


def writing_prompt(said: list[str]) -> str:
    """The request-writing prompt among the user's messages (latest first): the latest that
    states a mode or asks for concrete values. A re-ask ("Your answer is not valid JSON. Reply
    again ...") corrects the answer's form, so the answer still does what the prompt asked; so
    does feedback on a blueprint's calls (a designer writing it again reads its first prompt too)."""
    return next((text for text in said if stated_mode(text) or asks_for_values(text) or asks_for_call_values(text)),
                said[0] if said else "")


def requested_mode(user_text: str) -> str | None:
    """The mode a user's request calls for, if it says so."""
    return next((mode for mode, pattern in _REQUESTED if pattern.search(user_text)), None)


def obeys(settings: SimulatorSettings, request_hash: str, what: str, index: int) -> bool:
    return settings.obedience > 0 and unit_draw(request_hash, "obey", what, index) < settings.obedience


def _subject_request(prompt: str) -> str | None:
    match = _SUBJECT.search(prompt)
    if not match:
        return None
    said = words(match.group(1))[:SUBJECT_WORDS]
    return f"{NON_TOOL_OPENING} {' '.join(said)}." if said else None


def _step(description: str) -> str:
    """A function's description as the step a user asks for ("get the forecast for a place")."""
    text = description.strip().rstrip(".")
    return text[:1].lower() + text[1:]


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LABEL = re.compile(r"^[A-Za-z][\w ]{0,30}:\s+")


def _own_step(name: str, offered: dict[str, Offered]) -> str | None:
    """What the function `name` does, as a user asks for it: the first sentence of its description
    that not every listed function shares (a reader skips a source's common preamble, such as
    "This tool belongs to the Gorilla file system."), without a leading label."""
    if name not in offered:
        return None
    def sentences(text: str) -> list[str]:
        return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]
    common = set.intersection(*(set(sentences(o.description)) for o in offered.values())) if len(offered) > 1 else set()
    own = [sentence for sentence in sentences(offered[name].description) if sentence not in common]
    if not own:
        return None
    step = _LABEL.sub("", own[0]).rstrip(".")
    return f"{step[:1].upper()}{step[1:]}." if step else None


# The keys a request-writing answer holds its request text under (toolace and blueprints,
# toolalpaca, toolllm), and where each lists the functions the request needs.
_REQUEST_KEYS = ("request", "instruction", "query")


def _listed_functions(item: dict[str, Any]) -> list[str]:
    names = item.get("functions")
    if isinstance(names, list):
        return [str(name) for name in names]
    apis = item.get("relevant_apis")
    return [str(api.get("api")) for api in apis if isinstance(api, dict)] if isinstance(apis, list) else []


def _with_facts(calls: list[Any], offered: dict[str, Offered], facts: list[tuple[str, str]], request_hash: str,
                position: int) -> list[Any]:
    """`calls` (a request's own) with each string argument of a function that creates nothing
    given the listed value that fits it, where one does."""
    rng = derive_rng(request_hash, "facts", position)
    out = []
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("arguments"), dict) or call.get("name") not in offered:
            out.append(call)
            continue
        function = offered[str(call["name"])]
        props = function.parameters.get("properties") or {}
        arguments = dict(call["arguments"])
        if not creates(_own_step(str(call["name"]), offered) or function.description):
            given: set[str] = set()
            for name, value in arguments.items():
                listed = fitting_fact(name, props.get(name), facts, rng) if isinstance(value, str) else None
                # One listed value for one argument of a call: nobody moves a file onto itself.
                if listed is not None and listed not in given:
                    arguments[name] = listed
                    given.add(listed)
        out.append({**call, "arguments": arguments})
    return out


def write_for_mode(value: Any, prompt: str, settings: SimulatorSettings, request_hash: str) -> Any:
    """`value` (a JSON answer) with its requests written for the prompt's stated mode, and
    giving the values their functions require when the prompt asks for concrete values (see
    :mod:`.stated_values`; a ``missing`` request leaves one out, a ``dependent`` one names two
    chained functions, leaves the value the first result gives and says what the second step
    does, in the words of its description)."""
    mode = stated_mode(prompt) if settings.obedience > 0 else None
    offered = offered_functions(prompt) if settings.obedience > 0 and asks_for_values(prompt) else {}
    own_calls = settings.obedience > 0 and asks_for_call_values(prompt)
    facts = listed_facts(prompt) if settings.obedience > 0 else []
    listed_functions = offered_functions(prompt) if own_calls or facts else {}
    own_steps = {name: _own_step(name, listed_functions) or "" for name in listed_functions}
    if mode is None and not offered and not own_calls and not facts:
        return value
    subject = _subject_request(prompt) if mode == "non_tool" else None
    context = request_context(prompt)
    position = 0

    def rewrite(node: Any) -> Any:
        nonlocal position
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        if not isinstance(node, dict):
            return node
        out = {key: rewrite(item) for key, item in node.items()}
        request = out.get("request")
        if facts and not isinstance(request, str):  # toolalpaca's and toolllm's requests, over a listed environment
            key = next((k for k in _REQUEST_KEYS[1:] if isinstance(out.get(k), str)), None)
            if key is not None:
                position += 1
                if obeys(settings, request_hash, "write", position):
                    rng = derive_rng(request_hash, "values", position)
                    given = values_sentences(_listed_functions(out), listed_functions, rng, context, facts=facts, steps=own_steps)
                    out[key] = " ".join(part for part in (str(out[key]).rstrip(), given) if part)
            return out
        if isinstance(request, str):
            position += 1
            if not obeys(settings, request_hash, "write", position):
                return out
            if own_calls and isinstance(out.get("calls"), list):  # a request written with its calls
                if facts:
                    out["calls"] = _with_facts(out["calls"], listed_functions, facts, request_hash, position)
                steps = [_own_step(str(call.get("name")), listed_functions) for call in out["calls"] if isinstance(call, dict)]
                given = calls_sentence(out["calls"])
                out["request"] = " ".join(part for part in (request.rstrip(), *dict.fromkeys(s for s in steps if s), given) if part)
                return out
            if mode == "non_tool":
                out["request"] = subject or request
                if isinstance(out.get("functions"), list):
                    out["functions"] = []
                return out
            listed = [str(name) for name in out.get("functions") or []]
            rng = derive_rng(request_hash, "values", position)
            chain = chained_pair(offered, rng, stated_links(prompt)) if mode == "dependent" else None
            unstated: frozenset[str] = frozenset()
            if chain is not None:
                earlier, later, unstated = chain
                listed = [earlier, later]
                if isinstance(out.get("functions"), list):
                    out["functions"] = listed
            given = values_sentences(listed, offered or listed_functions, rng, context, leave_out_one=mode == "missing",
                                     unstated=unstated, facts=facts, steps=own_steps)
            cue = CUES[mode] if mode else None
            if chain is not None and cue is not None:
                cue = f"{cue.rstrip('.')}: {_step(offered[chain[1]].description)}."  # what the next step does
            parts = [request.rstrip(), given, cue]
            out["request"] = " ".join(part for part in parts if part)
        return out

    return rewrite(value)
