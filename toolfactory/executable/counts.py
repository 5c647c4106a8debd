"""How the dialogues that ran real tools are counted in a stage's profile.

The dialogues stage counts every dialogue it made, the curate stage the ones in the dataset, with
the same dimensions, so `toolfactory stats` and the run report can say per executable source how
many dialogues ran it, how many calls it answered (and how many of those were errors), and how
many of those dialogues were kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Protocol

#: Dialogues that called a source at least once, per source.
DIALOGUES_BY_SOURCE = "executed_dialogues_by_source"
#: Calls a source answered, per source.
CALLS_BY_SOURCE = "executed_calls_by_source"
#: Of those, the answers that were errors (a Python exception, an MCP ``isError``), per source.
ERRORS_BY_SOURCE = "executed_errors_by_source"


class _Counts(Protocol):
    def count(self, dimension: str, value: str, n: int = 1) -> None: ...


def count_executed(out: _Counts, generation: Mapping[str, Any]) -> None:
    """Add one dialogue's executed calls (its ``generation["execution"]``) to `out`'s profile."""
    execution = generation.get("execution") or {}
    calls = Counter(str(call.get("source")) for call in execution.get("calls") or [])
    errors = Counter(str(call.get("source")) for call in execution.get("calls") or [] if call.get("is_error"))
    for source, n in sorted(calls.items()):
        out.count(DIALOGUES_BY_SOURCE, source)
        out.count(CALLS_BY_SOURCE, source, n)
        # Counted even when zero, so that a source with no errors shows 0 rather than nothing.
        out.count(ERRORS_BY_SOURCE, source, errors[source])
