"""Record filters of ToolAlpaca §4.1 and ToolLLM's DFSDT answers.

* ``filter_too_many_steps``: more than ``MAX_STEPS`` steps, a step being one function call (one
  action/observation pair of ToolAlpaca's ReAct format; a parallel turn of k calls is k steps).
* ``filter_parse_error``: a tool message that is the error the pipeline's dialogues stage sends
  back for a call it could not execute (an unknown function, arguments that are not JSON or
  violate the schema): a JSON object with ``"status_code": 400`` and an ``"error"`` key. Such a
  record is ToolAlpaca's "parsing error in the output". On pipeline output this code comes with
  the ``call_*`` code of the faulty call (a documented co-occurrence); it is what still rejects the
  record when that ``call_*`` rule is disabled or the executor's check was stricter. Other
  status codes are real API answers (a 404 for an unknown id) and are not flagged.
* ``filter_search_not_finished``: the tools include ToolLLM's ``Finish`` function but the
  dialogue never calls it with ``return_type: give_answer`` (a DFSDT path that gave up, or was
  cut before finishing).
"""

from __future__ import annotations

import json
from typing import Iterator

from toolfactory.stages.verify.rules.registry import Finding, Sample, rule

MAX_STEPS = 5
PARSE_ERROR_STATUS = 400
FINISH = "Finish"
GIVE_ANSWER = "give_answer"


@rule("filter_too_many_steps")
def too_many_steps(sample: Sample) -> Iterator[Finding]:
    """More than MAX_STEPS function calls (ToolAlpaca: more than five interaction steps)."""
    if len(sample.calls) > MAX_STEPS:
        yield sample.calls[MAX_STEPS].path, f"{len(sample.calls)} function calls (at most {MAX_STEPS})"


@rule("filter_parse_error")
def parse_error(sample: Sample) -> Iterator[Finding]:
    """A tool message is the pipeline's error for an unexecutable call ({"status_code": 400, "error": ...})."""
    for i, message in enumerate(sample.messages):
        content = message.content
        if message.role != "tool" or not content or '"status_code"' not in content:
            continue
        try:
            body = json.loads(content)
        except json.JSONDecodeError:
            continue
        if isinstance(body, dict) and body.get("status_code") == PARSE_ERROR_STATUS and "error" in body:
            yield f"messages[{i}].content", f"the call could not be executed: {str(body['error'])[:160]}"


@rule("filter_search_not_finished")
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
