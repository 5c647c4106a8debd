"""Refusals that retrying cannot fix: the same client error for every request of one shape.

A 400 or 422 usually says the request itself is wrong for this endpoint — a parameter the model
refuses, a tool choice the server was not started for, a JSON Schema keyword its constrained
decoder lacks. Every later request of the same role and shape would be refused alike, and each
would become a rejected record, so a run would "complete" with an empty dataset. The gateway
counts such refusals per (role, request shape); past ``llm.max_repeated_refusals`` in a row (no
answer of that shape in between) it raises :class:`EndpointRefused`, which stops the stage.

A request's shape is what decides whether a server accepts it, not its content: the kind of
request (chat, tools, embeddings), its response format and schema name, its tool choice and the
names of the parameters sent. Errors that depend on one record (a prompt longer than the context)
are interleaved with answers of the same shape, which reset the count.
"""

from __future__ import annotations

from typing import Any

import openai

from toolfactory.errors import EndpointRefused

# Request fields whose presence, not value, is what a server may refuse.
_CONTENT = frozenset({"model", "messages", "tools", "tool_choice", "response_format", "input"})


def request_shape(request: dict[str, Any]) -> str:
    """A short description of what kind of request `request` is (see the module doc)."""
    if "input" in request:
        return "embeddings"
    parts = ["chat with tools" if request.get("tools") else "chat"]
    choice = request.get("tool_choice")
    if choice is not None:
        parts.append(f"tool_choice {choice if isinstance(choice, str) else 'function'}")
    fmt = request.get("response_format")
    if isinstance(fmt, dict):
        schema = fmt.get("json_schema")
        named = f" {schema.get('name')!r}" if isinstance(schema, dict) and schema.get("name") else ""
        parts.append(f"response_format {fmt.get('type')}{named}")
    parts.append("parameters " + ", ".join(sorted(k for k in request if k not in _CONTENT)))
    return "; ".join(parts)


def endpoint_message(exc: openai.APIStatusError) -> str:
    """The endpoint's own words (OpenAI's error body ``message``, else the whole error)."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    if isinstance(body, str) and body:
        return body
    return exc.message


class RefusalCounter:
    """Consecutive refusals per (role, request shape), for one gateway (one shard worker)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._counts: dict[tuple[str, str], int] = {}

    def refused(self, role: str, model: str, request: dict[str, Any], exc: openai.APIStatusError) -> None:
        """Count a refusal; raise :class:`EndpointRefused` once there are more than the limit."""
        key = (role, request_shape(request))
        count = self._counts.get(key, 0) + 1
        self._counts[key] = count
        if count > self._limit:
            raise EndpointRefused(role, model, key[1], exc.status_code, endpoint_message(exc), count)

    def answered(self, role: str, request: dict[str, Any]) -> None:
        """An answer to a request of this shape: its refusals were not the endpoint's last word."""
        if self._counts:  # nothing to do (and no shape to compute) on the common path
            self._counts.pop((role, request_shape(request)), None)
