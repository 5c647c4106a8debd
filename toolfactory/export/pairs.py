"""Preference pairs: an accepted dialogue and a rejected attempt at the same task, cut where they
part, for preference training (DPO and its kin) in :mod:`toolfactory.export.preference`.

A pair is the shared **prompt** (system, tools, and every message the two share up to the first
assistant reply that differs), the accepted dialogue's reply there (**chosen**) and the attempt's
(**rejected**), with the reason codes that rejected the attempt. Where the rejected attempts
come from (:data:`SOURCES`):

* ``rejected_record``: a dialogue of the same task that the run rejected, with its reason codes
  (the dialogues stage's early rejections and disagreements, the verify stage's rules, execution
  and judges), read from the stages' ``rejected/`` parts;
* ``search_branch``: a reply DFSDT tried and abandoned at a state of the kept path (ToolLLM
  §2.3: a give-up, a call the rules reject, an answer they reject, a branch that reached the
  depth limit, a call below which every path failed), kept by the search in
  ``generation.search.alternatives``; the pairing of a kept step with the failed siblings before
  it is TP-LLaMA's (Chen et al. 2024, preference learning on ToolBench's decision trees);
* ``outvoted_sample``: a sample of an assistant decision that the majority overruled (ToolACE's
  self-consistency, §2.2.2), kept in ``generation.alternatives``;
* ``corruption`` (only when asked for, and labelled ``synthesized``): one labelled fault of
  :mod:`toolfactory.stages.verify.corruption` injected into the accepted dialogue (a wrong
  argument type, a required argument dropped, an unknown function…), kept only when the rule
  layer, under the recipe's policy, rejects the corrupted dialogue with the fault's code while the
  accepted one passes it. The rules need no endpoint, so a synthesized pair is as reproducible as
  the export; a fault the rules cannot confirm (a changed value that is still valid) is not used.
  Synthesized pairs are made only for a task with no real one.

The cut: the two message lists are compared from the start (role, text, calls and tool-call ids;
reasoning does not count); the prompt ends where they first differ, which must be an assistant
message of both, after a user or tool message. Attempts that part elsewhere (another user turn,
another tool response: not the assistant's doing) or that stop before the cut make no pair.
``step`` pairs hold the one differing reply a side; ``rest`` pairs the rest of each dialogue.

A record following ToolLLM's Finish convention is paired as the ``openai`` export writes it (its
answer a ``Finish(give_answer)`` call, :func:`~toolfactory.export.openai.with_finish_tool`), and a
pair whose rejected reply calls Finish (a give-up) offers Finish in its tools.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping, Sequence

from pydantic import ValidationError

from toolfactory.config.export import MODEL_FAULTS
from toolfactory.definitions.finish import FINISH_FUNCTION
from toolfactory.export.base import Skip
from toolfactory.export.openai import with_finish_tool
from toolfactory.models import Dialogue, Function, Message
from toolfactory.stages.verify.corruption import corruptions
from toolfactory.stages.verify.policy import for_recipe
from toolfactory.stages.verify.rules import check, errors
from toolfactory.storage import ObjectStore
from toolfactory.storage.shards import read_rejected, stage_parts

REJECTED_RECORD = "rejected_record"
SEARCH_BRANCH = "search_branch"
OUTVOTED_SAMPLE = "outvoted_sample"
CORRUPTION = "corruption"
SOURCES: dict[str, str] = {
    REJECTED_RECORD: "a dialogue of the same task that the run rejected",
    SEARCH_BRANCH: "a reply the DFSDT search abandoned at a state of the kept path",
    OUTVOTED_SAMPLE: "a sample of an assistant decision that self-consistency overruled",
    CORRUPTION: "a labelled fault injected into the accepted dialogue and confirmed by the rule layer (synthesized)",
}
# The stages whose rejected records are attempts at a dialogue (later stages reject accepted
# dialogues for being duplicates or contaminated, which says nothing about their quality).
ATTEMPT_STAGES = ("dialogues", "verify")
# Reason code of an outvoted sample, and prefix of an abandoned search branch's: its node kind
# (search_give_up, search_invalid_finish, search_rejected_call, search_rejected_answer,
# search_depth_cut), or search_subtree_failed for a reply whose calls ran and every path below failed.
OUTVOTED = "dialogue_outvoted_decision"
SEARCH = "search_"


Completion = Literal["step", "rest"]


@dataclass(frozen=True)
class Attempt:
    """A rejected attempt at a task: its messages, why it was rejected, and where it comes from."""

    id: str
    messages: list[Message]
    reasons: tuple[str, ...]
    source: str
    synthesized: bool = False
    detail: str = ""


@dataclass(frozen=True)
class PreferencePair:
    """One pair (see the module doc); `prompt` includes the system message when there is one."""

    id: str
    task_id: str
    recipe: str
    tools: list[Function]
    prompt: list[Message]
    chosen: list[Message]
    rejected: list[Message]
    reasons: tuple[str, ...]
    source: str
    synthesized: bool
    chosen_id: str
    rejected_id: str
    detail: str = ""

    def metadata(self) -> dict[str, Any]:
        """The columns every preference format carries beside the pair."""
        return {"id": self.id, "chosen_id": self.chosen_id, "rejected_id": self.rejected_id, "recipe": self.recipe,
                "rejected_reasons": list(self.reasons), "pair_source": self.source, "synthesized": self.synthesized}


def _key(message: Message) -> tuple[Any, ...]:
    calls = tuple((c.id, c.name, c.arguments) for c in message.tool_calls or ())
    return message.role, (message.content or "").strip(), calls, message.tool_call_id


def parting(chosen: Sequence[Message], rejected: Sequence[Message]) -> int | None:
    """The index where the two dialogues part, when that is an assistant reply of both after a
    user or tool message; else None."""
    k = 0
    while k < len(chosen) and k < len(rejected) and _key(chosen[k]) == _key(rejected[k]):
        k += 1
    if k == 0 or k >= len(chosen) or k >= len(rejected):
        return None
    if chosen[k].role != "assistant" or rejected[k].role != "assistant" or chosen[k - 1].role not in ("user", "tool"):
        return None
    return k


def pair(accepted: Dialogue, attempt: Attempt, completion: Completion = "step") -> PreferencePair | None:
    """The pair of `accepted` and `attempt`, or None when they make none (see the module doc)."""
    rejected_messages = _as_exported(accepted.model_copy(update={"messages": attempt.messages}))
    accepted = with_finish_tool(accepted)
    k = parting(accepted.messages, rejected_messages)
    if k is None or accepted.messages[k].masked:
        return None
    end_chosen, end_rejected = (k + 1, k + 1) if completion == "step" else (len(accepted.messages), len(rejected_messages))
    chosen, rejected = accepted.messages[k:end_chosen], rejected_messages[k:end_rejected]
    tools = list(accepted.tools)
    if any(c.name == FINISH_FUNCTION.name for m in rejected for c in m.tool_calls or ()) and \
            not any(f.name == FINISH_FUNCTION.name for f in tools):
        tools.append(FINISH_FUNCTION)
    return PreferencePair(id=f"{accepted.id}|{attempt.id}", task_id=accepted.task_id, recipe=accepted.recipe, tools=tools,
                          prompt=accepted.messages[:k], chosen=chosen, rejected=rejected, reasons=attempt.reasons,
                          source=attempt.source, synthesized=attempt.synthesized, chosen_id=accepted.id,
                          rejected_id=attempt.id, detail=attempt.detail)


def _as_exported(dialogue: Dialogue) -> list[Message]:
    """The messages as the ``openai`` export writes them (ToolLLM's Finish as a call); an attempt
    whose path has no answer for Finish to give stays as it is."""
    try:
        return with_finish_tool(dialogue).messages
    except Skip:
        return dialogue.messages


def stored_alternatives(dialogue: Dialogue) -> list[Attempt]:
    """The rejected replies the dialogue's own generation kept (search branches, outvoted samples)."""
    found: list[Attempt] = []
    kept = [(SEARCH_BRANCH, a) for a in (dialogue.generation.get("search") or {}).get("alternatives") or []]
    kept += [(OUTVOTED_SAMPLE, a) for a in dialogue.generation.get("alternatives") or []]
    for n, (source, alternative) in enumerate(kept):
        try:
            at, message = int(alternative["at"]), Message.model_validate(alternative["message"])
        except (KeyError, TypeError, ValueError, ValidationError):
            continue
        kind = str(alternative.get("kind", ""))
        reason = OUTVOTED if source == OUTVOTED_SAMPLE else SEARCH + ("subtree_failed" if kind == "call" else kind)
        found.append(Attempt(f"{dialogue.id}~{source}{n}", [*dialogue.messages[:at], message], (reason,), source))
    return found


def rejected_attempts(store: ObjectStore, run_id: str) -> dict[str, list[Attempt]]:
    """The run's rejected attempts that have messages, by task id (held for the export: one entry a
    rejected dialogue of the dialogues and verify stages)."""
    found: dict[str, list[Attempt]] = {}
    for stage in ATTEMPT_STAGES:
        for path in stage_parts(store, run_id, f"{stage}/rejected"):
            for row in read_rejected(store, path):
                attempt = _attempt(row)
                if attempt is not None:
                    found.setdefault(attempt[0], []).append(attempt[1])
    return found


def _attempt(row: Mapping[str, Any]) -> tuple[str, Attempt] | None:
    try:
        record = json.loads(row.get("record") or "{}")
        task_id = record.get("task_id") or (record.get("task") or {}).get("id")
        messages = [Message.model_validate(m) for m in record.get("messages") or []]
    except (ValueError, TypeError, AttributeError, ValidationError):
        return None
    if not task_id or not messages:
        return None
    reasons = tuple(str(r) for r in row.get("reasons") or ())
    return str(task_id), Attempt(str(row.get("id", "")), messages, reasons, REJECTED_RECORD, detail=str(row.get("detail") or "")[:300])


def corrupted_attempts(dialogue: Dialogue, kinds: Iterable[str], seed: int = 0) -> list[Attempt]:
    """The corruptions of `dialogue` of `kinds` that the rule layer rejects, under the recipe's
    policy, with the fault's code while `dialogue` passes that rule; their reasons are the codes
    the corrupted dialogue newly fails."""
    policy = for_recipe(dialogue.recipe)
    before = {v.code for v in errors(check(dialogue, policy=policy))}
    found: list[Attempt] = []
    for made in corruptions(dialogue, seed, kinds):
        codes = {v.code for v in errors(check(made.dialogue, policy=policy))} - before
        if made.code in codes:
            found.append(Attempt(made.dialogue.id, made.dialogue.messages, tuple(sorted(codes)), CORRUPTION,
                                 synthesized=True, detail=f"{made.kind}: {made.detail}"))
    return found


@dataclass(frozen=True)
class PairMaker:
    """The pairs of each accepted dialogue, from the run's rejected attempts (`attempts`, by task)
    and the dialogue's own alternatives, then, with `synthesize`, from corruptions."""

    attempts: Mapping[str, list[Attempt]]
    completion: Completion = "step"
    synthesize: bool = False
    corruption_kinds: tuple[str, ...] = MODEL_FAULTS
    max_pairs: int = 4
    seed: int = 0

    def pairs(self, dialogue: Dialogue) -> list[PreferencePair]:
        made = self._made(dialogue, [*self.attempts.get(dialogue.task_id, ()), *stored_alternatives(dialogue)])
        if not made and self.synthesize:
            made = self._made(dialogue, corrupted_attempts(dialogue, self.corruption_kinds, self.seed))
        return made

    def _made(self, dialogue: Dialogue, attempts: Iterable[Attempt]) -> list[PreferencePair]:
        out: list[PreferencePair] = []
        seen: set[tuple[Any, ...]] = set()
        for attempt in attempts:
            if len(out) >= self.max_pairs:
                break
            made = pair(dialogue, attempt, self.completion)
            if made is None:
                continue
            key = (len(made.prompt), _key(made.rejected[0]))
            if key not in seen:  # the same reply rejected twice at the same state is one pair
                seen.add(key)
                out.append(made)
        return out
