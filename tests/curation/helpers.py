"""The project's gateway in front of the simulator, as the curate stage will use it (no request
cache, so every embedding request reaches the server), and small record builders."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable, Sequence, TypeVar

from conftest import http
from toolfactory.config import load_config
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue, Function, Message, ToolCall

T = TypeVar("T")
MODEL = "sim-embedding"


def embedding_requests(sim: Any) -> int:
    return int(http.get(f"{sim.root_url}/simulator/stats").json()["embedding_requests"])


def with_gateway(sim: Any, work: Callable[[LLMGateway], Awaitable[T]]) -> T:
    """`work` run with a fresh gateway to the simulator; its result."""
    config = load_config(None, [], environ={})

    async def go() -> T:
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), config.llm) as gateway:
            return await work(gateway)

    return asyncio.run(go())


def function(name: str, description: str) -> Function:
    return Function(name=name, description=description)


def dialogue(
    id: str,
    request: str,
    tools: list[Function],
    calls: Sequence[tuple[str, dict[str, Any]]] = (),
    answer: str = "Done.",
    mode: str = "single",
) -> Dialogue:
    """One user request, the calls (each answered by a tool message) and a final answer."""
    messages = [Message(role="user", content=request)]
    for i, (name, arguments) in enumerate(calls):
        call = ToolCall(id=f"call_{i}", name=name, arguments=json.dumps(arguments))
        messages += [
            Message(role="assistant", tool_calls=[call]),
            Message(role="tool", tool_call_id=call.id, name=name, content='{"status_code": 200, "response": {}}'),
        ]
    messages.append(Message(role="assistant", content=answer))
    return Dialogue(id=id, task_id=f"task-{id}", tools=tools, messages=messages, mode=mode)
