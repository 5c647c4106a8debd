"""Values a parameter's documentation gives, read as a model that read the documentation reads them.

A real tool refuses a value of the wrong form: `mcp-server-time` documents its `timezone` as "IANA
timezone name (e.g., 'America/New_York', 'Europe/London')" and answers "Invalid timezone" to any
other word. A model that read that line writes an IANA name; a simulator that fills a string from
the prompt's words does not, so no call to such a tool would ever succeed. Two things a
description says are read here, for any tool:

* the values it quotes as examples: a quoted value anywhere ('America/New_York', "UTC",
  \\`main\\`), and the items of an unquoted list after "e.g.", "for example", "such as" or "like"
  that read as codes rather than prose (``e.g. America/New_York, Europe/London``);
* the format it spells out in the usual notation: ``YYYY-MM-DD``, ``DD/MM/YYYY``,
  ``MM/DD/YYYY``, ``HH:MM:SS``, ``HH:MM`` or "ISO 8601";
* that a file name takes no path ("No path is allowed", BFCL's file system), so a value drawn
  as a path loses its folders.

What the schema itself says (`enum`, `const`, `pattern`, `format`) always comes first; see
:mod:`.schema_instance` for the order.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

from . import lexicon

# A quote opens and closes outside a word: the apostrophes of "the user's name and the user's
# email" quote nothing.
_QUOTED = re.compile(r"(?<!\w)'([^'\n]{1,80})'(?!\w)|(?<!\w)\"([^\"\n]{1,80})\"(?!\w)|(?<!\w)`([^`\n]{1,80})`(?!\w)")
_LEAD = re.compile(r"\b(?:e\.g\.|eg\.|for example|for instance|such as|like)[:,]?\s+", re.I)
_LIST_END = re.compile(r"[)\];\n]|\.(?:\s|$)")
_ITEM_SPLIT = re.compile(r",\s*|\s+or\s+|\s+and\s+")
MAX_EXAMPLES = 12  # a description listing more is a catalogue, not examples

Maker = Callable[[random.Random], str]

# (how a description spells the format, what a value of it looks like); longer notations first,
# so "HH:MM:SS" is not read as "HH:MM".
_SPELLED_FORMATS: tuple[tuple[re.Pattern[str], Maker], ...] = (
    (re.compile(r"YYYY-MM-DD[T ]HH:MM(?::SS)?", re.I), lambda rng: f"{lexicon.date(rng)}T{lexicon.clock_time(rng)}:00"),
    (re.compile(r"\bISO[ -]?8601\b.*\b(?:date[- ]?time|timestamp)|\b(?:date[- ]?time|timestamp)\b.*\bISO[ -]?8601\b", re.I),
     lambda rng: lexicon.date_time(rng)),
    (re.compile(r"YYYY-MM-DD", re.I), lexicon.date),
    (re.compile(r"DD/MM/YYYY", re.I), lambda rng: _reordered(lexicon.date(rng), "{d}/{m}/{y}")),
    (re.compile(r"MM/DD/YYYY", re.I), lambda rng: _reordered(lexicon.date(rng), "{m}/{d}/{y}")),
    (re.compile(r"HH:MM:SS", re.I), lambda rng: f"{lexicon.clock_time(rng)}:00"),
    (re.compile(r"HH:MM", re.I), lexicon.clock_time),
    (re.compile(r"\bISO[ -]?8601\b.*\bdate\b|\bdate\b.*\bISO[ -]?8601\b", re.I), lexicon.date),
)


# "No path is allowed", "does not allow path", "without the path": a bare name is wanted.
_NO_PATH = re.compile(r"\bno (?:file )?paths? (?:is |are )?allowed|\b(?:does|do) not (?:allow|accept) (?:a |any )?paths?|"
                      r"\bwithout (?:a |the |any )?(?:directory |folder )?paths?\b|\bnot (?:a |the )?(?:full )?path\b", re.I)


def wants_bare_name(schema: Any) -> bool:
    """Whether `schema`'s description asks for a name without any directory in it."""
    return bool(_NO_PATH.search(_description(schema)))


def _reordered(iso_date: str, layout: str) -> str:
    y, m, d = iso_date.split("-")
    return layout.format(y=y, m=m, d=d)


def _description(schema: Any) -> str:
    text = schema.get("description") if isinstance(schema, dict) else None
    return text if isinstance(text, str) else ""


def _code_like(item: str) -> bool:
    """Whether an unquoted list item reads as a value ("America/New_York", "EUR", "v2") rather
    than prose ("the shop name"): one token with a capital, a digit or a separator in it."""
    return (
        bool(item)
        and " " not in item
        and (any(c.isdigit() or c in "/_-.:@+" for c in item) or any(c.isupper() for c in item))
    )


def documented_examples(schema: Any) -> list[str]:
    """The example values `schema`'s description gives, in the order it gives them (no repeats)."""
    text = _description(schema)
    found: list[str] = [next(g for g in match.groups() if g is not None).strip() for match in _QUOTED.finditer(text)]
    for lead in _LEAD.finditer(text):
        rest = text[lead.end():]
        span = rest[: _LIST_END.search(rest).start() if _LIST_END.search(rest) else len(rest)]
        if _QUOTED.search(span):
            continue  # a quoted list: already read
        found += [item for item in (part.strip(" '\"`") for part in _ITEM_SPLIT.split(span)) if _code_like(item)]
    unique = list(dict.fromkeys(value for value in found if value))
    return unique if len(unique) <= MAX_EXAMPLES else []


def documented_format(schema: Any) -> Maker | None:
    """A maker of values in the format `schema`'s description spells out, if it spells one."""
    text = _description(schema)
    for spelled, maker in _SPELLED_FORMATS:
        if spelled.search(text):
            return maker
    return None
