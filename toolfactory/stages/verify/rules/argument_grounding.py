"""Argument grounding: every value a call sends can be traced to something the model had read.

Each leaf value of a call's arguments (a string or a number, in nested objects and arrays too)
is looked for in the **sources** of that call:

* the system prompt, the user's turns and the tool results before the call;
* the arguments of the earlier calls, those of the same turn included (a value an earlier call
  invented is reported there, once);
* the called function's definition: its description and each parameter's description, ``enum``,
  ``default``, ``const``, ``examples``, ``example`` or ``example_value`` (a documented example).

The assistant's own texts are no source: a value the model wrote before it used it is still a
value nobody gave. How a value is found in a source — loosely, numbers as numbers, dates as
dates, a qualified name by its words — is :mod:`.value_match`.

Never flagged: booleans, null and the empty string (yes, no or nothing: a model decides those);
the integers 0 and 1; integers up to ``SMALL_COUNT`` sent to a parameter whose name says it is
a count, a page or a precision (``limit``, ``max_results``, ``page``, ``top_k``, ``precision``,
…): a model picks a page size as it picks a flag. Not judged: ToolLLM's ``Finish`` (its
``final_answer`` is the answer, not an API argument), a recipe's built-in actions (ToolAlpaca's
``getDetails`` asks the user), object keys, arguments that are no JSON object.

**Free text** is judged apart, under its own code: a string parameter without ``enum``,
``const``, ``format`` or ``pattern`` whose name (``query``, ``message``, ``body``, ``title``, …)
or description (free text, search terms, keywords) says it is text, or any string of
``FREE_TEXT_WORDS`` words or more. It is the model's wording of what it was asked — a search
query, a message it composes, a translation — so it is grounded when ``FREE_TEXT_MIN_SHARE`` of
its content words, and one at least, appear in the sources. Disabling ``arg_text_ungrounded``
leaves free text unjudged.

Values **derived** from given ones — a converted unit, a date computed from "tomorrow", a sum,
a code or a fact looked up for a named thing (an airport's code for a city, a ticker for a
company, "USD" for dollars, the 52 cards of a deck), a translation — cannot be told from
invented ones by comparison: they are flagged. (A value taken from an environment's state that
no call of the dialogue read is rightly flagged: the model could not know it.)

Both rules are therefore **warnings**: recorded with the record and counted, never rejecting;
the model layer's ``hallucination`` judge is what rejects an invented value. Measured on released
data by ``benchmarks/semantic_rules.py`` (the flagged records, then 10 of them per dataset read
by hand), ``arg_value_ungrounded`` flags none of ToolBench's 20 paths; 7 of ToolAlpaca's 100
golden answers, 3 rightly (invented ids, a type nobody gave, a template placeholder) and 4
derived (the language the user writes in); 6.6 % of BFCL's 2,351 single-turn gold calls, all 10
read derived; 46 % of BFCL's 200 multi-turn base trajectories, 7 of 10 read rightly (an id or a
fuel level no call looked up), 3 derived. That is 4 %, about 6.6 % and about 14 % of the records
flagged wrongly, above what an error may cost. ``arg_text_ungrounded`` flags 4 ToolAlpaca
records (2 rightly: a title searched for the wrong anime) and 1 BFCL record (a derivative): a
low share of records, but half of its findings wrong. On the accepted records of the
simulator's demo run, ``arg_value_ungrounded`` flags 19 of 27 (70 %), all 10 read rightly
(``id-4333`` after "The id is specific-1034.").
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Iterator

from toolfactory.definitions.finish import FINISH_FUNCTION
from toolfactory.models import Function
from toolfactory.stages.verify.rules.registry import Call, Finding, Sample, rule
from toolfactory.stages.verify.rules.value_match import Source, number_found, string_found, words_found, written

FREE_TEXT_MIN_SHARE = 0.25  # content words of a free-text value that must appear in the sources
QUALIFIED_MIN_SHARE = 0.5  # words of a several-word value ("Chicago, Illinois") that must appear
FREE_TEXT_WORDS = 4  # a string of this many words or more is free text, whatever its parameter
SMALL_COUNT = 10  # the largest count, page or precision a model may pick without being told
MESSAGE_VALUE_CHARS = 60

FREE_TEXT_NAMES = frozenset({
    "query", "q", "text", "message", "msg", "content", "body", "description", "title", "subject",
    "comment", "comments", "note", "notes", "prompt", "question", "summary", "caption", "reason",
    "instruction", "instructions", "keyword", "keywords", "search", "term", "terms", "topic",
    "review", "bio", "answer", "sentence", "phrase",
})
FREE_TEXT_DESCRIPTION = re.compile(r"\b(?:free[- ]?(?:form|text)|search (?:terms?|query|string|words)|keywords?)\b", re.IGNORECASE)
COUNT_NAMES = frozenset({
    "limit", "count", "num", "number", "size", "page", "pages", "offset", "top", "max", "min",
    "results", "per", "k", "n", "length", "depth", "retries", "items", "rows", "precision",
    "decimals", "digits", "places",
})
EXACT_KEYWORDS = ("enum", "const", "format", "pattern")  # a string so constrained is no free text
DOCUMENTED = ("description", "enum", "default", "const", "examples", "example", "example_value")

_WORD_BREAK = re.compile(r"[\W_]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")


@lru_cache(maxsize=4096)
def _name_words(name: str) -> frozenset[str]:
    """The words of a parameter name: ``maxResults`` and ``max_results`` are {max, results}."""
    return frozenset(_WORD_BREAK.sub(" ", _CAMEL.sub(r"\1 \2", name)).lower().split())


def free_text(name: str, value: str, schema: dict[str, Any]) -> bool:
    """Whether the string `value` of parameter `name` is free text (module doc)."""
    if any(keyword in schema for keyword in EXACT_KEYWORDS):
        return False
    if len(value.split()) >= FREE_TEXT_WORDS or _name_words(name) & FREE_TEXT_NAMES:
        return True
    description = schema.get("description")
    return isinstance(description, str) and FREE_TEXT_DESCRIPTION.search(description) is not None


def _chosen(name: str, value: Any) -> bool:
    """A value a model picks without being told (module doc)."""
    if value in ("", 0, 1):
        return True
    return isinstance(value, int) and 0 <= value <= SMALL_COUNT and bool(_name_words(name) & COUNT_NAMES)


def _leaves(value: Any, schema: Any, path: str = "", name: str = "") -> Iterator[tuple[str, str, Any, dict[str, Any]]]:
    """(path, parameter name, value, its schema) of each string or number in `value`."""
    schema = schema if isinstance(schema, dict) else {}
    if isinstance(value, dict):
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        for key, item in value.items():
            yield from _leaves(item, properties.get(key), f"{path}/{key}", key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, schema.get("items"), f"{path}/{i}", name)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield path, name, value, schema


def _texts(value: Any, out: list[str], keys: bool = True) -> None:
    """The strings and numbers of a JSON value (and its object keys), into `out`."""
    if isinstance(value, dict):
        for key, item in value.items():
            if keys:
                out.append(str(key))
            _texts(item, out, keys)
    elif isinstance(value, list):
        for item in value:
            _texts(item, out, keys)
    elif value is not None and not isinstance(value, bool):
        out.append(str(value))


def _documented(schema: Any, out: list[str]) -> None:
    """What a parameters schema documents (:data:`DOCUMENTED`), at every depth, into `out`."""
    if isinstance(schema, dict):
        for key, item in schema.items():
            if key in DOCUMENTED:
                _texts(item, out, keys=False)
            elif isinstance(item, (dict, list)):
                _documented(item, out)
    elif isinstance(schema, list):
        for item in schema:
            _documented(item, out)


def _tool_text(content: str) -> str:
    """A tool result's text, and the values of its JSON when it is JSON with escapes (``\\u00e9``,
    ``\\"``: without them the text holds every value as it is)."""
    if "\\" not in content or content.lstrip()[:1] not in ("{", "["):
        return content
    try:
        parsed = json.loads(content)
    except (json.JSONDecodeError, RecursionError):
        return content
    texts = [content]
    _texts(parsed, texts)
    return "\n".join(texts)


class Sources:
    """The sources of the calls of one sample (module doc), each built once."""

    def __init__(self, sample: Sample) -> None:
        self.sample = sample
        self._messages: dict[int, Source | None] = {}
        self._calls: dict[str, Source] = {}
        self._functions: dict[int, Source] = {}
        self._tiers: dict[str, list[list[Source]]] = {}

    def _message(self, index: int) -> Source | None:
        if index not in self._messages:
            message = self.sample.messages[index]
            text = message.content if message.role in ("system", "user", "tool") else None
            self._messages[index] = Source(_tool_text(text) if message.role == "tool" else text) if text else None
        return self._messages[index]

    def _call(self, call: Call) -> Source:
        found = self._calls.get(call.path)
        if found is None:
            texts: list[str] = []
            _texts(call.value, texts, keys=False)
            found = self._calls[call.path] = Source("\n".join(texts))
        return found

    def _function(self, function: Function) -> Source:
        found = self._functions.get(id(function))
        if found is None:
            texts = [function.description]
            _documented(function.parameters, texts)
            found = self._functions[id(function)] = Source("\n".join(texts))
        return found

    def tiers(self, call: Call, function: Function | None) -> Iterator[list[Source]]:
        """What the model had read when it made `call`, in growing lists: the user's turns and the
        system prompt; with the tool results; with the earlier calls' arguments and the function's
        definition. Most values are found in the first, and the others are then never built."""
        built = self._tiers.setdefault(call.path, [])
        for level in range(3):
            if level == len(built):
                built.append(self._tier(call, function, level, built[-1] if built else []))
            yield built[level]

    def _tier(self, call: Call, function: Function | None, level: int, below: list[Source]) -> list[Source]:
        before = range(call.message_index)
        if level < 2:
            tool = level == 1
            return below + [source for i in before if (self.sample.messages[i].role == "tool") == tool
                            for source in [self._message(i)] if source is not None]
        context = [self._call(other) for other in self.sample.calls
                   if (other.message_index, other.index) < (call.message_index, call.index) and isinstance(other.value, dict)]
        if function is not None:
            context.append(self._function(function))
        return below + context


def _shown(value: Any) -> str:
    if isinstance(value, str) and len(value) > MESSAGE_VALUE_CHARS:
        value = value[: MESSAGE_VALUE_CHARS - 3] + "..."
    return repr(value)


def _grounded(value: str | float, text: bool, tiers: Iterator[list[Source]]) -> bool:
    """Whether `value` is found in the sources: written as it is in the first tiers (the quick
    test), or by every comparison in all of them."""
    sources: list[Source] = []
    for sources in tiers:
        if written(value, sources):
            return True
    if not isinstance(value, str):
        return number_found(value, sources)
    if text:
        return words_found(value, sources, FREE_TEXT_MIN_SHARE)
    return string_found(value, sources, QUALIFIED_MIN_SHARE)


def _listed(value: Any, schema: dict[str, Any]) -> bool:
    """`value` is its parameter's enum value, const or default (found without reading anything)."""
    enum = schema.get("enum")
    return (isinstance(enum, list) and value in enum) or any(value == schema[key] for key in ("const", "default") if key in schema)


def _findings(sample: Sample) -> dict[str, list[Finding]]:
    """Both rules' findings (they share the sources of each call)."""
    sources_of = Sources(sample)
    values: list[Finding] = []
    texts: list[Finding] = []
    for call in sample.calls:
        if call.name == FINISH_FUNCTION.name or not isinstance(call.value, dict):
            continue
        if call.name in sample.builtin_functions and call.name not in sample.functions:
            continue
        function = sample.functions.get(call.name) or sample.candidate(call.name)
        for path, name, value, schema in _leaves(call.value, function.parameters if function is not None else {}):
            if _chosen(name, value) or _listed(value, schema):
                continue
            text = isinstance(value, str) and free_text(name, value, schema)
            if _grounded(value, text, sources_of.tiers(call, function)):
                continue
            where = f"{call.path}.arguments{path}"
            if text:
                texts.append((where, f"free text {_shown(value)} of {call.name}: fewer than {FREE_TEXT_MIN_SHARE:.0%} "
                                     "of its words, or none, appear before the call"))
            else:
                values.append((where, f"{_shown(value)} of {call.name} appears nowhere before the call (user turns, "
                                      "system prompt, tool results, earlier calls) nor in the function's definition"))
    return {"value": values, "text": texts}


@rule("arg_value_ungrounded", severity="warning")
def value_ungrounded(sample: Sample) -> list[Finding]:
    """A call's argument value (a string or number at any depth, not free text) appears nowhere
    the model could have read it: the user's turns, the system prompt, the tool results and calls
    before it, the function's definition (compared loosely, numbers as numbers, dates as dates)."""
    if not sample.calls:
        return []
    return sample.memo("grounding", _findings)["value"]


@rule("arg_text_ungrounded", severity="warning")
def text_ungrounded(sample: Sample) -> list[Finding]:
    """A free-text argument (a query, a message, a title: by its name, its description or its
    length) shares almost none of its words with what came before the call."""
    if not sample.calls:
        return []
    return sample.memo("grounding", _findings)["text"]
