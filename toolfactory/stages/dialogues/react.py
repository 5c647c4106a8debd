"""ToolAlpaca's assistant agent: a ReAct agent (§3.2, Appendix A Fig. 10).

The assistant gets the paper's prompt (answer with the tools, the user sees neither them nor
their use, put everything in the Final Answer, do not make up any information, ask for missing
required values with ``getDetails``) and writes Thought / Action / Action Input, reads the
Observation, and ends with a Thought and a ``Final Answer``. The request goes through the
gateway's text mode in the ``react`` call format (:mod:`toolfactory.llm.text_tools`), so the
functions are described in the system prompt and the Actions come back as calls.

What is stored is the canonical record, the same as with native calling
(``dialogues.assistant_format: native``):

* an Action turn: an assistant message whose text is its Thought (as :mod:`toolfactory.render`
  writes a react turn) and whose calls are the Actions;
* the last turn: the Final Answer as the message's text, the Thought before it in
  ``reasoning`` (exports leave it out, as they do any reasoning);
* a ``getDetails`` Action: the question as the assistant's text (its Thought in ``reasoning``)
  and the user agent's reply (Fig. 9) as the next user turn — not as a call. ``getDetails`` is
  not a function of the API: a record that listed it would teach every export format a function
  that exists nowhere, and would differ from the same dialogue made with native calls, where
  the assistant asks in text. A question followed by the user's answer is how the record already
  shows "ask for the missing value" (the dialogue's ``missing_params`` mode); rendering the record
  back to ReAct for ToolAlpaca's format is the exporter's concern.

:class:`ReactDialogue` is this shape's driver in the simulation (:mod:`.simulation`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from toolfactory.models import Function, Message, Task, ToolCall
from toolfactory.stages.base import ShardContext
from toolfactory.stages.dialogues.agents import user_details
from toolfactory.stages.dialogues.assistant import wire
from toolfactory.stages.dialogues.drivers import DialogueResult
from toolfactory.stages.dialogues.execution import DialogueExecution
from toolfactory.stages.dialogues.simulation import Simulation

ASK_USER = "getDetails"
ASK_USER_FUNCTION = Function(
    name=ASK_USER,
    description="Ask the user for required information that is missing from the request; the answer is the user's reply.",
    parameters={"type": "object", "properties": {"Question": {"type": "string", "description": "The question to ask the user"}},
                "required": ["Question"]},
)

ASSISTANT_PROMPT = """\
Your task is to answer the user's question using available tools. The user cannot see or use the
tools themselves, nor can they know the process of your tool usage. Provide all necessary
information in the "Final Answer" field. Do not make up any information. If required parameters
are missing, use the "getDetails" tool to ask the user for them.
Use the following format:
Question: the input question you must answer
Thought: you should always think about what to do
Action: the action to take, should be one of [{names}].
Action Input: the input to the action, must be in JSON format. All of the action input must be
realistic and from the user.
Observation: the result of the action
... (this Thought/Action/Action Input/Observation can repeat N times)
Thought: Summarize the information gathered and the reasoning behind your final answer.
Final Answer: Provide a user-friendly and detailed answer to the original input question that
summarizes all relevant information from the Thought/Action/Action Input/Observation sequences.
The user's messages are the Question."""

_FINAL = re.compile(r"^[ \t]*Final Answer[ \t]*:[ \t]*", re.MULTILINE)
_THOUGHT = re.compile(r"^[ \t]*Thought[ \t]*:[ \t]*")


@dataclass
class ReactStep:
    """One assistant step: its canonical message, and the question it asks the user through
    getDetails (None when it does not)."""

    message: Message
    asks: str | None = None


def _thought(text: str) -> str:
    return _THOUGHT.sub("", text.strip(), count=1).strip()


def split_final(text: str) -> tuple[str | None, str]:
    """(the Thought before the Final Answer or None, the answer) of a turn without an Action; a
    turn without the label is all answer (a model that forgot it still answered)."""
    found = _FINAL.search(text)
    if found is None:
        return None, _thought(text)
    return _thought(text[: found.start()]) or None, text[found.end():].strip()


async def react_step(messages: list[Message], functions: list[Function], ctx: ShardContext) -> ReactStep:
    """The assistant's next step on the conversation `messages` (its own system message is
    replaced by the paper's prompt)."""
    offered = [fn.openai_tool() for fn in [*functions, ASK_USER_FUNCTION]]
    names = ", ".join(fn.name for fn in [*functions, ASK_USER_FUNCTION])
    history = [m for m in messages if m.role != "system"]
    context = [{"role": "system", "content": ASSISTANT_PROMPT.format(names=names)}, *wire(history)]
    reply = await ctx.gateway.chat("assistant", context, tools=offered, tool_choice="auto", call_format="react")
    text = reply.get("content") or ""
    calls = [ToolCall(id=c.get("id") or f"call_{i}", name=c["function"]["name"], arguments=c["function"].get("arguments") or "")
             for i, c in enumerate(reply.get("tool_calls") or [])]
    thought = _thought(text) or None
    asked = [call for call in calls if call.name == ASK_USER]
    if asked:
        # The model asks before acting: the other Actions of the turn wait for the answer.
        question = _question(asked[0].arguments) or thought or "Could you give me the details I need?"
        return ReactStep(Message(role="assistant", content=question, reasoning=thought), asks=question)
    if calls:
        return ReactStep(Message(role="assistant", content=thought, tool_calls=calls))
    reasoning, answer = split_final(text)
    return ReactStep(Message(role="assistant", content=answer or None, reasoning=reasoning))


def _question(arguments: str) -> str | None:
    try:
        values: Any = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return arguments.strip() or None
    if isinstance(values, dict):
        texts = [str(v) for v in values.values() if isinstance(v, str) and v.strip()]
        return texts[0] if texts else None
    return None


class ReactDialogue:
    """The ReAct shape of the simulation (toolalpaca's default, ``dialogues.assistant_format:
    react``): per user turn, Action steps answered by the tool executor until a Final Answer; a
    ``getDetails`` question is answered by the user agent once per user turn (a second one ends
    the turn)."""

    async def play(self, task: Task, ctx: ShardContext, live: DialogueExecution | None) -> DialogueResult:
        return await Simulation(task, ctx, live).run(self._user_turn)

    @staticmethod
    async def _user_turn(dialogue: Simulation) -> bool:
        asked = False
        for _ in range(dialogue.settings.max_steps):
            step = await react_step(dialogue.messages, dialogue.functions, dialogue.ctx)
            dialogue.messages.append(step.message)
            if step.asks is not None:
                if asked:
                    break
                dialogue.notes.asked(len(dialogue.messages) - 1)
                # getDetails: the user agent answers the question (Fig. 9).
                dialogue.messages.append(Message(role="user", content=await user_details(dialogue.messages, dialogue.ctx)))
                asked = True
                continue
            if not step.message.tool_calls:
                break  # the Final Answer
            await dialogue.answer(step.message)
        return False
