"""The tasks of a run as a `skyrl-gym <https://pypi.org/project/skyrl-gym/>`_ environment (0.4):
``skyrl_gym.make("toolfactory_tasks", env_config={}, extras={"task": <a task>})``.

skyrl-gym is text in, text out: the environment gets the policy's whole reply as a string.
Calls are read from it as Hermes ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` blocks
(what a chat template of the Qwen/Hermes family makes the model write), each runs on a real
session of the task's source (:class:`toolfactory.rl.episode.Episode`), and the results come back
as one user message of ``<tool_response>`` blocks. A reply without a call ends the user turn: the
task's next user turn follows, or, after the last, the episode is done and the step's reward is
the execution verdict (:func:`toolfactory.rl.reward.score`); every earlier step has reward 0.

skyrl-gym has no rollout loop: SkyRL's trainer (``SkyRLGymGenerator.agent_loop``) makes the
environment from a dataset row (``prompt``, ``env_class``, the other columns as ``extras``),
calls ``init(prompt)``, then alternates generation and ``step(reply)`` until ``done``, and
``close()``. :func:`rollout` does exactly that against an OpenAI-compatible endpoint, for an
evaluation or a test without SkyRL's trainer (which needs torch and an inference engine).

This is the only module that imports skyrl_gym.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput, ConversationType
from skyrl_gym.envs.registration import register, registry

from toolfactory.rl.episode import Episode
from toolfactory.rl.reward import Score, Trajectory, score
from toolfactory.rl.tasks import Task

ENV_ID = "toolfactory_tasks"
CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
STEP_TIMEOUT = 600.0  # seconds one step's calls (or the final replay) may take
T = TypeVar("T")


class _Loop:
    """An event loop of its own, in a thread: skyrl-gym's ``step`` is synchronous, and SkyRL's
    trainer calls it from an executor thread, while sessions are asynchronous."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="toolfactory-skyrl-env", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(STEP_TIMEOUT)

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=30)
        if not self.loop.is_running():
            self.loop.close()


def parse_calls(reply: str) -> list[tuple[str, str]] | None:
    """The (name, raw JSON arguments) of each ``<tool_call>`` block of `reply`; a block that is no
    JSON object with a name is kept with an empty name, to be answered with an error."""
    blocks = CALL.findall(reply or "")
    if not blocks:
        return None
    out: list[tuple[str, str]] = []
    for block in blocks:
        try:
            call = json.loads(block)
        except json.JSONDecodeError:
            out.append(("", block))
            continue
        if not isinstance(call, dict):
            out.append(("", block))
            continue
        arguments = call.get("arguments", {})
        out.append((str(call.get("name") or ""), arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)))
    return out


class TasksTextEnv(BaseTextEnv):
    """One verifiable task (module doc); ``extras["task"]`` is the task as a dict or JSON text."""

    def __init__(self, env_config: Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        extras = dict(extras or {})
        raw = extras.get("task")
        if raw is None:
            raise ValueError("extras['task'] is required: one verifiable task (toolfactory's tasks export)")
        self.task = Task.from_json(json.loads(raw) if isinstance(raw, str) else raw)
        self.max_turns = int(extras.get("max_turns") or (env_config or {}).get("max_turns") or 40)
        self.trajectory = Trajectory()
        self.score: Score | None = None
        self._loop = _Loop()
        self._episode = Episode(self.task)

    def init(self, prompt: ConversationType) -> tuple[ConversationType, dict[str, Any]]:
        for message in prompt:
            if message.get("role") == "user":
                self.trajectory.user(str(message.get("content") or ""))
        return prompt, {"task_id": self.task.id}

    async def _run(self, calls: list[tuple[str, str]]) -> list[str]:
        out = []
        for n, (name, arguments) in enumerate(calls):
            call_id = f"call_{self.turns}_{n}"
            result = await self._episode.call(name, arguments)
            self.trajectory.tool(call_id, name, result)
            out.append(f"<tool_response>\n{result.content}\n</tool_response>")
        return out

    def _done(self) -> BaseTextEnvStepOutput:
        self.score = self._loop.run(score(self.task, self.trajectory))
        return BaseTextEnvStepOutput(observations=[], reward=self.score.reward, done=True,
                                     metadata={"codes": self.score.codes, "paths": self.score.paths,
                                               "calls": len(self._episode.calls)})

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        calls = parse_calls(action)
        self.trajectory.assistant(CALL.sub("", action).strip() or None if calls else action,
                                  [(f"call_{self.turns}_{n}", name, args) for n, (name, args) in enumerate(calls or [])])
        self.trajectory.calls = self._episode.calls
        if calls:
            responses = self._loop.run(self._run(calls))
            if self.turns >= self.max_turns:
                return self._done()
            return BaseTextEnvStepOutput(observations=[{"role": "user", "content": "\n".join(responses)}],
                                         reward=0.0, done=False, metadata={})
        content = self._episode.next_turn()  # the calls from here on answer the next user turn
        if content is None or self.turns >= self.max_turns:
            return self._done()
        self.trajectory.user(content)
        return BaseTextEnvStepOutput(observations=[{"role": "user", "content": content}], reward=0.0, done=False, metadata={})

    def get_metrics(self) -> dict[str, Any]:
        return {"calls": len(self._episode.calls), "reward": self.score.reward if self.score else 0.0}

    def close(self) -> None:
        if self._loop.loop.is_closed():
            return
        self._loop.run(self._episode.close())
        self._loop.stop()


def register_environment() -> None:
    """Register :class:`TasksTextEnv` as ``toolfactory_tasks`` (once)."""
    if ENV_ID not in registry:
        register(id=ENV_ID, entry_point="toolfactory.rl.skyrl_env:TasksTextEnv")


register_environment()


def dataset_row(task: Task) -> dict[str, Any]:
    """The task as a row of SkyRL's prompt dataset: ``prompt``, ``env_class``, and the task as an
    extra (JSON text, so that the row stores in Parquet)."""
    system = [{"role": "system", "content": task.system}] if task.system else []
    return {"prompt": [*system, {"role": "user", "content": task.user_turns[0] if task.user_turns else ""}],
            "env_class": ENV_ID, "task": json.dumps(task.to_json(), ensure_ascii=False)}


@dataclass
class Rollout:
    reward: float
    codes: list[str]
    steps: int
    calls: int
    paths: list[str] = field(default_factory=list)
    """Where the failed verdicts point (:attr:`toolfactory.rl.reward.Score.paths`)."""
    chat_history: list[dict[str, Any]] = field(default_factory=list)


def _as_text(message: Any) -> str:
    """An assistant reply as the text a model writes: structured tool calls (an endpoint with a
    tool-call parser) written back as Hermes blocks, as the chat template would."""
    text = message.content or ""
    for call in message.tool_calls or []:
        arguments = call.function.arguments
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass
        text += f"\n<tool_call>\n{json.dumps({'name': call.function.name, 'arguments': arguments}, ensure_ascii=False)}\n</tool_call>"
    return text.strip()


def rollout(row: Mapping[str, Any], client: Any, model: str, max_turns: int = 40,
            sampling: Mapping[str, Any] | None = None) -> Rollout:
    """One episode of SkyRL's agent loop over `row` (:func:`dataset_row`), the policy being
    `model` behind `client` (an ``openai.OpenAI``); the task's tools are offered to it."""
    import skyrl_gym

    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    extras["max_turns"] = max_turns
    env = skyrl_gym.make(str(row["env_class"]), env_config={}, extras=extras)
    tools = json.loads(extras["task"])["tools"] if isinstance(extras["task"], str) else extras["task"]["tools"]
    try:
        chat_history, _ = env.init([dict(m) for m in row["prompt"]])
        reward, steps, done, output = 0.0, 0, False, None
        while not done:
            response = client.chat.completions.create(model=model, messages=chat_history, tools=tools, **dict(sampling or {}))
            reply = _as_text(response.choices[0].message)
            output = env.step(reply)
            steps += 1
            chat_history = [*chat_history, {"role": "assistant", "content": reply}, *output["observations"]]
            reward, done = float(output["reward"]), bool(output["done"])
        metadata = (output or {}).get("metadata") or {}
        return Rollout(reward=reward, codes=list(metadata.get("codes") or []), steps=steps,
                       calls=int(metadata.get("calls") or 0), paths=list(metadata.get("paths") or []), chat_history=chat_history)
    finally:
        env.close()
