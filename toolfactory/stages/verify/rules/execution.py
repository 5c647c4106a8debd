"""Execution: the dialogue's calls replayed in fresh environments of their executable sources
(APIGen's execution check; BFCL's multi-turn state check; τ-bench's final-state check).

These rules judge a :class:`~toolfactory.stages.verify.execution.Replay`, which the execution
layer of the verify stage (:mod:`toolfactory.stages.verify.execution`) makes for a dialogue whose
calls ran on executable sources; the rule layer (:func:`~..registry.check`) does not run them.
Checked from the record (:mod:`toolfactory.stages.verify.from_record`), the replay ran nothing:
the rules that need answers given again find nothing, the others judge what the record says, and
``exec_record_inconsistent`` reports where the record contradicts itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

from toolfactory.executable.session import (
    EXEC_CRASHED,
    EXEC_OUTPUT_FLOOD,
    EXEC_PROCESS_LIMIT,
    EXEC_START_FAILED,
    EXEC_TIMEOUT,
)
from toolfactory.stages.verify.rules.registry import Finding, Sample, rule

if TYPE_CHECKING:
    from toolfactory.stages.verify.execution import Replay, ReplayedCall

REPLAY = "replay"  # the key the execution layer gives its replay under (Sample.provide)
RECORD_FINDINGS = "record_findings"  # ... and what a check from the record found, as (path, message)
SHOWN = 120  # characters of a result quoted in a message


def replay_of(sample: Sample) -> Replay | None:
    """The replay the execution layer attached to `sample` (None outside that layer)."""
    found: Replay | None = sample.memo(REPLAY, lambda _: None)
    return found


def _short(text: str) -> str:
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


def _changed(replay: Replay) -> Iterator[ReplayedCall]:
    """The deterministic calls whose replay answered otherwise than the dialogue records."""
    for call in replay.calls:
        if call.deterministic and call.result is not None and call.result.content != call.recorded:
            yield call


@rule("exec_result_mismatch", kind="execution")
def result_mismatch(sample: Sample) -> Iterator[Finding]:
    """A tool declared deterministic (the source's `deterministic` setting) answers the replay otherwise than the dialogue records, on the version of the source the dialogue ran."""
    from toolfactory.stages.verify.execution import drifted

    replay = replay_of(sample)
    for call in _changed(replay) if replay else []:
        if not drifted(replay, call.source):  # type: ignore[arg-type]
            yield call.path, (f"{call.source}.{call.name} answered {_short(call.result.content)!r} on replay; "  # type: ignore[union-attr]
                              f"the dialogue records {_short(call.recorded or '')!r}")


@rule("exec_source_drifted", kind="execution")
def source_drifted(sample: Sample) -> Iterator[Finding]:
    """A tool declared deterministic answers the replay otherwise than the dialogue records, and its source now runs another version than when the dialogue was made: the source drifted."""
    from toolfactory.stages.verify.execution import drifted

    replay = replay_of(sample)
    for call in _changed(replay) if replay else []:
        if drifted(replay, call.source):  # type: ignore[arg-type]
            yield call.path, (f"{call.source} ran {replay.recorded_versions[call.source]!r} then and {replay.versions[call.source]!r} "  # type: ignore[union-attr]
                              f"now: {call.name} answered {_short(call.result.content)!r}, the dialogue records "  # type: ignore[union-attr]
                              f"{_short(call.recorded or '')!r}")


@rule("exec_record_inconsistent", kind="execution")
def record_inconsistent(sample: Sample) -> Iterator[Finding]:
    """Checked from the record (the source gone, or `toolfactory verify` without --live): the record contradicts itself or the dialogue, e.g. a call the messages show answered is not recorded as run, a tool message is not the answer the record keeps a digest of, an error by the source's convention is recorded as a success, or a source that ran has no recorded state."""
    found: list[tuple[str, str]] = sample.memo(RECORD_FINDINGS, lambda _: [])
    yield from found


@rule("exec_error_unrecovered", kind="execution")
def error_unrecovered(sample: Sample) -> Iterator[Finding]:
    """An executed call answered with an error (a Python exception, an MCP isError) and no later call of the same function succeeds."""
    replay = replay_of(sample)
    calls = replay.calls if replay else []
    for i, call in enumerate(calls):
        if call.recorded_error and not any(later.name == call.name and later.source == call.source
                                           and not later.recorded_error for later in calls[i + 1:]):
            yield call.path, f"{call.source}.{call.name} {_failure(call)} and is never made again successfully"


def _failure(call: ReplayedCall) -> str:
    """How `call` failed, quoting the answer that decided it: the replay's when the replay failed
    it (it may have failed where the dialogue records a success), else the recorded one."""
    if call.result is not None and call.result.is_error and call.result.content != call.recorded:
        recorded = f"; the dialogue records {_short(call.recorded)!r}" if call.recorded is not None else ""
        return f"failed on replay ({_short(call.result.content)!r}{recorded})"
    return f"failed ({_short(call.recorded or '')!r})"


@rule("exec_state_mismatch", kind="execution")
def state_mismatch(sample: Sample) -> Iterator[Finding]:
    """The replay leaves a source in another state than the task's target state (or, without one, the state the dialogue recorded), at the end or, where the task gives them, after a user turn."""
    replay = replay_of(sample)
    if replay is None or replay.failure is not None or replay.expected is None:
        return
    for source, expected in sorted(replay.expected.items()):
        found = replay.states.get(source)
        where = first_difference(found, expected)
        if where is not None:
            ends = "ends" if replay.live else "is recorded to end"
            yield f"generation.execution.states.{source}", (
                f"{source} {ends} in another state than the {replay.expected_kind} one (first difference at {where or '/'})")
            return
    # BFCL checks the state after every user turn: a booking changed and then cancelled ends
    # where the task does, but not through the states it asks for. The first turn that differs.
    kind = replay.expected_turns_kind
    key = "target_turn_states" if kind == "target" else "turn_states"
    for turn, (found_states, expected_states) in enumerate(zip(replay.turn_states, replay.expected_turns or [])):
        for source, expected in sorted(expected_states.items()):
            differs = difference(found_states.get(source), expected)
            if differs is not None:
                where, got, wanted = differs
                has = "has" if replay.live else "is recorded to have"
                yield f"generation.execution.{key}.{turn}.{source}", (
                    f"after user turn {turn + 1}, {source} is in another state than the {kind} one "
                    f"(first difference at {where or '/'}: the replay {has} {_value(got)}, the {kind} one {_value(wanted)})")
                return


def _failed(sample: Sample, reason: str) -> Iterator[Finding]:
    replay = replay_of(sample)
    if replay is not None and replay.failure is not None and replay.failure.reason == reason:
        yield replay.failure.path, replay.failure.message


@rule(EXEC_TIMEOUT, kind="execution")
def timeout(sample: Sample) -> Iterator[Finding]:
    """A replayed call did not answer within its source's call_timeout_seconds."""
    yield from _failed(sample, EXEC_TIMEOUT)


@rule(EXEC_CRASHED, kind="execution")
def crashed(sample: Sample) -> Iterator[Finding]:
    """The replay's process exited or broke its protocol."""
    yield from _failed(sample, EXEC_CRASHED)


@rule(EXEC_OUTPUT_FLOOD, kind="execution")
def output_flood(sample: Sample) -> Iterator[Finding]:
    """The replay's process wrote far more than its output cap."""
    yield from _failed(sample, EXEC_OUTPUT_FLOOD)


@rule(EXEC_PROCESS_LIMIT, kind="execution")
def process_limit(sample: Sample) -> Iterator[Finding]:
    """The replay's process started more processes than its limits allow."""
    yield from _failed(sample, EXEC_PROCESS_LIMIT)


@rule(EXEC_START_FAILED, kind="execution")
def start_failed(sample: Sample) -> Iterator[Finding]:
    """A source of the dialogue's calls could not be started for the replay (or is not configured)."""
    yield from _failed(sample, EXEC_START_FAILED)


_ABSENT = object()  # what a missing key or list item holds, in :func:`difference`


def first_difference(found: object, expected: object, path: str = "") -> str | None:
    """The JSON path of the first place where `found` differs from `expected`, or None when equal."""
    differs = difference(found, expected, path)
    return None if differs is None else differs[0]


def difference(found: object, expected: object, path: str = "") -> tuple[str, object, object] | None:
    """The first place where `found` differs from `expected` (its JSON path, and the value each
    holds there: :data:`_ABSENT` where one has nothing), or None when equal."""
    if isinstance(found, dict) and isinstance(expected, dict):
        for key in sorted(set(found) | set(expected), key=str):
            inner = difference(found.get(key, _ABSENT), expected.get(key, _ABSENT), f"{path}/{key}")
            if inner is not None:
                return inner
        return None
    if isinstance(found, list) and isinstance(expected, list):
        for i in range(max(len(found), len(expected))):
            inner = difference(found[i] if i < len(found) else _ABSENT, expected[i] if i < len(expected) else _ABSENT, f"{path}/{i}")
            if inner is not None:
                return inner
        return None
    return None if found == expected and type(found) is type(expected) else (path, found, expected)


def _value(value: object) -> str:
    """A state's value as a message quotes it."""
    return "nothing" if value is _ABSENT else _short(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))
