"""Which parameters a role's requests carry, and which one an endpoint's refusal names, from the
error shapes real servers send (OpenAI's ``param``, or only a message)."""

from __future__ import annotations

from typing import Any

import httpx
import openai

from toolfactory.config import RoleConfig
from toolfactory.llm.parameters import refused_parameter, role_parameters

REQUEST = {"model": "o4-mini", "messages": [], "temperature": 0.7, "top_p": 1.0, "max_tokens": 512}


def bad_request(body: dict[str, Any], status: int = 400) -> openai.APIStatusError:
    """The error the openai client raises for `body` (its ``error`` object, as the client keeps it)."""
    response = httpx.Response(status, request=httpx.Request("POST", "http://endpoint/v1/chat/completions"), json={"error": body})
    return openai.APIStatusError(f"Error code: {status} - {body}", response=response, body=body)


def test_openai_names_the_refused_parameter_in_param() -> None:
    exc = bad_request({"message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                  "Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
                       "param": "max_tokens", "code": "unsupported_parameter"})
    assert refused_parameter(exc, REQUEST) == "max_tokens"


def test_a_message_without_param_names_the_field_sent() -> None:
    exc = bad_request({"message": "Unsupported value: 'temperature' does not support 0.7 with this model. "
                                  "Only the default (1) value is supported.", "param": None})
    assert refused_parameter(exc, REQUEST) == "temperature"


def test_a_field_not_sent_is_not_the_one_refused() -> None:
    # The advice names max_completion_tokens, which was not sent: max_tokens is the one refused.
    exc = bad_request({"message": "Use 'max_completion_tokens' instead of 'max_tokens' with this model."})
    assert refused_parameter(exc, REQUEST) == "max_tokens"


def test_a_refusal_naming_no_field_names_none() -> None:
    assert refused_parameter(bad_request({"message": "The prompt is too long for this model's context."}), REQUEST) is None


def test_a_server_error_names_no_field() -> None:
    assert refused_parameter(bad_request({"message": "temperature sensor on fire", "param": "temperature"}, 500), REQUEST) is None


def test_auto_sends_max_tokens_and_null_leaves_a_parameter_out() -> None:
    assert role_parameters(RoleConfig()) == {"temperature": 0.7, "top_p": 1.0, "max_tokens": 512}
    reasoning = RoleConfig(temperature=None, max_tokens_parameter="max_completion_tokens")
    assert role_parameters(reasoning) == {"top_p": 1.0, "max_completion_tokens": 512}
