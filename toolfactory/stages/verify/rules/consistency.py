"""Data sample consistency (ToolACE Table 6): calls, responses and roles fit together.

Calls and tool responses are paired by id, first in first out per id (so a duplicated id whose
calls are each answered in order is *only* ``sample_duplicate_call_id``). Each fault maps to one
code:

* ``sample_unanswered_call``: a call without a tool response after it, or a tool response that
  answers no open call (unknown id, or a second response to an answered call);
* ``sample_response_name_mismatch``: a response paired with a call carries another function
  name (a response without ``name`` is not a mismatch);
* ``sample_duplicate_call_id``: two calls share an id;
* ``sample_role_order``: a system message anywhere but first; a first non-system message that
  is not the user's (only checked when the dialogue has a user turn at all, a missing user turn
  being ``dialogue_missing_field``); a tool message not directly after an assistant turn with
  calls or another tool message; two consecutive user turns. A user turn after tool messages is
  allowed (ToolLLM's DFSDT paths interject one), as are consecutive assistant turns;
* ``sample_call_after_answer``: an assistant turn with calls after an assistant text turn without
  calls, with no user turn between. Under chat function calling an assistant turn that does not
  call ends the model's turn; the next message is the user's. Whatever the text says (an answer,
  or a thought stored apart from its call), a model could not have produced that order, so it is
  decided by the structure, never by the wording. (ToolLLM's thought and its call are one
  assistant message.) Not applied when
  ToolLLM's ``Finish`` is offered: there only ``Finish`` ends the task, every text turn is a
  thought (ToolBench's released paths have such a thought before their ``Finish`` call).
* ``sample_call_format_mismatch``: calls not written in the format the system prompt declares.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Iterator

from toolfactory.stages.verify.rules.registry import Finding, Sample, rule


def _pairing(sample: Sample) -> dict[str, list[Finding]]:
    unanswered: list[Finding] = []
    mismatched: list[Finding] = []
    pending: dict[str, deque[tuple[str, str]]] = {}
    calls = iter(sample.calls)
    next_call = next(calls, None)
    for i, message in enumerate(sample.messages):
        if message.role == "tool":
            queue = pending.get(message.tool_call_id or "")
            if not queue:
                unanswered.append((f"messages[{i}]", f"tool response to no open call (id {message.tool_call_id!r})"))
            else:
                call_path, name = queue.popleft()
                if message.name and message.name != name:
                    mismatched.append((f"messages[{i}].name", f"response names {message.name!r}, the call at {call_path} was to {name!r}"))
        while next_call is not None and next_call.message_index == i:
            pending.setdefault(next_call.call.id, deque()).append((next_call.path, next_call.name))
            next_call = next(calls, None)
    for queue in pending.values():
        for call_path, name in queue:
            unanswered.append((call_path, f"call to {name!r} has no tool response"))
    return {"unanswered": unanswered, "mismatched": mismatched}


@rule("sample_unanswered_call")
def unanswered_call(sample: Sample) -> list[Finding]:
    """Each call is answered by exactly one tool message after it, and each tool message answers one call."""
    if not sample.calls and not any(m.role == "tool" for m in sample.messages):
        return []
    return sample.memo("pairing", _pairing)["unanswered"]


@rule("sample_response_name_mismatch")
def response_name_mismatch(sample: Sample) -> list[Finding]:
    """A tool response's name differs from the name of the call it answers."""
    if not sample.calls:
        return []
    return sample.memo("pairing", _pairing)["mismatched"]


@rule("sample_duplicate_call_id")
def duplicate_call_id(sample: Sample) -> Iterator[Finding]:
    """Two tool calls share an id."""
    seen: dict[str, str] = {}
    for call in sample.calls:
        first = seen.setdefault(call.call.id, call.path)
        if first != call.path:
            yield call.path + ".id", f"call id {call.call.id!r} is already used at {first}"


@rule("sample_role_order")
def role_order(sample: Sample) -> Iterator[Finding]:
    """System first only; the user speaks first; tool messages follow calls; no two user turns in a row."""
    messages = sample.messages
    has_user = False
    first_other: int | None = None
    flagged: set[int] = set()
    for i, message in enumerate(messages):
        role = message.role
        if role == "system":
            if i:
                yield f"messages[{i}]", "a system message is only allowed first"
            continue
        if first_other is None:
            first_other = i
        previous = messages[i - 1] if i else None
        if role == "user":
            has_user = True
            if previous is not None and previous.role == "user":
                yield f"messages[{i}]", "two consecutive user turns"
        elif role == "tool":
            if previous is None or not (previous.role == "tool" or (previous.role == "assistant" and previous.tool_calls)):
                after = previous.role if previous is not None else "nothing"
                flagged.add(i)
                yield f"messages[{i}]", f"a tool message must follow an assistant call or another tool message, not {after}"
    if has_user and first_other is not None and messages[first_other].role != "user" and first_other not in flagged:
        yield f"messages[{first_other}]", f"the first non-system message is {messages[first_other].role!r}, not the user's"


@rule("sample_call_after_answer")
def call_after_answer(sample: Sample) -> Iterator[Finding]:
    """An assistant call after an assistant answer (text that ends the task, no call) with no user turn between."""
    if "Finish" in sample.functions:
        return
    answered: int | None = None
    for i, message in enumerate(sample.messages):
        if message.role == "user":
            answered = None
        elif message.role == "assistant":
            if message.tool_calls:
                if answered is not None:
                    yield f"messages[{i}]", (f"a call after the assistant's answer at messages[{answered}] without a user turn: "
                                             "a model's turn ends when it answers without a call")
                    answered = None
            elif (message.content or "").strip():
                answered = i


# -- call format -----------------------------------------------------------------------------

# A system prompt may declare how calls are written ("Function call format: python"); without a
# declaration, calls are native function calls (OpenAI `tool_calls`).
DECLARED_FORMAT = re.compile(r"(?:function|tool)[ -]call format\s*:\s*([a-z_]+)", re.IGNORECASE)
TEXT_FORMATS = frozenset({"json", "python", "react", "xml"})
# Calls written as text in an assistant message, in each text format a model may fall back to.
TEXT_CALL = re.compile(
    r"^\s*Action\s*:\s*\S+\s*\n\s*Action Input\s*:"  # ReAct
    r"|<tool_call>|<function[=\s>]"  # XML tags
    r'|^\s*\[\s*[A-Za-z_][\w.]*\(.*\)\s*\]\s*$'  # Python-call list: [f(a=1)]
    r'|^\s*[\[{]\s*\{?\s*"name"\s*:\s*"[^"]+"\s*,\s*"(?:arguments|parameters)"\s*:',  # JSON call objects
    re.MULTILINE | re.DOTALL,
)


def declared_format(sample: Sample) -> str:
    system = next((m.content or "" for m in sample.messages if m.role == "system"), "")
    found = DECLARED_FORMAT.search(system)
    return found.group(1).lower() if found else "openai"


@rule("sample_call_format_mismatch")
def call_format_mismatch(sample: Sample) -> Iterator[Finding]:
    """Calls are not written the way the system prompt declares: text-written calls where native
    function calling is in use, or native calls where a text format is declared."""
    declared = declared_format(sample)
    for i, message in enumerate(sample.messages):
        if message.role != "assistant":
            continue
        if declared in TEXT_FORMATS and message.tool_calls:
            yield f"messages[{i}].tool_calls", f"native tool calls, but the system prompt declares the {declared} format"
        elif declared not in TEXT_FORMATS and message.content and TEXT_CALL.search(message.content):
            yield f"messages[{i}].content", "a call written as text, but calls are native function calls here"
