"""What two samples of an assistant decision must share to agree, and the vote over them
(ToolACE §2.2.2 self-consistency: "whether to call a tool and the parameter values to fill").

Values are compared as the user who asked would compare them, not byte for byte: strings
without case, surrounding space or repeated inner space; numbers by value whether written 3,
3.0 or "3"; an argument left out the same as one sent as null; the calls of one turn (parallel
calls) in any order. Lists keep their order (a route's stops are not a set), and objects are
compared key by key.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

from toolfactory.models import ToolCall


def normalised(value: Any) -> Any:
    """`value` in the form two equal-meaning values share."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return _number(float(value))
    if isinstance(value, str):
        text = " ".join(value.split()).casefold()
        try:
            number = float(text)
        except ValueError:
            return text
        # "3" is the number 3, but "nan" or "inf" written by a user are words.
        return _number(number) if math.isfinite(number) else text
    if isinstance(value, dict):
        return {str(k): normalised(v) for k, v in sorted(value.items()) if v is not None}
    if isinstance(value, list):
        return [normalised(v) for v in value]
    return value


def _number(number: float) -> Any:
    # One spelling per number: 3, 3.0 and "3" all become the integer 3.
    return int(number) if number.is_integer() else number


def _arguments(text: str) -> Any:
    try:
        return normalised(json.loads(text or "{}"))
    except json.JSONDecodeError:
        return " ".join(text.split())  # not JSON: compared as written, bar spacing


def decision_key(calls: list[ToolCall]) -> str:
    """What must agree between samples: the calls' names and argument values (order-free, ids
    ignored); no calls at all is a decision too (answer or ask in text)."""
    return json.dumps(sorted(json.dumps([c.name, _arguments(c.arguments)], sort_keys=True) for c in calls))


class Tally:
    """The votes of up to `planned` samples. `decided` says whether the outcome of voting all
    `planned` can no longer change, so the remaining samples need not be drawn."""

    def __init__(self, planned: int) -> None:
        self.planned = planned
        self.keys: list[str] = []

    def add(self, key: str) -> None:
        self.keys.append(key)

    @property
    def complete(self) -> bool:
        return len(self.keys) >= self.planned

    @property
    def decided(self) -> bool:
        if self.complete:
            return True
        counts = sorted(Counter(self.keys).values(), reverse=True)
        top, second = counts[0] if counts else 0, counts[1] if len(counts) > 1 else 0
        remaining = self.planned - len(self.keys)
        # Strictly ahead of every other decision, seen or not, even if all remaining samples
        # went to it: the full vote would pick the same one (ties there go to the first seen).
        return top >= 2 and top > second + remaining

    def winner(self) -> int | None:
        """Index of the first sample of the majority decision; None when no two agree."""
        if not self.keys:
            return None
        key, votes = Counter(self.keys).most_common(1)[0]
        return self.keys.index(key) if votes >= 2 else None
