"""Answering an API request as a model playing the API does (ToolAlpaca Fig. 11).

A JSON answer whose schema is a choice between responses told apart by their ``status_code``
(``oneOf`` branches, a success and an error) asks the model to play an API: validate the request
against the documentation in the prompt, and answer with the success or with the error a real
API would give. A model reads the documented parameters and the request's arguments; so does
the simulator: the first JSON Schema object after the word "parameters" and the first JSON
object after the last "request" in the prompt. Arguments that break the documented parameters
(a missing required value, a wrong type, a value outside an enum or a range) get the error
branch with a message naming the problem; a valid request gets the success branch. When the
prompt does not quote both, the answer is the success branch, as a model that cannot tell would
answer.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from .text import message_text

_DECODER = json.JSONDecoder()
BAD_REQUEST = 400


def _branches(schema: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(success branch, error branch) of a status-code choice, or None for another schema."""
    options = schema.get("oneOf") or schema.get("anyOf")
    if not isinstance(options, list) or len(options) < 2:
        return None
    success = error = None
    for option in options:
        status = ((option or {}).get("properties") or {}).get("status_code") if isinstance(option, dict) else None
        if not isinstance(status, dict):
            return None
        codes = [status["const"]] if "const" in status else status.get("enum") or []
        if any(isinstance(c, int) and c < 400 for c in codes):
            success = option
        elif codes:
            error = option
    return (success, error) if success is not None and error is not None else None


def _rooted(branch: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """`branch` carrying `root`'s definitions, so that it can be generated on its own."""
    definitions = {k: root[k] for k in ("$defs", "definitions") if isinstance(root.get(k), dict) and k not in branch}
    return {**definitions, **branch} if definitions else branch


def _object_after(text: str, word: str, *, last: bool, schema: bool) -> dict[str, Any] | None:
    """The first JSON object (a schema-looking one when `schema`) after the first or last
    occurrence of `word` that is followed by one."""
    lowered = text.lower()
    starts = [i for i in range(len(lowered)) if lowered.startswith(word, i)]
    for at in reversed(starts) if last else starts:
        start = text.find("{", at)
        while start >= 0:
            try:
                value = _DECODER.raw_decode(text, start)[0]
            except json.JSONDecodeError:
                start = text.find("{", start + 1)
                continue
            if isinstance(value, dict) and (not schema or "type" in value or "properties" in value):
                return value
            start = text.find("{", start + 1)
    return None


def request_problem(prompt: str) -> str | None:
    """What is wrong with the request quoted in `prompt`, or None (valid, or not readable)."""
    parameters = _object_after(prompt, "parameters", last=False, schema=True)
    arguments = _object_after(prompt, "request", last=True, schema=False)
    if parameters is None or arguments is None:
        return None
    try:
        error = next(iter(Draft202012Validator(parameters).iter_errors(arguments)), None)
    except SchemaError:
        return None
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"Invalid parameter {where!r}: {error.message}" if where else f"Invalid request: {error.message}"


def api_answer(schema: dict[str, Any], messages: list[dict[str, Any]], instance: Any) -> dict[str, Any] | None:
    """The answer to an API-simulation request (see the module doc), or None for another kind
    of request. `instance(schema)` makes a value of a branch."""
    branches = _branches(schema)
    users = [m for m in messages if m.get("role") == "user"]
    if branches is None or not users:
        return None
    # A branch's local references point at the whole schema's root (`#/$defs/...`): keep them resolvable.
    success, error = (_rooted(branch, schema) for branch in branches)
    problem = request_problem(message_text(users[-1].get("content")))
    if problem is None:
        return instance(success)  # type: ignore[no-any-return]
    value = instance(error)
    status = (error.get("properties") or {}).get("status_code") or {}
    codes = [status["const"]] if "const" in status else list(status.get("enum") or [])
    value["status_code"] = BAD_REQUEST if BAD_REQUEST in codes else (codes[0] if codes else BAD_REQUEST)
    for key in ("error", "message"):
        if key in (error.get("properties") or {}):
            value[key] = problem
    explanation = (error.get("properties") or {}).get("explanation")
    if explanation is not None:
        value["explanation"] = "The request does not follow the documented parameters, so the API rejects it."
    return value  # type: ignore[no-any-return]
