"""A policy that plays given calls, behind an OpenAI-compatible ``/v1/chat/completions``: what
checks an RL environment end to end without a model (a task's ground truth must score 1, a
trajectory with a call dropped or changed must score 0 where it leaves another state).

Each task is known by its first user message. Its plan is one list of calls per user turn; the
policy answers the request with the next step of the plan, counted from the assistant messages
the request already holds: each call of the turn in its own assistant message, then a short
answer without a call, which ends the turn. With ``text_calls`` the calls are written in the
assistant's text as Hermes ``<tool_call>`` blocks (a server without a tool-call parser) instead of
``tool_calls``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Plan = Sequence[Sequence[tuple[str, Mapping[str, Any]]]]  # per user turn: (function name, arguments)
DONE = "Done."


@dataclass
class ReplayPolicy:
    plans: dict[str, Plan] = field(default_factory=dict)
    """The plan of each task, by its first user message."""
    text_calls: bool = False
    requests: int = 0

    def add(self, first_user_message: str, plan: Plan) -> None:
        self.plans[first_user_message] = plan

    def answer(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The assistant message that follows `messages` (see the module doc)."""
        self.requests += 1
        first = next((m.get("content") for m in messages if m.get("role") == "user"), None)
        plan = self.plans.get(_content(first))
        if plan is None:
            return {"role": "assistant", "content": "I cannot help with that."}
        steps = [call for turn in plan for call in [*turn, None]]
        done = sum(1 for m in messages if m.get("role") == "assistant")
        step = steps[done] if done < len(steps) else None
        if step is None:
            return {"role": "assistant", "content": DONE}
        name, arguments = step
        text = json.dumps(dict(arguments), ensure_ascii=False)
        if self.text_calls:
            return {"role": "assistant",
                    "content": f"<tool_call>\n{json.dumps({'name': name, 'arguments': dict(arguments)}, ensure_ascii=False)}\n</tool_call>"}
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": f"call_{done}", "type": "function", "function": {"name": name, "arguments": text}}]}


def _content(content: Any) -> str | None:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else None


def _handler(policy: ReplayPolicy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": "replay", "object": "model", "owned_by": "toolfactory"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": "not found"}})
                return
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            message = policy.answer(list(request.get("messages") or []))
            self._send(200, {
                "id": f"chatcmpl-{policy.requests}", "object": "chat.completion", "created": int(time.time()),
                "model": request.get("model", "replay"),
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    return Handler


@contextmanager
def serve(policy: ReplayPolicy) -> Iterator[str]:
    """Serve `policy` on a loopback port; yields the base URL (``http://127.0.0.1:PORT/v1``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(policy))
    thread = threading.Thread(target=server.serve_forever, name="replay-policy", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def plan_of(ground_truth: Sequence[Mapping[str, Any]], turns: int) -> list[list[tuple[str, Mapping[str, Any]]]]:
    """A task's ground-truth calls as a plan of `turns` user turns."""
    plan: list[list[tuple[str, Mapping[str, Any]]]] = [[] for _ in range(max(turns, 1))]
    for call in ground_truth:
        plan[min(int(call.get("turn", 0)), len(plan) - 1)].append((str(call["name"]), dict(call["arguments"])))
    return plan


def plan_of_dialogue(dialogue: Any) -> list[list[tuple[str, Mapping[str, Any]]]]:
    """The calls of a record (:class:`toolfactory.models.Dialogue`) as a plan: each call under the
    user message before it."""
    plan: list[list[tuple[str, Mapping[str, Any]]]] = []
    for message in dialogue.messages:
        if message.role == "user":
            plan.append([])
        for call in message.tool_calls or []:
            if not plan:
                plan.append([])
            plan[-1].append((call.name, json.loads(call.arguments or "{}")))
    return plan
