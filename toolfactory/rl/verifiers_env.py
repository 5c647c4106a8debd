"""The tasks of a run as a `verifiers <https://github.com/PrimeIntellect-ai/verifiers>`_
environment (0.2): ``verifiers.load_environment("toolfactory.rl.verifiers_env", tasks=PATH)``.

Each task is a row of the environment's dataset (its first user turn as the prompt, its tools as
``info["tool_defs"]``). verifiers' own multi-turn rollout loop asks the policy through its client;
every tool call the policy makes runs on a real session of the task's source
(:class:`toolfactory.rl.episode.Episode`); when the policy answers without a call, the task's
next user turn follows, and after the last one the rollout ends. The rubric's one reward function
is the execution verdict (:func:`toolfactory.rl.reward.score`).

This is the only module that imports verifiers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import verifiers as vf
from datasets import Dataset

from toolfactory.rl.episode import Episode
from toolfactory.rl.reward import Trajectory, score
from toolfactory.rl.tasks import Task, read_tasks

EPISODE = "toolfactory_episode"
TURN = "toolfactory_turn"


def _text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) if isinstance(part, dict) else str(getattr(part, "text", "")) for part in content)


def trajectory_of(state: vf.State) -> Trajectory:
    """The rollout's messages after the system prompt, and the calls its episode ran."""
    out = Trajectory(calls=list(state[EPISODE].calls) if state.get(EPISODE) else [])
    names: dict[str, str] = {}
    for message in [*state["prompt"], *(state.get("completion") or [])]:
        if message.role == "user":
            out.user(_text(message.content) or "")
        elif message.role == "assistant":
            calls = [(c.id, c.name, c.arguments) for c in message.tool_calls or []]
            names.update({i: n for i, n, _ in calls})
            out.assistant(_text(message.content), calls)
        elif message.role == "tool":
            out.tool(message.tool_call_id, names.get(message.tool_call_id, ""), _text(message.content) or "")
    return out


async def execution_reward(state: vf.State, **_: Any) -> float:
    """1.0 when the execution layer passes the rollout (module doc), else 0.0."""
    task: Task = state[EPISODE].task
    found = await score(task, trajectory_of(state))
    state["toolfactory_codes"] = found.codes
    state["toolfactory_paths"] = found.paths
    return found.reward


class TasksEnv(vf.MultiTurnEnv):
    """Verifiable tool-use tasks whose calls run on their real sources (module doc)."""

    def __init__(self, tasks: list[Task], max_turns: int = 40, **kwargs: Any) -> None:
        self.tasks = {task.id: task for task in tasks}
        rows = [{"prompt": self._prompt(task), "answer": "",
                 "info": json.dumps({"task_id": task.id, "tool_defs": [t["function"] for t in task.tools]})}
                for task in tasks]
        dataset = Dataset.from_list(rows)
        super().__init__(dataset=dataset, eval_dataset=dataset, rubric=vf.Rubric(funcs=[execution_reward]),
                         max_turns=max_turns, **kwargs)

    @staticmethod
    def _prompt(task: Task) -> list[dict[str, str]]:
        system = [{"role": "system", "content": task.system}] if task.system else []
        return [*system, {"role": "user", "content": task.user_turns[0] if task.user_turns else ""}]

    async def setup_state(self, state: vf.State) -> vf.State:
        info = state["info"] if isinstance(state["info"], dict) else json.loads(state["info"])
        state[EPISODE] = Episode(self.tasks[info["task_id"]])
        state[TURN] = 0
        return state

    @vf.stop
    async def last_turn_answered(self, state: vf.State) -> bool:
        """The policy answered the task's last user turn without calling a tool."""
        if not state["trajectory"] or state.get(EPISODE) is None:
            return False
        last = state["trajectory"][-1]["completion"][-1]
        episode: Episode = state[EPISODE]
        return last.role == "assistant" and not last.tool_calls and episode.turn + 1 >= len(episode.task.user_turns)

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        last = messages[-1]
        episode: Episode = state[EPISODE]
        if last.role == "assistant" and last.tool_calls:
            out: list[vf.Message] = []
            for call in last.tool_calls:
                result = await episode.call(call.name, call.arguments)
                out.append(vf.ToolMessage(tool_call_id=call.id, content=result.content))
            return out
        # Answered without a call: the task's next user turn, which the calls from here on answer.
        content = episode.next_turn()
        state[TURN] = episode.turn
        return [vf.UserMessage(content=content or "")]

    @vf.cleanup
    async def close_sessions(self, state: vf.State) -> None:
        episode = state.get(EPISODE)
        if episode is not None:
            await episode.close()


def load_environment(tasks: str | Path | list[dict[str, Any]], max_turns: int = 40, **kwargs: Any) -> vf.Environment:
    """The environment of `tasks`: a ``tasks`` JSONL file, a ``tasks`` export folder, or the rows."""
    loaded = read_tasks(tasks) if isinstance(tasks, (str, Path)) else [Task.from_json(row) for row in tasks]
    return TasksEnv(loaded, max_turns=max_turns, **kwargs)
