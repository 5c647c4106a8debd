"""Dialogue drivers: one per shape of dialogue, and what each returns.

A recipe plays its tasks with a driver (:meth:`toolfactory.recipes.base.Recipe.driver`):

* :class:`~toolfactory.stages.dialogues.react.ReactDialogue`: ToolAlpaca's ReAct assistant in the
  multi-agent simulation;
* :class:`~toolfactory.stages.dialogues.native.NativeDialogue`: native function calls in the
  simulation, with ToolACE's formal thinking and self-consistency when asked for;
* :class:`~toolfactory.stages.dialogues.search_dialogue.SearchDialogue`: ToolLLM's solution-path
  search (DFSDT or ReAct) with its Finish function.

A driver is made once per shard and plays one task at a time: :func:`play` gives it a context
whose gateway counts the dialogue's LLM requests (:mod:`.counting`), and puts the count in the
:class:`DialogueResult` (or in the exception that loses the dialogue), so no driver counts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol

from toolfactory.models import Message, Task
from toolfactory.stages.base import ShardContext
from toolfactory.stages.dialogues.assistant import Disagreement
from toolfactory.stages.dialogues.counting import counted
from toolfactory.stages.dialogues.early import RejectedEarly
from toolfactory.stages.dialogues.execution import DialogueExecution


class Notes(Protocol):
    """How a dialogue was made, as the record's ``generation`` keeps it."""

    def generation(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Lost:
    """Why a finished dialogue is not kept (a search that found no answer): the stage rejects it."""

    reason: str
    detail: str


@dataclass
class DialogueResult:
    """One played task: its messages, the LLM requests they took (every agent's), and notes."""

    messages: list[Message]
    notes: Notes
    llm_calls: int = 0
    lost: Lost | None = None

    @property
    def generation(self) -> dict[str, Any]:
        return self.notes.generation()


class Driver(Protocol):
    """One shape of dialogue. `ctx` counts its requests; calls to tools of executable sources
    run on `live`. Raises :class:`~.early.RejectedEarly` when a turn makes the record one the
    verify stage rejects (``dialogues.reject_early``), :class:`~.assistant.Disagreement` when no
    two samples of a decision agree (``on_disagreement: drop``); both carry the messages so far."""

    async def play(self, task: Task, ctx: ShardContext, live: DialogueExecution | None) -> DialogueResult: ...


async def play(driver: Driver, task: Task, ctx: ShardContext, live: DialogueExecution | None = None) -> DialogueResult:
    """`driver`'s dialogue for `task`, with the LLM requests it took (also in a lost dialogue's
    exception, so the rejected record shows what it cost)."""
    dialogue_ctx, gateway = counted(ctx)
    try:
        result = await driver.play(task, dialogue_ctx, live)
    except (RejectedEarly, Disagreement) as lost:
        lost.llm_calls = gateway.calls
        raise
    return dataclasses.replace(result, llm_calls=gateway.calls)
