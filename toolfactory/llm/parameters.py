"""The parameters a role's requests carry beside their content, and the one an endpoint refused.

Reasoning models refuse parameters other models take: OpenAI's o-series and gpt-5 answer 400 to
``max_tokens`` ("Use 'max_completion_tokens' instead") and to a temperature other than their
default, while vLLM and most servers ignore what they do not use. Which ones a role sends is its
config (``max_tokens_parameter``, ``temperature``, ``top_p``); where those are left `auto`, the
run's preflight chooses them from the endpoint's refusals (:mod:`toolfactory.preflight.parameters`).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import openai

from toolfactory.config import RoleConfig

MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")
SAMPLING = ("temperature", "top_p")
# Request fields that are the request's content: a refusal naming them is not about a parameter.
_CONTENT = frozenset({"model", "messages", "input"})


def role_parameters(params: RoleConfig) -> dict[str, Any]:
    """The sampling and limit parameters of `params`' requests, under the names sent (a parameter
    set to null is left out, so the endpoint's default applies)."""
    sent: dict[str, Any] = {}
    if params.temperature is not None:
        sent["temperature"] = params.temperature
    if params.top_p is not None:
        sent["top_p"] = params.top_p
    sent[params.max_tokens_field] = params.max_tokens
    return sent


def refused_parameter(exc: openai.APIStatusError, request: Mapping[str, Any]) -> str | None:
    """The field of `request` a 400 or 422 names as the one refused: OpenAI's error ``param``,
    else the first field of the request the message names (servers without ``param``)."""
    if exc.status_code not in (400, 422):
        return None
    fields = [name for name in request if name not in _CONTENT]
    body = exc.body
    param = body.get("param") if isinstance(body, dict) else None
    if isinstance(param, str) and param in fields:
        return param
    message = body.get("message") if isinstance(body, dict) and isinstance(body.get("message"), str) else exc.message
    named = [(found.start(), name) for name in fields
             if (found := re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", str(message))) is not None]
    return min(named)[1] if named else None
