"""How the dialogues that ran real tools are counted in a stage's profile.

The dialogues stage counts every dialogue it made, the curate stage the ones in the dataset, with
the same dimensions, so `toolfactory stats` and the run report can say per executable source how
many dialogues ran it, how many calls it answered (and how many of those were errors), and how
many of those dialogues were kept; and, per kind of near-miss argument type coerced before a call
ran (:mod:`toolfactory.executable.coercion`), how many values of each source's calls were coerced.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Protocol

#: Dialogues that called a source at least once, per source.
DIALOGUES_BY_SOURCE = "executed_dialogues_by_source"
#: Dialogues that called any executable source (value ``any``): the executed share of a stage.
EXECUTED = "executed_dialogues_any_source"
#: Calls a source answered, per source.
CALLS_BY_SOURCE = "executed_calls_by_source"
#: Of those, the answers that were errors (a Python exception, an MCP ``isError``), per source.
ERRORS_BY_SOURCE = "executed_errors_by_source"
#: Values coerced before their call ran, per source: ``arg_coerced_number``, ``arg_coerced_boolean``,
#: ``arg_coerced_array`` (a dimension only where some value was).
COERCED = "arg_coerced_"
#: Sessions of a source that began with a process started for them, or with a warm process reset
#: (:mod:`toolfactory.executable.pool`), per source.
SESSIONS_STARTED = "sessions_started_by_source"
SESSIONS_REUSED = "sessions_reused_by_source"


class _Counts(Protocol):
    def count(self, dimension: str, value: str, n: int = 1) -> None: ...


def count_executed(out: _Counts, generation: Mapping[str, Any], sessions: bool = False) -> None:
    """Add one dialogue's executed calls (its ``generation["execution"]``) to `out`'s profile;
    with `sessions`, how its sessions began too (the stage that opened them)."""
    execution = generation.get("execution") or {}
    calls = Counter(str(call.get("source")) for call in execution.get("calls") or [])
    errors = Counter(str(call.get("source")) for call in execution.get("calls") or [] if call.get("is_error"))
    if calls:
        out.count(EXECUTED, "any")
    for source, n in sorted(calls.items()):
        out.count(DIALOGUES_BY_SOURCE, source)
        out.count(CALLS_BY_SOURCE, source, n)
        # Counted even when zero, so that a source with no errors shows 0 rather than nothing.
        out.count(ERRORS_BY_SOURCE, source, errors[source])
    coerced = Counter((str(coercion.get("kind")), str(call.get("source")))
                      for call in execution.get("calls") or [] for coercion in call.get("coercions") or [])
    for (kind, source), n in sorted(coerced.items()):
        out.count(COERCED + kind, source, n)
    for source, began in sorted((execution.get("sessions") or {}).items() if sessions else ()):
        out.count(SESSIONS_REUSED if began == "reused" else SESSIONS_STARTED, str(source))
