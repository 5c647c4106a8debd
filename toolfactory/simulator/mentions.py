"""Argument values the user states in the conversation, read as an instruction-following model reads them.

Asked "Weather in Lyon?", a model calls `get_weather(city="Lyon")`: it takes the values the
request gives instead of inventing them, so two samples of its decision agree (ToolACE §2.2.2
self-consistency compares "the parameter values to fill"). The simulator finds, for each
top-level parameter of a function, the values the user's messages offer it, generically:

* a value written after the parameter's name ("amount 54.4", "country code: KE", "alert id is
  x-12"), up to the next comma, semicolon, sentence end or :data:`MAX_VALUE_WORDS` words (not
  when the name goes on into a longer one: "user name grace43" gives `user` nothing);
* anywhere in the text: one of the parameter's `enum` values, a value of its lexicon list (a
  known city for `city`), a capitalised name after a place preposition for a place parameter
  ("in Lyon", "to New York"), a token of its `format` (a date, an e-mail, a URL) or, for a
  parameter with a `pattern`, a token that reads as a code and matches it ("CDG", "H12").

Data a message quotes is no statement: a JSON object or array inside it (ToolLLM's
diversity prompt lists the earlier actions, `give_up_and_restart` among them, to be avoided)
offers no value; only the prose around it does.

The values are offered the way tool results offer theirs (:mod:`.grounding`): a parameter takes
the first one with which the arguments still validate against the function's schema, so a value
that does not fit its type, enum or format is never taken.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from . import lexicon
from .grounding import ResultValues, parameter_key
from .seeding import canonical_json
from .text import STOPWORDS, identifier_words, words

MAX_VALUE_WORDS = 6  # a value written after a parameter's name is at most this many words
PLACE_WORDS = lexicon.CITY_WORDS | lexicon.COUNTRY_WORDS
_NAME = r"([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2})"
_PLACE = re.compile(rf"\b(?:in|to|from|at|for|near|of|via)\s+{_NAME}")
_MORE_PLACES = re.compile(rf"\s*(?:,|\band\b|\bor\b)\s*{_NAME}")
_END = re.compile(r"[,;\n]|[.!?](?:\s|$)|$")
_TOKEN = re.compile(r"[^\s,;!?()\"']+")
_FORMATS = {
    "date": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
    "date-time": re.compile(r"^\d{4}-\d{2}-\d{2}T[\d:.]+(?:Z|[+-]\d{2}:\d{2})?$"),
    "email": re.compile(r"^[^@\s]+@[^@\s]+\.\w+$"),
    "uri": re.compile(r"^https?://\S+$"),
    "url": re.compile(r"^https?://\S+$"),
}
# Words that end a longer parameter's name: "user name grace43" gives `user_name` its value, not
# `user` the value "name grace43".
_NAME_ENDINGS = frozenset({"id", "ids", "name", "names", "code", "number", "type", "key"})
_TRUE, _FALSE = frozenset({"true", "yes"}), frozenset({"false", "no"})
_DECODER = json.JSONDecoder()
_OPENING = re.compile(r"[{\[]")


def prose(text: str) -> str:
    """`text` without the JSON objects and arrays it quotes (each becomes a line break, so a
    value written before one ends there)."""
    pieces: list[str] = []
    at = 0
    for opening in _OPENING.finditer(text):
        if opening.start() < at:
            continue
        try:
            data, end = _DECODER.raw_decode(text, opening.start())
        except json.JSONDecodeError:
            continue
        if isinstance(data, (dict, list)) and data:
            pieces.append(text[at:opening.start()])
            at = end
    return "\n".join([*pieces, text[at:]])


def _readings(text: str) -> list[Any]:
    """The JSON values a written value may stand for, most specific first ("3" is 3 before "3")."""
    text = text.strip().strip("\"'")
    found: list[Any] = []
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        found.append(int(number) if number.is_integer() and "." not in text else number)
    lower = text.lower()
    if lower in _TRUE | _FALSE:
        found.append(lower in _TRUE)
    if " and " in text:
        found.append([part.strip() for part in text.split(" and ") if part.strip()])
    return [*found, text] if text else found


def _named(name: str, text: str) -> Iterator[Any]:
    """Values written after the parameter's name ("country code KE", "amount: 54.4")."""
    spoken = r"[\s_-]+".join(re.escape(word) for word in identifier_words(name))
    if not spoken:
        return
    for match in re.finditer(rf"\b{spoken}\b(?:\s+(?:is|of|=)|\s*[:=])?\s+", text, re.I):
        rest = text[match.end():]
        span = rest[: _END.search(rest).start()]  # type: ignore[union-attr]  # `$` always matches
        said = span.split()
        opening = words(span)[:1]
        if len(said) > 1 and said[0].lower() in _NAME_ENDINGS:  # another parameter's longer name
            continue
        if said and not (opening and opening[0].lower() in STOPWORDS):  # "date with ...": no value
            yield from _readings(" ".join(said[:MAX_VALUE_WORDS]))
    # A count is written before what it counts ("3 days", "2 adults").
    for match in re.finditer(rf"(?<![\w.-])(\d+(?:\.\d+)?)\s+{spoken}\b", text, re.I):
        yield from _readings(match.group(1))


def _anywhere(name: str, schema: dict[str, Any], text: str) -> Iterator[Any]:
    """Values the text mentions that this parameter's schema or name singles out."""
    spoken = f" {text.lower()} "
    for option in schema.get("enum") or []:
        if isinstance(option, str) and re.search(rf"\b{re.escape(option.lower())}\b", spoken):
            yield option
    name_words = identifier_words(name)
    for option in lexicon.known_values(name_words):
        if re.search(rf"\b{re.escape(option.lower())}\b", spoken):
            yield option
    if PLACE_WORDS & set(name_words):
        for match in _PLACE.finditer(text):
            yield match.group(1)
            at = match.end()
            while more := _MORE_PLACES.match(text, at):  # "in Lyon, Oslo and Bergen"
                yield more.group(1)
                at = more.end()
    tokens = [token.rstrip(".:") for token in _TOKEN.findall(text)]
    shape = _FORMATS.get(str(schema.get("format")))
    if shape is not None:
        yield from (token for token in tokens if shape.match(token))
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            compiled = re.compile(pattern)
        except re.error:
            return
        yield from (token for token in tokens if _code_like(token) and compiled.search(token))


def _code_like(token: str) -> bool:
    """Whether a token reads as a code or identifier ("CDG", "x-12", "iPhone") rather than a
    word: a capitalised word ("This", "I") is prose, whatever pattern it happens to match."""
    return (
        any(c.isdigit() for c in token)
        or (token.isupper() and len(token) > 1)
        or any(c.isupper() for c in token[1:])
    )


def mentioned_values(properties: dict[str, Any], texts: list[str]) -> ResultValues:
    """The values `texts` (the user's messages, latest first) offer each parameter, by the
    parameter's normalised name (as :func:`.grounding.result_values` keys them)."""
    texts = [prose(text) for text in texts]
    values: ResultValues = {}
    for name, schema in properties.items():
        found: list[Any] = []
        for text in texts:
            found += _named(str(name), text)
        for text in texts:
            found += _anywhere(str(name), schema if isinstance(schema, dict) else {}, text)
        unique = list({canonical_json(value): value for value in found}.values())
        if unique:
            values[parameter_key(str(name))] = unique
    return values


def spells_out(properties: dict[str, Any], texts: list[str]) -> bool:
    """Whether `texts` write a value after some parameter's name: a request that spells its
    values out, whose call has those values and no others."""
    texts = [prose(text) for text in texts]
    return any(next(_named(str(name), text), None) is not None for name in properties for text in texts)
