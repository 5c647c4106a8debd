"""ToolLLM's ``Finish`` ending (ToolLLM §2.3), read back into a closed dialogue.

A ToolLLM path ends with the assistant's call ``Finish(return_type, final_answer)``: ToolBench
trains on that call and never answers it, and the ``openai`` and ``toolbench`` exports write a
path the same way (:func:`toolfactory.export.turns.finished_path`). A canonical record ends with
the assistant's answer, so a reader closes such a path as ToolBench's environment does: the
call gets the observation the environment gives (``{"response":"successfully giving the final
answer."}``, as the DFSDT trees record it) and, for ``give_answer``, the ``final_answer`` becomes
the closing assistant turn — the only part ToolLLM shows the user. One function for every
reader, so a path reads back the same whichever format carried it.
"""

from __future__ import annotations

import json
from typing import Any

from toolfactory.models import Message
from toolfactory.definitions.finish import FINISH_ANSWERED

FINISH = "Finish"
GIVE_ANSWER = "give_answer"


def finish_arguments(arguments: str) -> dict[str, Any]:
    """The arguments of a Finish call as an object ({} when they are not one)."""
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def closed_finish(messages: list[Message]) -> list[Message]:
    """`messages` closed as ToolBench's environment closes a path (see the module doc) when they
    end with an assistant turn that calls ``Finish`` (and the responses to that turn's other
    calls) and the Finish call has no response; else unchanged."""
    end = len(messages)
    while end and messages[end - 1].role == "tool":
        end -= 1
    last = messages[end - 1] if end else None
    if last is None or last.role != "assistant":
        return messages
    finishes = [call for call in last.tool_calls or [] if call.name == FINISH]
    answered = {m.tool_call_id for m in messages[end:]}
    if not finishes or finishes[-1].id in answered:
        return messages
    finish = finishes[-1]
    closed = [*messages, Message(role="tool", tool_call_id=finish.id, name=FINISH, content=FINISH_ANSWERED)]
    arguments = finish_arguments(finish.arguments)
    if arguments.get("return_type") == GIVE_ANSWER:
        closed.append(Message(role="assistant", content=str(arguments.get("final_answer", ""))))
    return closed
