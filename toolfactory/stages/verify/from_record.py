"""Verify from the record: the execution layer's check of a dialogue that runs nothing.

A live replay (:mod:`.execution`) is the truth where the sources can run. Where they cannot (a
server that is gone or not installed, a verify with no run configuration), or where the user asks
for it (``toolfactory verify`` without ``--live``), the record is checked against itself: what
``generation.execution`` says ran must be what the dialogue shows the model, and what it says the
sources answered and left must hold together.

What the record can prove:

* **Every executed call is recorded, and nothing else.** Each call of the messages to a function
  the record names as executable, which ran or whose arguments fit its parameters (the same
  calls a replay runs), has its entry in ``calls``, in message order (same source, name and
  arguments); a call missing there was dropped from the record. An entry no message makes is
  an edit of the dialogue after the run, except in ToolLLM's search, whose abandoned branches ran
  in the same session (recipe ``toolllm``).
* **The results are what the model was shown.** The dialogues stage keeps a digest of each result
  (``result_sha256``: SHA-256 of the tool message's text as the source answered it); a tool
  message whose digest differs was edited, and a call with no tool message lost its answer.
* **Errors follow the source's conventions.** Where the source's settings are known (a BFCL preset
  the record names, or the run's configuration), an answer that is an error by the source's own
  convention (``error_keys``: BFCL's ``{"error": …}``; or the one vetting learnt, which the record
  keeps under ``error_conventions``: a leading ``Database error:``) must be recorded as one, and a
  Python environment's recorded error must be an exception's ``Name: message`` or such an answer.
* **The states hold together.** Each source a recorded call ran on has its final state recorded;
  where the record keeps the state after each user turn (``turn_states``), it keeps one entry
  per user message, each source that has a state is in the entry of every turn from its first
  call on, and the last entry is the final state; where the task has a target state and the
  record's calls are exactly the dialogue's, the recorded final state must be the target, and
  the recorded state after each turn the task's for that turn (``exec_state_mismatch``, as a
  replay would find if the record is honest); and an error no later call recovers is
  ``exec_error_unrecovered`` as in a replay (it is judged on the recorded error flags in both).

What it cannot prove: that the source *would* answer so (a result recorded consistently but
never produced: only a replay finds ``exec_result_mismatch`` or ``exec_source_drifted``); a state
recorded consistently but wrong; the state after each user turn of a record that keeps the final
state only (made before records kept ``turn_states``, or imported: BFCL's trajectories), so the
execution layer replays such a record whose task has ``target_turn_states`` even when asked to
check from the record, and checks it from the record only where its sources cannot start;
a record without result digests (earlier runs, BFCL's imported trajectories) beyond its calls and
states. ``benchmarks/replay_agreement.py`` measures how often the two verdicts differ.

Every finding of the record against itself is ``exec_record_inconsistent``
(:mod:`.rules.execution`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from toolfactory.executable.error_convention import ErrorConvention
from toolfactory.executable.settings import ExecutableSourceSettings, PythonEnvironmentSettings
from toolfactory.models import Dialogue

EXECUTION = "execution"  # the key of generation that holds what ran (see stages/dialogues/execution.py)
#: The key of a recorded call that holds the digest of its result (written by the dialogues stage).
RESULT_DIGEST = "result_sha256"
#: A recipe whose session runs calls its messages do not keep (ToolLLM's search backtracks).
SEARCH_RECIPE = "toolllm"
# How a Python environment's runner reports an exception: ``f"{type(exc).__name__}: {exc}"``.
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*:( |$)")
_MESSAGE_INDEX = re.compile(r"^messages\[(\d+)\]")

Finding = tuple[str, str]  # (path, message), as the rules yield them


def result_digest(content: str) -> str:
    """The digest the record keeps of a result (:data:`RESULT_DIGEST`)."""
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def aligned(path: list[tuple[str, str, str]], recorded: list[Any]) -> list[int | None]:
    """For each call of the dialogue's path ``(source, name, arguments)``, the index of its entry
    in `recorded` (entries are matched in order; calls of abandoned branches may lie between), or
    None when the record lists no such call after the previous one's."""
    found: list[int | None] = []
    start = 0
    for source, name, arguments in path:
        index = next((i for i in range(start, len(recorded)) if _same(recorded[i], source, name, arguments)), None)
        found.append(index)
        if index is not None:
            start = index + 1
    return found


def _same(entry: Any, source: str, name: str, arguments: str) -> bool:
    return (isinstance(entry, dict) and entry.get("source") == source and entry.get("name") == name
            and ("arguments" not in entry or entry["arguments"] == arguments))


def _shown(content: str | None) -> str:
    text = content or ""
    return text if len(text) <= 80 else text[:77] + "..."


def error_by_convention(settings: ExecutableSourceSettings | None, content: str, learnt: Any = None) -> bool | None:
    """Whether `content` is an error by the source's own convention: its settings' (``error_keys``)
    or the one vetting learnt, which the record keeps (``error_conventions``); None when neither
    is known."""
    convention = ErrorConvention.from_dict(learnt if isinstance(learnt, dict) else None)
    if convention.matches(content):
        return True
    if settings is None:
        return None if not convention else False
    try:
        structured = json.loads(content)
    except (ValueError, RecursionError):
        structured = None
    return settings.answers_error(structured)


def inconsistencies(dialogue: Dialogue, path: list[tuple[str, str, str, str, str | None]],
                    settings: Mapping[str, ExecutableSourceSettings]) -> list[Finding]:
    """What the record says against itself (see the module doc). `path`: the executed calls of
    the messages as ``(message path, source, name, arguments, tool message or None)``."""
    executed = dialogue.generation.get(EXECUTION) or {}
    recorded = executed.get("calls") or []
    findings: list[Finding] = []
    for i, entry in enumerate(recorded):
        if not isinstance(entry, dict) or not entry.get("source") or not entry.get("name"):
            findings.append((f"generation.execution.calls[{i}]", "a recorded call without its source and name"))
    where = aligned([(source, name, arguments) for _, source, name, arguments, _ in path], recorded)
    ran: set[str] = set()
    for (at, source, name, _arguments, answer), index in zip(path, where):
        if index is None:
            findings.append((at, f"the dialogue shows {source}.{name} answered here, but the record lists no such call "
                                 f"as run (a call dropped from the record, or arguments edited after the run)"))
            continue
        entry = recorded[index]
        ran.add(source)
        if answer is None:
            findings.append((at, f"the record says {source}.{name} ran, but no tool message answers the call"))
            continue
        digest = entry.get(RESULT_DIGEST)
        if isinstance(digest, str) and digest != result_digest(answer):
            findings.append((at, f"the tool message {_shown(answer)!r} is not the answer the record keeps for "
                                 f"{source}.{name} (its digest differs): edited after the run"))
            continue
        known = settings.get(source)
        by_convention = error_by_convention(known, answer, (executed.get("error_conventions") or {}).get(source))
        is_error = bool(entry.get("is_error"))
        if by_convention and not is_error:
            findings.append((at, f"{source}.{name} answered {_shown(answer)!r}, an error by its source's convention, "
                                 f"but the record says it succeeded"))
        elif (is_error and by_convention is False and isinstance(known, PythonEnvironmentSettings)
              and not _EXCEPTION_LINE.match(answer)):
            findings.append((at, f"the record says {source}.{name} failed, but its answer {_shown(answer)!r} is neither "
                                 f"an exception nor an error by its source's convention"))
    if dialogue.recipe != SEARCH_RECIPE:
        matched = {index for index in where if index is not None}
        for i, entry in enumerate(recorded):
            if i not in matched and isinstance(entry, dict) and entry.get("source") and entry.get("name"):
                findings.append((f"generation.execution.calls[{i}]",
                                 f"the record lists {entry['source']}.{entry['name']}({_shown(str(entry.get('arguments', '')))}) "
                                 f"as run, but no message of the dialogue makes this call"))
    states = executed.get("states")
    for source in sorted(ran):
        if not isinstance(states, dict) or source not in states:
            findings.append(("generation.execution.states", f"{source} ran calls of the dialogue, but its final state is not recorded"))
    if "turn_states" in executed and isinstance(states, dict):
        first_turn: dict[str, int] = {}
        for (at, source, *_), index in zip(path, where):
            if index is not None:
                first_turn.setdefault(source, _turn_of(dialogue, at))
        findings += turn_inconsistencies(dialogue, executed["turn_states"], states, first_turn)
    return findings


def _turn_of(dialogue: Dialogue, at: str) -> int:
    """The user turn (0 for the first) the message at path `at` (``messages[i]…``) answers."""
    found = _MESSAGE_INDEX.match(at)
    upto = int(found.group(1)) if found else len(dialogue.messages)
    return max(sum(m.role == "user" for m in dialogue.messages[: upto + 1]) - 1, 0)


def turn_inconsistencies(dialogue: Dialogue, turn_states: Any, states: Mapping[str, Any],
                         first_turn: Mapping[str, int]) -> list[Finding]:
    """What the recorded states after each user turn say against the dialogue and the final
    states (see the module doc). `first_turn`: the user turn of each source's first call."""
    at = "generation.execution.turn_states"
    users = sum(m.role == "user" for m in dialogue.messages)
    if not isinstance(turn_states, list) or not all(isinstance(entry, dict) for entry in turn_states):
        return [(at, "the states after each user turn are not a list of states by source")]
    if len(turn_states) != users:
        return [(at, f"the record keeps the states after {len(turn_states)} user turns, but the dialogue has {users}")]
    findings: list[Finding] = []
    for source, turn in sorted(first_turn.items()):
        if states.get(source) is None:
            continue  # nothing observable: never in the turn states
        missing = [n for n in range(turn, users) if source not in turn_states[n]]
        if missing:
            findings.append((f"{at}.{missing[0]}", f"{source} ran calls in user turn {turn + 1}, but its state after "
                                                   f"user turn {missing[0] + 1} is not recorded"))
    final = {name: state for name, state in states.items() if state is not None}
    if turn_states and turn_states[-1] != final:
        findings.append((f"{at}.{users - 1}", "the state recorded after the last user turn is not the recorded final state"))
    return findings


__all__ = ["RESULT_DIGEST", "aligned", "error_by_convention", "inconsistencies", "result_digest", "turn_inconsistencies"]
