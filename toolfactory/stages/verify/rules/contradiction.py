"""Self-contradiction: what the assistant says or sends contradicts the calls it makes.

``assistant_contradicts_calls`` sees two things in one record, without running anything:

* **A refusal, then a call.** An assistant text that says there is no function for the request
  or that it cannot help (:data:`INABILITY`, a few English patterns: "I don't have a function /
  tool / API …", "there is no function …", "no suitable tool", "none of the available
  functions", "I cannot help with that"), where that same message calls a function, or the
  message right after it is an assistant turn that does (nothing between). Not a refusal: one
  followed by a workaround, in the same sentence (:data:`CONTRAST`: "… directly, but I can …",
  "…, so I'll …") or later in the message (:data:`WORKAROUND`: "I'll search instead", "let
  me"; an offer such as "I can convert units, if that helps" is no workaround); a remark on one
  named function ("there is no function named X", after a call to a name that does not exist).
  Not a use of a function: ToolLLM's ``Finish`` (giving up after "there is no tool for this" is
  consistent) and a recipe's built-in actions.
* **A conversion to itself.** A call whose source and target are the same value: a pair of
  parameters ``from_X`` / ``to_X``, ``source_X`` / ``target_X``, ``src_X`` / ``dst_X`` or
  ``X_from`` / ``X_to`` (snake or camel case) where X names what a conversion converts (unit,
  currency, language, locale, time zone, format, encoding, base, scale, system, code), or bare
  ``from`` / ``to``, ``source`` / ``target`` on a function whose name or description says it
  converts, translates or exchanges; values compared case-folded and trimmed.

It does not see: refusals in other languages (the patterns are English: a Chinese text is never
flagged); a refusal in the assistant's ``reasoning`` rather than its text; one phrased without
the words function, tool, API or help; a text that claims a result no call returned, or an
answer that contradicts a tool result (the ``consistency`` judge's matter); a from/to pair of
dates, places, stations or people (a one-day range and a message to oneself are legitimate); a
conversion between two spellings of one unit (``"C"`` and ``"celsius"``).

An **error**. On released data (``benchmarks/semantic_rules.py``: ToolBench's 20 paths, whose
thoughts are the only assistant texts there, ToolAlpaca's 100 golden answers, BFCL's 2,551
records) it flags no record. Two flags on ToolBench's abandoned paths, both wrong, shaped the
two exclusions above ("no function named …" after a hallucinated name; "no function available
…, I will give up" before ``Finish``). On the simulator's demo run it flags 1 of 27 accepted
records: "I don't have a function for …" and ``convert_units`` from imperial to imperial.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterator

from toolfactory.definitions.finish import FINISH_FUNCTION
from toolfactory.models import ToolCall
from toolfactory.stages.verify.rules.registry import Finding, Sample, rule

FINISH = FINISH_FUNCTION.name

_TOOL = r"(?:function|tool|api|functionality|capability)s?"
INABILITY = re.compile(
    r"\b(?:i|we)\s+(?:do\s+not|don['’]?t|dont)\s+have\s+(?:access\s+to\s+)?(?:a|an|any|the)?\s*(?:\w+\s+){0,3}?" + _TOOL + r"\b"
    r"|\bthere\s+(?:is|are)\s+no\s+(?:\w+\s+){0,2}?" + _TOOL + r"\b(?!\s+(?:named|called))"
    r"|\bno\s+(?:suitable|available|relevant|appropriate|matching)\s+" + _TOOL + r"\b"
    r"|\bnone\s+of\s+the\s+(?:available\s+|provided\s+|given\s+)?(?:functions|tools|apis)\b"
    r"|\b(?:i|we)\s+(?:cannot|can\s*not|can['’]?t|am\s+unable\s+to|['’]m\s+unable\s+to|am\s+not\s+able\s+to)"
    r"\s+(?:help|assist)\s+with\s+(?:that|this|your\s+request)\b",
    re.IGNORECASE,
)
# What announces a workaround after the refusal: in the same sentence ("…, but I can …", "…, so
# I'll …"), or anywhere after it ("… No tool books flights. I'll search for them instead.").
CONTRAST = re.compile(r"\b(?:but|however|instead|though|although|directly|yet|so|let\s+me|i\s+can|i['’]ll|i\s+will)\b", re.IGNORECASE)
WORKAROUND = re.compile(r"\b(?:but|however|instead|let\s+me|i['’]ll|i\s+will|i\s+am\s+going\s+to|i['’]m\s+going\s+to)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?。！？\n]")

CONVERTED = frozenset({
    "unit", "units", "currency", "currencies", "lang", "language", "locale", "timezone", "tz", "zone",
    "format", "encoding", "base", "scale", "system", "code", "measure", "measurement",
})
CONVERTING = re.compile(r"convert|conversion|translat|exchange|transform|transliterat", re.IGNORECASE)
SOURCE_WORDS = ("from", "source", "src")
TARGET_WORDS = {"from": "to", "source": "target", "src": "dst"}
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")


def refusal(text: str) -> str | None:
    """The sentence of `text` that says there is no function or no help, without a contrast after it."""
    for match in INABILITY.finditer(text):
        end = _SENTENCE_END.search(text, match.end())
        rest = text[match.end(): end.start() if end else len(text)]
        if not CONTRAST.search(rest) and not WORKAROUND.search(text, end.end() if end else len(text)):
            start = max((m.end() for m in _SENTENCE_END.finditer(text, 0, match.start())), default=0)
            return text[start: end.end() if end else len(text)].strip()
    return None


@lru_cache(maxsize=4096)
def _words(name: str) -> tuple[str, ...]:
    return tuple(w for w in re.split(r"[\W_]+", _CAMEL.sub(r"\1_\2", name).lower()) if w)


def _pairs(arguments: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(source name, target name, what is converted) for each from/to pair among `arguments`."""
    by_words = {_words(name): name for name in arguments}
    for words, name in by_words.items():
        if not words:
            continue
        for position in (0, -1):
            if words[position] not in SOURCE_WORDS:
                continue
            target = list(words)
            target[position] = TARGET_WORDS[words[position]]
            other = by_words.get(tuple(target))
            if other is not None:
                rest = words[1:] if position == 0 else words[:-1]
                yield name, other, " ".join(rest)


def same_ends(name: str, arguments: dict[str, Any], description: str = "") -> str | None:
    """Why a call of function `name` (described by `description`) with `arguments` converts a
    value to itself, or None."""
    converting: bool | None = None
    for source, target, what in _pairs(arguments):
        a, b = arguments[source], arguments[target]
        if not isinstance(a, (str, int, float)) or isinstance(a, bool) or type(a) is not type(b):
            continue
        if (a.strip().casefold() if isinstance(a, str) else a) != (b.strip().casefold() if isinstance(b, str) else b):
            continue
        if isinstance(a, str) and not a.strip():
            continue
        if what:
            if not set(what.split()) & CONVERTED:
                continue
        else:
            if converting is None:
                converting = bool(CONVERTING.search(name) or CONVERTING.search(description))
            if not converting:
                continue
        return f"{source} and {target} are both {a!r}: the call converts a value to itself"
    return None


def _acts(calls: list[ToolCall] | None, sample: Sample) -> bool:
    """Whether `calls` use a function: a call that only ends the search (ToolLLM's ``Finish``) or
    is the agent's own action does not contradict a refusal."""
    return any(call.name != FINISH and call.name not in sample.builtin_functions for call in calls or ())


@rule("assistant_contradicts_calls")
def contradicts_calls(sample: Sample) -> Iterator[Finding]:
    """The assistant says it has no function for the request or cannot help, and calls one in the
    same message or the next; or a conversion call's source and target (unit, currency, language,
    time zone, …) are the same."""
    messages = sample.messages
    for i, message in enumerate(messages):
        if message.role != "assistant" or not message.content:
            continue
        calls_here = _acts(message.tool_calls, sample)
        calls_next = i + 1 < len(messages) and messages[i + 1].role == "assistant" and _acts(messages[i + 1].tool_calls, sample)
        if not (calls_here or calls_next):
            continue
        said = refusal(message.content)
        if said:
            where = "in the same message" if calls_here else f"at messages[{i + 1}]"
            yield f"messages[{i}].content", f"the assistant says {said[:120]!r} and calls a function {where}"
    for call in sample.calls:
        if not call.arguments:
            continue
        function = sample.functions.get(call.name)
        problem = same_ends(call.name, call.arguments, function.description if function is not None else "")
        if problem:
            yield call.path + ".arguments", problem
