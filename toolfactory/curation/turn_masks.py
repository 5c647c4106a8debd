"""Turn-level loss masks: which assistant turns of a kept dialogue are context only, and why.

A dialogue can be worth keeping whole while one of its assistant turns should not be learned: a
call that failed before the dialogue recovered from it teaches the recovery only if the model is
not also taught to make the failing call. Each assistant message gets a reason code in
``Message.mask`` (None: learned); exports that have a place for it write it (OpenAI's
``"weight": 0``, the HF export's ``train`` and ``mask``, see ``docs/guide/turn_masks.md``).

The reasons, in the order they are tried (a turn gets the first that applies):

* ``samples_disagreed``: ``Message.masked``, set by the dialogues stage when ToolACE's
  self-consistency samples of the turn disagreed and ``dialogues.on_disagreement`` is ``mask``;
* ``error_recovered``: the turn made a call whose answer was an error and a later call of the same
  function got an answer that was not (the recovery is learned, the failed attempt is not). An
  error is the executed call's ``is_error`` (an exception, an MCP ``isError``, or the source's own
  ``error_keys`` convention; ``generation.execution.calls``), else, for a tool an LLM played, the
  API error convention ``{"status_code": 4xx/5xx, "error": …}`` (the pipeline's 400 among them);
* ``flagged_<rule>``: a failed verdict of the rule layer located in the turn
  (``messages[i]…``), e.g. ``flagged_arg_value_ungrounded``. A kept record carries warnings only.

The judges decide per dialogue (ToolACE §3.2: an aspect, its votes and a majority; no vote points
at a turn), and a kept dialogue passed every aspect, so no turn is masked for a judge. The
execution layer keeps the state after each user turn only where the task sets per-turn targets
(BFCL) and the final state otherwise, never the state after one call, and any state or result
mismatch rejects the dialogue: no kept turn is masked for a state that went wrong.

The curate stage applies :func:`apply` to every dialogue it keeps and counts the reasons in its
profile (``turn_masks``); exports read :func:`reason`, which also reads a record stored before
``mask`` existed (its ``masked`` flag alone).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable

from toolfactory.models import Dialogue, Message
from toolfactory.stages.verify.policy import api_error

SAMPLES_DISAGREED = "samples_disagreed"
ERROR_RECOVERED = "error_recovered"
FLAGGED = "flagged_"  # + the rule code
#: The curate stage's profile dimensions: masked assistant turns by reason; assistant turns by fate.
PROFILE = "turn_masks"
TURNS = "assistant_turns"
TRAINED, MASKED = "trained", "masked"

_MESSAGE_PATH = re.compile(r"^messages\[(\d+)\]")


def reason(message: Message) -> str | None:
    """Why `message` is not to be learned, or None (always None for a turn that is not the assistant's)."""
    if message.role != "assistant":
        return None
    return message.mask or (SAMPLES_DISAGREED if message.masked else None)


ALL = (SAMPLES_DISAGREED, ERROR_RECOVERED, "flagged")  # the kinds `curate.turn_masks` chooses from


def reasons(dialogue: Dialogue, kinds: Iterable[str] = ALL) -> list[str | None]:
    """The mask reason of each message of `dialogue`, computed from its evidence (see the module
    doc), of the `kinds` chosen (``flagged`` stands for every ``flagged_<rule>``)."""
    kinds = set(kinds)
    found: list[str | None] = [SAMPLES_DISAGREED if m.role == "assistant" and m.masked and SAMPLES_DISAGREED in kinds
                               else None for m in dialogue.messages]
    for index in recovered_error_turns(dialogue) if ERROR_RECOVERED in kinds else ():
        found[index] = found[index] or ERROR_RECOVERED
    for verdict in dialogue.verdicts if "flagged" in kinds else ():
        matched = _MESSAGE_PATH.match(verdict.path) if not verdict.passed else None
        index = int(matched.group(1)) if matched else -1
        if 0 <= index < len(found) and dialogue.messages[index].role == "assistant":
            found[index] = found[index] or FLAGGED + verdict.code
    return found


def apply(dialogue: Dialogue, kinds: Iterable[str] = ALL) -> None:
    """Set ``mask`` on every assistant message of `dialogue` (None where it is learned); a turn
    whose samples disagreed stays masked by its ``masked`` flag unless ``samples_disagreed`` is
    left out of `kinds`, which then unmasks it."""
    kinds = set(kinds)
    for message, why in zip(dialogue.messages, reasons(dialogue, kinds)):
        if message.role == "assistant":
            message.mask = why
            if message.masked and SAMPLES_DISAGREED not in kinds:
                message.masked = None


def counts(dialogue: Dialogue) -> dict[str, Counter[str]]:
    """What the messages of `dialogue` hold: its assistant turns ``trained`` / ``masked``
    (:data:`TURNS`) and its masked turns by reason (:data:`PROFILE`)."""
    assistants = [m for m in dialogue.messages if m.role == "assistant"]
    why = Counter(r for r in map(reason, assistants) if r)
    masked = sum(why.values())
    return {TURNS: Counter({TRAINED: len(assistants) - masked, MASKED: masked}), PROFILE: why}


def recovered_error_turns(dialogue: Dialogue) -> set[int]:
    """Indices of the assistant messages with a call answered by an error that a later call of the
    same function recovered from (an answer that is not an error)."""
    errors = call_errors(dialogue)
    turn_of: dict[str, int] = {}
    order: list[tuple[int, str, str]] = []  # (message index, call id, function), in call order
    for i, message in enumerate(dialogue.messages):
        for call in message.tool_calls or [] if message.role == "assistant" else []:
            turn_of[call.id] = i
            order.append((i, call.id, call.name))
    found: set[int] = set()
    for k, (i, call_id, name) in enumerate(order):
        if errors.get(call_id) is True and any(other == name and errors.get(later) is False
                                               for _, later, other in order[k + 1:]):
            found.add(i)
    return found


def call_errors(dialogue: Dialogue) -> dict[str, bool]:
    """Per call id that has an answer, whether the answer was an error (see the module doc)."""
    answers: dict[str, Message] = {}
    for message in dialogue.messages:
        if message.role == "tool" and message.tool_call_id is not None:
            answers.setdefault(message.tool_call_id, message)
    ran = _executed_flags(dialogue)
    return {call_id: ran.get(call_id, api_error(answer.content)) for call_id, answer in answers.items()}


def _executed_flags(dialogue: Dialogue) -> dict[str, bool]:
    """``is_error`` of the calls that ran on executable sources, by the message call they were.

    The session's calls are in the order they ran and may include calls of abandoned branches
    (ToolLLM's search), so each message call is matched to the next recorded call of the same
    name and arguments text."""
    execution = dialogue.generation.get("execution")
    recorded: list[Any] = execution.get("calls") or [] if isinstance(execution, dict) else []
    flags: dict[str, bool] = {}
    start = 0
    for message in dialogue.messages:
        for call in message.tool_calls or []:
            for index in range(start, len(recorded)):
                entry = recorded[index]
                if isinstance(entry, dict) and entry.get("name") == call.name and entry.get("arguments") == call.arguments:
                    flags[call.id] = bool(entry.get("is_error"))
                    start = index + 1
                    break
    return flags
