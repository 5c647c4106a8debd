"""The native-calls shape of the simulation (ToolACE §2.2 Algorithm 1; ToolAlpaca with
``dialogues.assistant_format: native``).

The assistant answers with native function calls (:func:`~.assistant.act`), after formal thinking
and by self-consistency when the recipe asks for them. A turn that calls is answered by the tool
executor and the assistant goes on. A text turn before any call is read by the user agent (a
structured classification: asks for a missing value, declines, answers), which answers a question
with concrete values once per user turn. A task made for ``insufficient_info`` (ToolACE §2.2.1:
"the information is not enough to call a tool", one of its two non-tool cases) ends at the
assistant's question: asking is the turn's action.
"""

from __future__ import annotations

from toolfactory.models import Message, Task
from toolfactory.stages.base import ShardContext
from toolfactory.stages.dialogues.agents import TURN_KINDS, read_turn
from toolfactory.stages.dialogues.assistant import Disagreement, act
from toolfactory.stages.dialogues.drivers import DialogueResult
from toolfactory.stages.dialogues.execution import DialogueExecution
from toolfactory.stages.dialogues.simulation import Simulation

ASKS = TURN_KINDS[0]  # the user agent's reading of a turn that asks for a missing value


class NativeDialogue:
    """Native function calls; `think`: formal thinking before each decision, `samples`: the
    decision sampled up to that many times, the majority kept (self-consistency)."""

    def __init__(self, *, think: bool = False, samples: int = 1) -> None:
        self.think, self.samples = think, samples

    async def play(self, task: Task, ctx: ShardContext, live: DialogueExecution | None) -> DialogueResult:
        return await Simulation(task, ctx, live).run(self._user_turn)

    async def _user_turn(self, dialogue: Simulation) -> bool:
        messages, notes = dialogue.messages, dialogue.notes
        called = asked = False
        offered = [fn.openai_tool() for fn in dialogue.functions]
        for _ in range(dialogue.settings.max_steps):
            try:
                action = await act(messages, offered, dialogue.ctx, think=self.think, samples=self.samples)
            except Disagreement as failed:  # the record is lost: it still shows what it was
                failed.messages = list(messages)
                raise
            notes.decision_samples += action.samples
            notes.decision_samples_planned += self.samples
            messages.append(action.message)
            for other in action.outvoted:  # a sample the majority overruled: the rejected side of a step pair
                notes.alternatives.append({"at": len(messages) - 1, "kind": "outvoted", "message": other.model_dump(exclude_none=True)})
            if action.message.tool_calls:
                called = True
                await dialogue.answer(action.message)
                continue
            if called or asked:
                break
            kind, reply = await read_turn(messages, dialogue.ctx)
            if kind != ASKS:
                break
            turn = len(messages) - 1
            notes.asked(turn)
            if action.missing_values:
                notes.missing_values[str(turn)] = action.missing_values
            if dialogue.task.mode == "insufficient_info":
                return True  # the question is the dialogue's last turn
            if not reply.strip():
                break
            messages.append(Message(role="user", content=reply))
            asked = True
        return False
