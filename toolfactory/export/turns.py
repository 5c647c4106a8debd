"""Reading the parts of a Dialogue that the formats are built from: the system prompt, the user
request, the calls, their responses and the final answer.

Several formats hold less than a dialogue (xLAM and BFCL one request and the calls that serve
it; ToolAlpaca one request and its steps), so "single turn" and "calls made in one step" are
defined once, here, for all of them.
"""

from __future__ import annotations

import json
from typing import Any

from toolfactory.export.base import (
    ARGUMENTS_NOT_JSON,
    CALLS_IN_SEVERAL_TURNS,
    CALLS_NOT_IN_FIRST_TURN,
    FINISH_NOT_LAST,
    NO_FINAL_ANSWER,
    NOT_SINGLE_TURN,
    Skip,
)
from toolfactory.models import Dialogue, Function, Message, ToolCall

FINISH = "Finish"  # ToolLLM's terminal function (ToolLLM §2.3)


def system_prompt(dialogue: Dialogue) -> str | None:
    """The leading system message(s), joined; None when the dialogue has none."""
    parts = []
    for message in dialogue.messages:
        if message.role != "system":
            break
        parts.append(message.content or "")
    return "\n\n".join(parts) if parts else None


def body(dialogue: Dialogue) -> list[Message]:
    """The messages after the leading system message(s)."""
    start = 0
    while start < len(dialogue.messages) and dialogue.messages[start].role == "system":
        start += 1
    return dialogue.messages[start:]


def single_request(dialogue: Dialogue) -> str:
    """The text of the only user turn, or :class:`Skip` (``not_single_turn``)."""
    users = [m for m in dialogue.messages if m.role == "user"]
    if len(users) != 1:
        raise Skip(NOT_SINGLE_TURN, f"{len(users)} user turns")
    return users[0].content or ""


def one_step_calls(dialogue: Dialogue) -> list[ToolCall]:
    """Every call of the dialogue when they are all made in its first assistant turn (one call, or
    parallel calls): what a format of one request and the calls that answer it (xLAM, BFCL) can
    hold whole. Calls in a later turn as well (a call that uses an earlier call's response) are
    :class:`Skip` (``calls_in_several_turns``): keeping the first turn's calls alone would teach
    an incomplete answer. A first turn without calls followed by a turn with calls is
    :class:`Skip` (``calls_not_in_first_turn``): an empty answer would teach the model not to call."""
    assistants = [m for m in dialogue.messages if m.role == "assistant"]
    if not assistants:
        return []
    if not assistants[0].tool_calls and any(m.tool_calls for m in assistants[1:]):
        raise Skip(CALLS_NOT_IN_FIRST_TURN, "the first assistant turn answers in text")
    later = sum(1 for m in assistants[1:] if m.tool_calls)
    if later:
        raise Skip(CALLS_IN_SEVERAL_TURNS, f"{later} assistant turn(s) after the first make calls")
    return list(assistants[0].tool_calls or [])


def all_calls(dialogue: Dialogue) -> list[ToolCall]:
    return [call for message in dialogue.messages for call in message.tool_calls or []]


def arguments_object(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as a JSON object, or :class:`Skip` (``arguments_not_json``)."""
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise Skip(ARGUMENTS_NOT_JSON, f"{call.name}: {exc.msg} (column {exc.colno})") from None
    if not isinstance(value, dict):
        raise Skip(ARGUMENTS_NOT_JSON, f"{call.name}: a {type(value).__name__}, not an object")
    return value


def responses(dialogue: Dialogue) -> dict[str, Message]:
    """Tool messages by the id of the call they answer (the first answer of an id wins)."""
    out: dict[str, Message] = {}
    for message in dialogue.messages:
        if message.role == "tool" and message.tool_call_id is not None:
            out.setdefault(message.tool_call_id, message)
    return out


def final_answer(dialogue: Dialogue) -> str | None:
    """The last message's text when it is an assistant answer (no calls); else None."""
    last = dialogue.messages[-1] if dialogue.messages else None
    if last is None or last.role != "assistant" or last.tool_calls:
        return None
    return last.content


def function_dict(function: Function) -> dict[str, Any]:
    """A function as ``{name, description, parameters}``, the shape most formats list."""
    return {"name": function.name, "description": function.description, "parameters": function.parameters}


def uses_finish(dialogue: Dialogue) -> bool:
    """Whether the dialogue follows ToolLLM's Finish convention: it offers or calls ``Finish``, or
    it was found by a ToolLLM solution search (whose prompt tells the model to end with it)."""
    return (any(f.name == FINISH for f in dialogue.tools) or any(c.name == FINISH for c in all_calls(dialogue))
            or isinstance(dialogue.generation.get("search"), dict))


def finished_path(dialogue: Dialogue) -> tuple[list[Message], ToolCall]:
    """The path as ToolLLM stores it, ending with the ``Finish`` call, and that call.

    A dialogue that calls ``Finish`` keeps everything up to that call and the responses to the
    other calls of its turn; Finish's own response and a closing answer after it are dropped (the
    answer is Finish's ``final_answer``). A dialogue that ends with a plain answer has that answer
    turned into ``Finish(give_answer, final_answer=<answer>)`` (its reasoning kept on the call
    turn). :class:`Skip`: ``no_final_answer`` when there is neither, ``finish_not_last`` when the
    dialogue goes on after its Finish call."""
    messages = dialogue.messages
    ends = [i for i, m in enumerate(messages) if m.role == "assistant" and any(c.name == FINISH for c in m.tool_calls or [])]
    if ends:
        last = ends[-1]
        tail = messages[last + 1:]
        closing = tail[-1:] if tail and tail[-1].role == "assistant" and not tail[-1].tool_calls else []
        if any(m.role != "tool" for m in tail[: len(tail) - len(closing)]):
            raise Skip(FINISH_NOT_LAST, "messages other than responses follow the Finish call")
        finish = [c for c in messages[last].tool_calls or [] if c.name == FINISH][-1]
        kept = [m for m in tail if m.role == "tool" and m.tool_call_id != finish.id]
        return [*messages[: last + 1], *kept], finish
    answer = final_answer(dialogue)
    if answer is None:
        raise Skip(NO_FINAL_ANSWER, f"the dialogue ends with a {messages[-1].role if messages else 'no'} message")
    finish = ToolCall(id="finish", name=FINISH, arguments=json.dumps({"return_type": "give_answer", "final_answer": answer}, ensure_ascii=False))
    return [*messages[:-1], Message(role="assistant", tool_calls=[finish], reasoning=messages[-1].reasoning)], finish
