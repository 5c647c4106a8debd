"""The reward of a trajectory: the verifier's execution verdict (APIGen-MT's and BFCL's state
checks, :mod:`toolfactory.stages.verify.execution`).

The trajectory becomes a dialogue whose ``generation["execution"]`` holds the calls the episode
ran (each with the user turn it answers) and the task's ``target_state`` and, where the task has
them, its ``target_turn_states``. The execution layer replays those calls on fresh sessions of
the task's sources and judges the replay with the ``exec_*`` rules: the state of every source the
task names must equal its target at the end and after each user turn (BFCL's check: a file moved
a turn late, or a booking changed and then cancelled, may end in the right state by the wrong
path), and a call to a deterministic tool must give the result the episode saw again. No failed
verdict scores 1.0; any scores 0.0, and the codes say why (``exec_state_mismatch`` at
``generation.execution.target_turn_states.<turn>.<source>`` for a turn's state).

The layer reads a call's turn from the user messages before it, so the trajectory must hold the
user messages where the policy got them: :func:`dialogue_of` checks that they agree with the turn
the episode recorded for each call.
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
    paths: list[str] = field(default_factory=list)
    """Where the failed verdicts point, in the record :func:`dialogue_of` makes: a message's call,
    ``generation.execution.states.<source>`` for the final state, or
    ``generation.execution.target_turn_states.<turn>.<source>`` for the state after a user turn."""


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
    """`trajectory` as a record the execution layer replays against `task`'s target states."""
    _check_turns(task, trajectory)
    messages = ([Message(role="system", content=task.system)] if task.system else []) + trajectory.messages
    executed: dict[str, Any] = {"calls": trajectory.calls, "target_state": json.loads(json.dumps(task.target_state))}
    if task.target_turn_states is not None:
        executed["target_turn_states"] = json.loads(json.dumps(task.target_turn_states))
    return Dialogue(id=task.id, task_id=task.id, tools=[Function.model_validate(t["function"]) for t in task.tools],
                    messages=messages, generation={EXECUTION: executed})


def _check_turns(task: Task, trajectory: Trajectory) -> None:
    """Each call that ran follows as many user messages as the turn the episode recorded for it
    (see the module doc). The calls that ran are the messages' calls less those answered with an
    error without running, in the same order."""
    pending = [c for c in trajectory.calls if "turn" in c]
    users = 0
    for message in trajectory.messages:
        users += message.role == "user"
        for call in message.tool_calls or []:
            if pending and (pending[0].get("name"), pending[0].get("arguments")) == (call.name, call.arguments):
                ran = pending.pop(0)
                if int(ran["turn"]) != max(users - 1, 0):
                    raise ValueError(f"task {task.id}: call {call.name} ran in user turn {int(ran['turn']) + 1}, "
                                     f"but the trajectory holds {users} user messages before it")


async def score(task: Task, trajectory: Trajectory) -> Score:
    """The execution verdict on `trajectory` as a reward (see the module doc)."""
    layer = ExecutionLayer(task.sources())
    dialogue = dialogue_of(task, trajectory)
    if not trajectory.calls and not task.target_state:
        return Score(1.0 if not task.ground_truth else 0.0, [] if not task.ground_truth else ["no_call"])
    failed = await layer.verdicts(dialogue)
    codes = sorted({v.code for v in failed})
    return Score(0.0 if codes else 1.0, codes, sorted({v.path for v in failed if v.path}))
