"""Concrete values in the requests a user agent writes (ToolACE §2.2.1, ToolLLM §2.2).

Request-writing prompts ask for "concrete values (names, places, dates, amounts) instead of
placeholders" and list the functions with their parameters. A model following that writes a
request that gives every value its functions require ("... for amount 54.4, category dining"),
which is what lets the assistant take the values from the request (:mod:`.mentions`) instead
of inventing them. The simulator reads the functions the way a reader would: a line
``- name: description Parameters: {json}`` (optionally ``Required: [...]`` after it), where the
JSON is a parameters schema or a map of properties; a function whose required parameters the
prompt does not say gets no values.

A request written together with its own calls (a task's ground truth) states those calls'
values instead, when the prompt asks it to say "everything its calls need": every one, those
inside an object argument too (the things a call creates, each with its fields).

A prompt may list what exists in the tool's environment (a section opened by "What exists in a
fresh environment", one line per field: ``- label: "value", "value"``), asking to name only
those where a request refers to existing things. A model following that takes, for a string
parameter of a function that does not create something, the listed value that fits it best: the
one whose field and words share most with the parameter's name and description (an id for an
``…_id``, a file name for a ``file…``), so the request names a file that is there
(:func:`listed_facts`, :func:`fitting_fact`).

A request that needs a later call's input to come from an earlier call's result (ToolACE's
dependent mode) names two functions a reader sees chained: a required parameter of the second is
documented as coming from the first ("Station id as returned by list_monitoring_stations"), or,
failing any such, is the id of what the first one's name is about (`hotel_id` after
`search_hotels`); a prompt that states which functions feed which ("search_symbols's result
gives the symbol that get_quote needs") is taken at its word. That value is left for the first
result to give; the others are stated.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from toolfactory.stages import prompt_markers as said

from .documented import documented_format
from .schema_instance import instance_for, is_valid_instance
from .text import content_words, identifier_words

VALUES_OPENING = "The details:"
_FUNCTION_LINE = re.compile(r"^\s*-\s*(?:API\s+)?([A-Za-z_][\w.-]*):\s*(.*?)\s*Parameters:\s*", re.M)
_REQUIRED = re.compile(r"\s*Required:\s*\[([^\]]*)\]")
_DECODER = json.JSONDecoder()
_ASKS = re.compile(f"{re.escape(said.ASKS_CONCRETE_VALUES)}|{re.escape(said.ASKS_EVERY_VALUE)}", re.I)
# A prompt that has the model write requests together with their calls (a task's ground truth,
# APIGen-MT's blueprints) and asks each request to say what its calls need.
_ASKS_FOR_CALLS = re.compile(f"{re.escape(said.ASKS_FOR_CALLS)}|every value its calls need", re.I)


# The section of a prompt that lists what exists in the tool's environment, and its lines.
_FACTS_HEADING = re.compile(rf"^{re.escape(said.FACTS_HEADING)}\b.*$", re.M)
_FACT_LINE = re.compile(r'^\s*-\s*([^:\n]{1,80}):\s*(".*)$')
# What a function that makes something new says it does: its values are new names.
_CREATES = re.compile(r"\b(create|creates|make|makes|new|add|adds|register|registers)\b", re.I)
_FILE_LIKE = re.compile(r"\.\w{1,5}$")


@dataclass(frozen=True)
class Offered:
    """A function as a request-writing prompt lists it."""

    description: str
    parameters: dict[str, Any]


def asks_for_values(prompt: str) -> bool:
    """Whether a request-writing prompt asks for concrete values."""
    return bool(_ASKS.search(prompt))


def asks_for_call_values(prompt: str) -> bool:
    """Whether a prompt asks each request it has written to state the values of its own calls."""
    return bool(_ASKS_FOR_CALLS.search(prompt))


def listed_facts(prompt: str) -> list[tuple[str, str]]:
    """(field, value) for each value the prompt lists as existing in the tool's environment."""
    heading = _FACTS_HEADING.search(prompt)
    if heading is None:
        return []
    found: list[tuple[str, str]] = []
    for line in prompt[heading.end():].lstrip("\n").splitlines():
        match = _FACT_LINE.match(line)
        if match is None:
            break
        try:
            values = json.loads(f"[{match.group(2)}]")
        except ValueError:
            continue
        found += [(match.group(1).strip(), value) for value in values if isinstance(value, str) and value]
    return found


def creates(description: str) -> bool:
    """Whether a function's own step (see :func:`~.instructions.own_step`) makes something new."""
    return bool(_CREATES.search(description))


def _stems(text_words: list[str]) -> set[str]:
    return {word.lower().removesuffix("s") for word in text_words if len(word) > 1}


def fitting_fact(name: str, schema: Any, facts: list[tuple[str, str]], rng: random.Random) -> str | None:
    """The listed value that fits the string parameter `name` best (None when none shares a word
    with it, or the parameter takes no free string: an enum, a format, another type).

    A reader matches the parameter's name against the field a value was listed under and against
    a short value's own words (twice the weight), and its description against the field; then the
    value's shape: a file name for a parameter about a file, an id (digits) for an id and not for
    a name, a bare name rather than a path for a name."""
    if not isinstance(schema, dict) or schema.get("type") != "string" or schema.get("enum") or schema.get("format"):
        return None
    if documented_format(schema) is not None:  # a time "in HH:MM", a date: a value of a form, not a name
        return None
    named = _stems(identifier_words(name))
    described = _stems(content_words(str(schema.get("description") or "")))
    single = {"type": "object", "properties": {name: schema}, "required": [name]}
    best: list[str] = []
    top = 0
    for label, value in facts:
        field = _stems(identifier_words(label))
        own = _stems(identifier_words(value)) if len(value.split()) <= 2 else set()
        score = 2 * len(named & (field | own)) + len(described & field)
        file_like = bool(_FILE_LIKE.search(value))
        if "file" in named | described and file_like:
            score += 2  # a file name for a file: the shape says more than a shared word
        elif "file" in named:
            score -= 2  # and a folder's name is none
        if score and any(ch.isdigit() for ch in value) and not file_like:
            score += 1 if "id" in named else -1  # an id for an id, a name for a name
        if score and "name" in named | described:
            score += 1 if "/" not in value else -1  # a name, not a path
        if "(in " in label:
            score -= 1  # a thing inside another ("contents (in reports)") is not at hand
        if score <= 0 or score < top or not is_valid_instance(single, {name: value}):
            continue
        if score > top:
            top, best = score, []
        best.append(value)
    return rng.choice(sorted(set(best))) if best else None


def _stated(name: str, value: Any) -> list[str]:
    """"name value" for `value` as a user states it: an object's (or a list of objects') values
    each under its own field's name ("name Ada, entity type person"), as a user describes the
    things to make rather than quoting their JSON."""
    said = _spoken(value)
    if said is not None:
        return [f"{' '.join(identifier_words(name)) or name} {said}"]
    if isinstance(value, dict):
        return [part for key, item in value.items() for part in _stated(str(key), item)]
    if isinstance(value, list):
        return [part for item in value for part in _stated(name, item)]
    return []


def calls_sentence(calls: list[Any]) -> str | None:
    """A sentence giving the values of `calls` (``[{"name", "arguments"}]``, as a request written
    with its calls holds them) the way a user states them; None if they take none."""
    named: list[str] = []
    for call in calls:
        arguments = call.get("arguments") if isinstance(call, dict) else None
        for name, value in (arguments or {}).items() if isinstance(arguments, dict) else []:
            named += _stated(str(name), value)
    return f"{VALUES_OPENING} {', '.join(named)}." if named else None


def offered_functions(prompt: str) -> dict[str, Offered]:
    """The functions the prompt lists, with their parameters schema (required ones as it says)."""
    found: dict[str, Offered] = {}
    for match in _FUNCTION_LINE.finditer(prompt):
        try:
            schema, end = _DECODER.raw_decode(prompt, match.end())
        except json.JSONDecodeError:
            continue
        if not isinstance(schema, dict):
            continue
        if not isinstance(schema.get("properties"), dict):
            schema = {"type": "object", "properties": schema}
        required = _REQUIRED.match(prompt, end)
        if required is not None:
            schema = {**schema, "required": re.findall(r"[\w.-]+", required.group(1))}
        found[match.group(1)] = Offered(match.group(2).strip().rstrip("."), schema)
    return found


def _spoken(value: Any) -> str | None:
    """A value as a user writes it; None for values a sentence cannot carry (objects)."""
    if isinstance(value, (bool, int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, list) and value and all(isinstance(item, (str, int, float)) for item in value):
        return " and ".join(str(item) for item in value)
    return None


def _required_values(offered: Offered, rng: random.Random, context: list[str],
                     facts: list[tuple[str, str]] | None = None, step: str = "") -> list[tuple[str, str]]:
    """The values of the function's required parameters; with listed `facts`, a listed value for
    each string parameter it fits (every string parameter when the prompt says none is required),
    unless the function's own `step` creates something."""
    props = offered.parameters.get("properties") or {}
    named: list[tuple[str, str]] = []
    required = list(offered.parameters.get("required") or [])
    existing = bool(facts) and not creates(step or offered.description)
    if existing and not required:
        required = [name for name, schema in props.items() if isinstance(schema, dict) and schema.get("type") == "string"]
    for name in required:
        if name not in props:
            continue
        listed = fitting_fact(name, props[name], facts or [], rng) if existing else None
        if listed is not None:
            named.append((name, listed))
            continue
        if not (offered.parameters.get("required") or []):
            continue  # a parameter the prompt does not require gets a value only from the list
        drawn = instance_for({"type": "object", "properties": {name: props[name]}, "required": [name]}, rng, context)
        said = _spoken(drawn.get(name)) if isinstance(drawn, dict) else None
        if said is not None:
            named.append((name, said))
    return named


def values_sentences(
    functions: list[str],
    offered: dict[str, Offered],
    rng: random.Random,
    context: list[str],
    *,
    leave_out_one: bool = False,
    unstated: frozenset[str] = frozenset(),
    facts: list[tuple[str, str]] | None = None,
    steps: dict[str, str] | None = None,
) -> str | None:
    """A sentence giving the value of each parameter the listed functions require, but the
    `unstated` ones; with `leave_out_one` the first is left out (a request missing a value).
    None if none."""
    named: list[tuple[str, str]] = []
    for function in (name for name in functions if name in offered):
        given = {name for name, _ in named} | unstated
        values = _required_values(offered[function], rng, context, facts, (steps or {}).get(function, ""))
        named += [(name, said) for name, said in values if name not in given]
    if leave_out_one:
        named = named[1:]
    stated = ", ".join(f"{' '.join(identifier_words(name)) or name} {said}" for name, said in named)
    return f"{VALUES_OPENING} {stated}." if stated else None


def documented_source(schema: Any, earlier: str) -> bool:
    """Whether a parameter's description names the function `earlier` as where its value
    comes from ("Alert id as returned by list_active_alerts")."""
    return isinstance(schema, dict) and bool(re.search(rf"\b{re.escape(earlier)}\b", str(schema.get("description") or "")))


# How a reader of the prompt tells that parameter `name` (schema given) takes `earlier`'s result.
def _documented(name: str, schema: Any, earlier: str) -> bool:
    return documented_source(schema, earlier)


def _named_after(name: str, schema: Any, earlier: str) -> bool:
    words = identifier_words(name)
    subjects = {word.removesuffix("s") for word in identifier_words(earlier)}
    return len(words) > 1 and words[-1] == "id" and words[-2].removesuffix("s") in subjects


_LINK = re.compile(rf"([A-Za-z_][\w.-]*){re.escape(said.LINK_GIVES)} ([\w.-]+) that ([A-Za-z_][\w.-]*){re.escape(said.LINK_NEEDS)}")


def stated_links(prompt: str) -> list[tuple[str, str, str]]:
    """(earlier, parameter, later) for each link the prompt states between two functions
    ("search_symbols's result gives the symbol that get_quote needs")."""
    return [(m.group(1), m.group(2), m.group(3)) for m in _LINK.finditer(prompt)]


def chained_pair(offered: dict[str, Offered], rng: random.Random,
                 stated: list[tuple[str, str, str]] | None = None) -> tuple[str, str, frozenset[str]] | None:
    """(earlier, later, the parameters of `later` the earlier result gives) for two offered
    functions a reader sees chained, drawn from `rng`: those the prompt says are linked
    (`stated`, see :func:`stated_links`) if any, else as their documentation shows; None if no
    two are."""
    told = [(earlier, later, frozenset({name})) for earlier, name, later in stated or []
            if earlier in offered and later in offered and earlier != later]
    if told:
        return rng.choice(told)
    for source in (_documented, _named_after):
        pairs: list[tuple[str, str, frozenset[str]]] = []
        for earlier, first in offered.items():
            for later, second in offered.items():
                props = second.parameters.get("properties") or {}
                needs = set(first.parameters.get("required") or [])
                fed = frozenset(
                    name for name in second.parameters.get("required") or []
                    if name in props and name not in needs and source(name, props[name], earlier)
                )
                if later != earlier and fed:
                    pairs.append((earlier, later, fed))
        if pairs:
            return rng.choice(pairs)
    return None


def request_context(prompt: str) -> list[str]:
    """Words a free-text value may reuse: the prompt's content words before the functions."""
    return [word for word in content_words(_FUNCTION_LINE.split(prompt)[0]) if word.isalpha() and len(word) > 2]
