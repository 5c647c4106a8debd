"""The reward of a trajectory: the verifier's execution verdict (APIGen-MT's and BFCL's state
checks, :mod:`toolfactory.stages.verify.execution`).

The trajectory becomes a dialogue whose ``generation["execution"]`` holds the calls the episode
ran and the task's ``target_state``. The execution layer replays those calls on fresh sessions
of the task's sources and judges the replay with the ``exec_*`` rules: the final state of every
source the task names must equal its target, and a call to a deterministic tool must give the
result the episode saw again. No failed verdict scores 1.0; any scores 0.0, and the codes say why.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolfactory.executable.session import CallResult
from toolfactory.models import Dialogue, Function, Message, ToolCall
from toolfactory.rl.tasks import Task
from toolfactory.stages.verify.execution import EXECUTION, ExecutionLayer


@dataclass(frozen=True)
class Score:
    reward: float
    codes: list[str] = field(default_factory=list)
    """The ``exec_*`` reason codes of the failed verdicts (empty when the reward is 1.0)."""


@dataclass
class Trajectory:
    """What the policy and the sources said in one rollout, in order."""

    messages: list[Message] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    """The calls that ran (:attr:`toolfactory.rl.episode.Episode.calls`)."""

    def user(self, content: str) -> None:
        self.messages.append(Message(role="user", content=content))

    def assistant(self, content: str | None, calls: Sequence[tuple[str, str, str]] = ()) -> None:
        """An assistant turn with its tool calls as (id, name, raw JSON arguments)."""
        tool_calls = [ToolCall(id=i, name=n, arguments=a) for i, n, a in calls] or None
        self.messages.append(Message(role="assistant", content=content, tool_calls=tool_calls))

    def tool(self, call_id: str, name: str, result: CallResult | str) -> None:
        content = result.content if isinstance(result, CallResult) else result
        self.messages.append(Message(role="tool", tool_call_id=call_id, name=name, content=content))


def dialogue_of(task: Task, trajectory: Trajectory) -> Dialogue:
    """`trajectory` as a record the execution layer replays against `task`'s target state."""
    messages = ([Message(role="system", content=task.system)] if task.system else []) + trajectory.messages
    return Dialogue(id=task.id, task_id=task.id, tools=[Function.model_validate(t["function"]) for t in task.tools],
                    messages=messages,
                    generation={EXECUTION: {"calls": trajectory.calls, "target_state": json.loads(json.dumps(task.target_state))}})


async def score(task: Task, trajectory: Trajectory) -> Score:
    """The execution verdict on `trajectory` as a reward (see the module doc)."""
    layer = ExecutionLayer(task.sources())
    dialogue = dialogue_of(task, trajectory)
    if not trajectory.calls and not task.target_state:
        return Score(1.0 if not task.ground_truth else 0.0, [] if not task.ground_truth else ["no_call"])
    codes = sorted({v.code for v in await layer.verdicts(dialogue)})
    return Score(0.0 if codes else 1.0, codes)
