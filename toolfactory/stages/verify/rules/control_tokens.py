"""Control tokens in answers: a final answer holds the syntax of an action instead of words for the user.

``answer_control_token`` reads each **final answer**: an assistant message with text and no
calls that ends the dialogue or is followed by a user turn (what the user reads). It is flagged
when the text

* is the name of an action and nothing else (``give_answer``, ``Finish``, one of Finish's
  parameters such as ``return_type``, an offered function's name, a recipe's built-in action),
  quotes, backticks and a closing full stop aside;
* holds ToolLLM's ``Finish`` syntax: ``give_answer``, ``give_up_and_restart`` or a ``"return_type"``
  key anywhere, or ``Finish(``, ``Action: Finish``, ``"name": "Finish"``;
* holds a chat template's special token (``<|python_tag|>``, ``<|eot_id|>``, ``<|im_end|>``,
  ``[TOOL_CALLS]``);
* holds a call written as text: a ReAct ``Action:`` line naming an action, an ``Action Input:``
  line, a ``<tool_call>`` or ``<function_calls>`` tag, or a ``{"name": …, "arguments": …}``
  object anywhere in the text. Where calls are native
  function calls, a call written as text in any assistant message is already
  ``sample_call_format_mismatch`` (:data:`~.consistency.TEXT_CALL`); that text is not reported
  here a second time.

The words "finish", "action" or a function's name inside a sentence are not flagged; nor are
assistant texts that are not final answers (a ToolLLM thought beside its call, a text followed by
a tool message). A calls-only record (xLAM, ToolAlpaca's golden answers, BFCL) has no final
answer: the rule has nothing to read there.

An **error**: a user would read the syntax. On released data (``benchmarks/semantic_rules.py``:
the final answers of ToolBench's paths; ToolAlpaca's golden answers and BFCL's records end with
calls) it flags no record. On the accepted records of the simulator's demo run it flags 3 of 27,
its three ToolLLM paths, whose final answer is the bare ``give_answer`` (2) or ``return_type``
(the simulator's ``Finish`` calls then carried a word of Finish's own schema as their
``final_answer``; it now writes a sentence there, as a model does).
"""

from __future__ import annotations

import re
from typing import Iterator

from toolfactory.definitions.finish import FINISH_FUNCTION
from toolfactory.stages.verify.rules.consistency import TEXT_CALL, TEXT_FORMATS, declared_format
from toolfactory.stages.verify.rules.registry import Finding, Sample, rule

FINISH = FINISH_FUNCTION.name
RETURN_TYPES = tuple(FINISH_FUNCTION.parameters["properties"]["return_type"]["enum"])  # give_answer, give_up_and_restart
FINISH_PARAMETERS = tuple(FINISH_FUNCTION.parameters["properties"])  # return_type, final_answer

FINISH_SYNTAX = re.compile(
    r"\b(?:" + "|".join(RETURN_TYPES) + r")\b|\"return_type\"\s*:"
    r"|\bFinish\s*\(|^\s*Action\s*:\s*Finish\b|\"name\"\s*:\s*\"Finish\"",
    re.MULTILINE,
)
SPECIAL_TOKEN = re.compile(r"<\|[a-z_]+(?:\|[a-z_]+)*\|>|\[/?TOOL_CALLS\]", re.IGNORECASE)
# A call written as text: an Action line (checked against the action names), an Action Input
# line, a tool-call tag, a {"name": ..., "arguments": ...} object.
ACTION_LINE = re.compile(r"^\s*Action\s*:\s*`?([A-Za-z_][\w.\-]*)`?\s*$", re.MULTILINE)
CALL_MARKUP = re.compile(
    r"^\s*Action Input\s*:|</?tool_call>|</?function_calls?>|\{\s*\"name\"\s*:\s*\"[^\"]+\"\s*,\s*\"(?:arguments|parameters)\"\s*:",
    re.MULTILINE,
)
_WRAPPING = " \t\r\n\"'`*"


def final_answers(sample: Sample) -> Iterator[tuple[int, str]]:
    """(index, text) of each assistant text without calls that ends the dialogue or comes before a user turn."""
    messages = sample.messages
    for i, message in enumerate(messages):
        if message.role != "assistant" or message.tool_calls or not (message.content or "").strip():
            continue
        if i == len(messages) - 1 or messages[i + 1].role == "user":
            yield i, message.content or ""


def _actions(sample: Sample) -> set[str]:
    return set(sample.functions) | set(sample.builtin_functions) | {FINISH, *RETURN_TYPES, *FINISH_PARAMETERS}


def leak(text: str, actions: set[str], text_calls_reported: bool) -> str | None:
    """What in a final answer's `text` is a control token, or None. With `text_calls_reported`
    (native calls), a call written as text that ``sample_call_format_mismatch`` reports is left to it."""
    bare = text.strip(_WRAPPING).rstrip(".").strip(_WRAPPING)
    if bare in actions:
        return f"the answer is only {bare!r}, the name of an action or of a Finish argument"
    found = FINISH_SYNTAX.search(text)
    if found:
        return f"Finish syntax {found.group().strip()!r}"
    found = SPECIAL_TOKEN.search(text)
    if found:
        return f"the special token {found.group()!r}"
    line = next((m for m in ACTION_LINE.finditer(text) if m.group(1) in actions), None)
    found = line or CALL_MARKUP.search(text)
    if found and not (text_calls_reported and TEXT_CALL.search(text)):
        return f"a call written as text {found.group().strip()[:60]!r}"
    return None


@rule("answer_control_token")
def control_token(sample: Sample) -> Iterator[Finding]:
    """A final answer is an action's name, or holds Finish syntax (give_answer, "return_type"), a
    chat template's special token or a call written as text (ReAct Action lines, a
    {"name", "arguments"} object)."""
    actions: set[str] | None = None
    native: bool | None = None
    for i, text in final_answers(sample):
        if actions is None:
            actions = _actions(sample)
            native = declared_format(sample) not in TEXT_FORMATS
        problem = leak(text, actions, bool(native))
        if problem:
            yield f"messages[{i}].content", f"the final answer holds control syntax, not words for the user: {problem}"
