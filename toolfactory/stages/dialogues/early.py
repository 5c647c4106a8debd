"""Stopping a dialogue as soon as the verify stage is certain to reject it (cheap checks first).

Generation is where a record's LLM calls go; verification only reads what was generated. When a
turn already holds a fault that the verify stage's rule layer (ToolACE §3.1) will reject the
record for, whatever the later turns say, the remaining turns — tool responses, more assistant
turns, the final answer, and the judges — would be spent on a record that cannot be kept. This
module finds those faults on the dialogue so far, with the verify stage's own rules and the
dialogue's recipe policy, so the record is rejected with the same codes, only sooner:

* a call the function-call rules reject (``call_*``: an unknown function, arguments that are no
  JSON or break the schema), for a recipe whose policy does not keep error recovery: a later
  turn can never make that call valid. (ToolAlpaca keeps an error answered and then corrected,
  so its dialogues go on.)
* more calls than the policy's ``max_steps`` (``filter_too_many_steps``), calls only add up;
  unless the call over the limit was answered with an error a policy may still forgive;
* a shown mode that can no longer be the task's target (``dialogue_mode_mismatch``): a call in
  a dialogue made for ``non_tool``, calls in the first assistant turn of one made for
  ``missing_params``, or a parallel turn (after a first turn that called) in one made for any
  mode but ``parallel`` (see :func:`toolfactory.stages.dialogues.modes.shown_mode`).

Every check is monotone — a fault found on a prefix is a fault of every dialogue that extends
it — so turning this on changes which records are kept not at all, only what the rejected ones
cost (``benchmarks.calls`` measures both). A toolllm search uses the same checks to abandon a
branch (:mod:`.search`): there the search goes on with the node's next child, so a task whose
first branch made a bad call may still get a kept path.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolfactory.errors import ToolfactoryError
from toolfactory.config import Config
from toolfactory.models import Dialogue, Function, Message, Task, Verdict
from toolfactory.stages.dialogues.modes import OPEN_MODE
from toolfactory.stages.verify.policy import Policy, error_text, for_recipe
from toolfactory.stages.verify.limits import DEFAULT as DEFAULT_LIMITS
from toolfactory.stages.verify.limits import Limits
from toolfactory.stages.verify.rules import RULES, check, errors
from toolfactory.stages.verify.rules.registry import Sample

CALL_FAMILY = "function_call"
TOO_MANY_STEPS = "filter_too_many_steps"
MODE_MISMATCH = "dialogue_mode_mismatch"


class RejectedEarly(ToolfactoryError):
    """The dialogue so far already fails the rule layer: the verdicts that reject it. `llm_calls`
    is what the dialogue spent so far, set by :func:`~.drivers.play`, which counts it."""

    def __init__(self, verdicts: list[Verdict], messages: list[Message], llm_calls: int = 0) -> None:
        super().__init__(verdicts, messages, llm_calls)
        self.verdicts = verdicts
        self.messages = messages
        self.llm_calls = llm_calls


@dataclass(frozen=True)
class EarlyCheck:
    """The rule-layer checks that can reject one task's dialogue before it is finished."""

    policy: Policy
    disabled: frozenset[str]
    target_mode: str | None
    limits: Limits = DEFAULT_LIMITS

    @classmethod
    def for_task(cls, task: Task, config: Config) -> EarlyCheck | None:
        """The checks for `task` under the verify stage's settings; None when switched off."""
        if not config.dialogues.reject_early:
            return None
        verify = config.verify
        policy = for_recipe(task.recipe, {str(k): v for k, v in verify.max_steps.items()},
                            [str(recipe) for recipe in verify.keep_error_recovery], verify.rejecting_warnings)
        limits = Limits(max_depth=verify.max_depth, max_chars=verify.max_record_chars)
        return cls(policy, frozenset(verify.disabled_rules), task.mode, limits)

    def finished(self, dialogue: Dialogue) -> list[Verdict]:
        """What the verify stage's rule layer rejects a finished `dialogue` for, exactly as it
        will (the replay of executable tools and the judges come after it there)."""
        return errors(check(dialogue, self.disabled, self.limits, self.policy))

    def raise_if_rejected(self, tools: list[Function], messages: list[Message]) -> None:
        """:class:`RejectedEarly` when the dialogue so far is already rejected."""
        found = self.findings(tools, messages)
        if found:
            raise RejectedEarly(found, list(messages))

    def findings(self, tools: list[Function], messages: list[Message]) -> list[Verdict]:
        """The faults of the dialogue so far that reject it whatever comes next."""
        sample = Sample(Dialogue(id="partial", task_id="partial", tools=tools, messages=messages), self.policy)
        found: list[Verdict] = []
        if not self.policy.keep_error_recovery:
            for code, registered in RULES.items():
                if registered.family == CALL_FAMILY and registered.severity == "error" and code not in self.disabled:
                    found += registered.run(sample)
        limit = self.policy.max_steps
        if TOO_MANY_STEPS not in self.disabled and limit is not None and len(sample.calls) > limit:
            over = sample.calls[limit]
            if not (self.policy.keep_error_recovery and _answered_with_error(messages, over.call.id)):
                found += RULES[TOO_MANY_STEPS].run(sample)
        if MODE_MISMATCH not in self.disabled:
            shown = _certain_mode(messages)
            if shown is not None and not _fits(self.target_mode, shown, len(tools)):
                found.append(Verdict(code=MODE_MISMATCH, passed=False, path="messages",
                                     message=f"made for mode {self.target_mode!r}, but the messages show {shown!r}"))
        return found


def _answered_with_error(messages: list[Message], call_id: str) -> bool:
    return any(m.role == "tool" and m.tool_call_id == call_id and error_text(m.content) is not None for m in messages)


def _certain_mode(messages: list[Message]) -> str | None:
    """A mode every continuation of `messages` will show, or None while it is open.

    `shown_mode` tests non_tool, then missing_params (the first assistant turn asked, without a
    call), then parallel (a turn of several calls): once the first assistant turn called, the
    first two are excluded, and one parallel turn fixes the mode."""
    first = next((m for m in messages if m.role == "assistant"), None)
    if first is None or not first.tool_calls:
        return None
    if any(len(m.tool_calls or []) > 1 for m in messages):
        return "parallel"
    return "tool_use"  # single, multiple or dependent: not yet which, but not the other modes


def _fits(target: str | None, shown: str, functions: int) -> bool:
    """Whether a dialogue showing `shown` may still match `target` (``modes.matches_target``)."""
    if target is None or target == OPEN_MODE or target == shown:
        return True
    if shown == "tool_use":
        return target in ("single", "multiple", "dependent", "parallel")  # a later turn may call in parallel
    return target == "multiple" and shown == "single" and functions > 1
