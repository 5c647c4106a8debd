"""The record of a played task: the :class:`~toolfactory.models.Dialogue` the verify stage reads."""

from __future__ import annotations

from typing import Any

from toolfactory.models import Dialogue, Message, Task, ToolRef, stable_id
from toolfactory.stages.dialogues.modes import shown_mode


def dialogue_record(task: Task, messages: list[Message], generation: dict[str, Any] | None = None) -> Dialogue:
    """The record of `task`'s dialogue with `messages`, its shown mode read from them (and from
    `generation`'s clarification turns)."""
    dialogue = Dialogue(
        id=stable_id("dialogue", task.id),
        task_id=task.id,
        tools=[fn for tool in task.tools for fn in tool.functions],
        messages=messages,
        recipe=task.recipe,
        scenario=task.scenario,
        target_mode=task.mode,
        source_tools=[ToolRef(id=t.id, name=t.name, category=t.category, source=t.source) for t in task.tools],
        generation=generation or {},
    )
    dialogue.mode = shown_mode(dialogue)
    return dialogue
