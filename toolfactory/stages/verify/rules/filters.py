"""Record filters of ToolAlpaca §4.1 and ToolLLM's DFSDT answers: **policy** rules, which apply a
recipe's :class:`~toolfactory.stages.verify.policy.Policy` (see that module for validity vs
policy); `toolfactory verify` runs them only when asked.

* ``filter_too_many_steps``: more than the policy's ``max_steps`` steps, a step being one function call (one
  action/observation pair of ToolAlpaca's ReAct format; a parallel turn of k calls is k steps).
* ``filter_parse_error``: a tool message that is the error the pipeline's dialogues stage sends
  back for a call it could not execute (an unknown function, arguments that are not JSON or
  violate the schema): a JSON object with ``"status_code": 400`` and an ``"error"`` key. Such a
  record is ToolAlpaca's "parsing error in the output". On pipeline output this code comes with
  the ``call_*`` code of the faulty call (a documented co-occurrence); it is what still rejects the
  record when that ``call_*`` rule is disabled or the executor's check was stricter. Other
  status codes are real API answers (a 404 for an unknown id) and are not flagged. With a policy
  that keeps error recovery, an error followed by a correct call to the same function is kept.
* ``filter_search_not_finished``: the tools include ToolLLM's ``Finish`` function but the
  dialogue never calls it with ``return_type: give_answer`` (a DFSDT path that gave up, or was
  cut before finishing).
"""

from __future__ import annotations

from typing import Iterator

from toolfactory.stages.verify.policy import DEFAULT, PARSE_ERROR_STATUS, error_text, recovered_calls
from toolfactory.stages.verify.rules.registry import Finding, Sample, rule

MAX_STEPS = DEFAULT.max_steps
__all__ = ["MAX_STEPS", "PARSE_ERROR_STATUS"]
FINISH = "Finish"
GIVE_ANSWER = "give_answer"


@rule("filter_too_many_steps", kind="policy")
def too_many_steps(sample: Sample) -> Iterator[Finding]:
    """More function calls than the policy's max_steps (ToolAlpaca: more than five interaction steps)."""
    limit = sample.policy.max_steps
    if limit is not None and len(sample.calls) > limit:
        yield sample.calls[limit].path, f"{len(sample.calls)} function calls (at most {limit} for {sample.policy.name})"


@rule("filter_parse_error", kind="policy")
def parse_error(sample: Sample) -> Iterator[Finding]:
    """A tool message is the pipeline's error for an unexecutable call ({"status_code": 400, "error": ...})."""
    recovered = set(sample.memo("recovered", recovered_calls).values()) if sample.policy.keep_error_recovery else set()
    for i, message in enumerate(sample.messages):
        if message.role != "tool" or i in recovered:
            continue
        error = error_text(message.content)
        if error is not None:
            yield f"messages[{i}].content", f"the call could not be executed: {error[:160]}"


@rule("filter_search_not_finished", kind="policy")
def search_not_finished(sample: Sample) -> Iterator[Finding]:
    """The tools include Finish but it is never called with return_type give_answer (ToolLLM)."""
    if FINISH not in sample.functions:
        return
    finishes = [call for call in sample.calls if call.name == FINISH]
    if any((call.arguments or {}).get("return_type") == GIVE_ANSWER for call in finishes):
        return
    if finishes:
        kinds = sorted({str((call.arguments or {}).get("return_type")) for call in finishes})
        yield finishes[-1].path + ".arguments", f"Finish is called only with return_type {', '.join(kinds)}"
    else:
        yield "messages", "Finish is offered but never called"
