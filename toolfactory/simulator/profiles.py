"""Provider profiles: the response shapes of the endpoint families toolfactory meets.

The answer a profile gives is the one the simulator decides (see :mod:`.chat`); a profile only
changes what the wire shows, as documented by each family:

* ``openai``: native ``tool_calls``, JSON Schema ``response_format``, refusals in ``refusal``;
* ``vllm-hermes``: vLLM with ``--enable-auto-tool-choice --tool-call-parser hermes``: native
  calls with vLLM's ``chatcmpl-tool-`` ids and ``content: null``;
* ``vllm-no-tool-parser``: vLLM without those flags: ``tool_choice`` ``auto`` / ``required``
  is a 400 (vLLM's own message), and a model that wants to call writes Hermes-style
  ``<tool_call>{"name": …, "arguments": …}</tool_call>`` text in ``content``;
* ``reasoning``: an OpenAI reasoning model's refusals of ``max_tokens`` (``Use
  'max_completion_tokens' instead``) and of a non-default ``temperature`` or ``top_p``, and a DeepSeek-R1-style
  answer: the thinking in ``reasoning_content``, or as a ``<think>…</think>`` prefix of the
  content when the server runs no reasoning parser (drawn per request), JSON asked for in the
  prompt written in a fenced block;
* ``plain-text``: a chat model behind a server without tools or structured output: 400 for
  ``tools`` and ``response_format``, JSON written after a sentence in a fenced block.

Every profile cuts an answer longer than the request's token limit, with ``finish_reason:
length`` (reasoning counts against the limit, as it does on real servers).
"""

from __future__ import annotations

import json
from typing import Any

from .errors import SimulatorError
from .seeding import sub_hash, unit_draw
from .settings import SimulatorSettings
from .text import estimate_tokens, truncate_words

VLLM_AUTO_TOOL_CHOICE = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
REFUSAL = "I'm sorry, but I can't help with that request."


def refused_parameter(body: dict[str, Any], settings: SimulatorSettings) -> SimulatorError | None:
    """The 400 this profile's server answers `body` with, if it refuses a parameter."""
    profile = settings.profile
    refused_keyword = _refused_keyword(body, settings.refused_schema_keywords)
    if refused_keyword is not None:
        return SimulatorError(f"The provided JSON schema contains features not supported by xgrammar: {refused_keyword!r}.",
                              param="response_format", code="BadRequestError")
    tool_choice = body.get("tool_choice")
    if profile == "vllm-no-tool-parser" and body.get("tools") and tool_choice in ("auto", "required"):
        return SimulatorError(VLLM_AUTO_TOOL_CHOICE, param="tool_choice", code="BadRequestError")
    if profile == "reasoning":
        if "max_tokens" in body:
            return SimulatorError("Unsupported parameter: 'max_tokens' is not supported with this model. "
                                  "Use 'max_completion_tokens' instead.", param="max_tokens", code="unsupported_parameter")
        for name in ("temperature", "top_p"):
            value = body.get(name)
            if value is not None and value != 1:
                return SimulatorError(f"Unsupported value: '{name}' does not support {value} with this model. "
                                      "Only the default (1) value is supported.", param=name, code="unsupported_value")
    if profile == "plain-text":
        for param in ("tools", "response_format"):
            if body.get(param):
                return SimulatorError(f"This model does not support '{param}'.", param=param, code="unsupported_parameter")
    return None


def _refused_keyword(body: dict[str, Any], refused: str) -> str | None:
    """The first keyword of `refused` (comma-separated) the request's JSON Schema uses."""
    names = {name.strip() for name in refused.split(",") if name.strip()}
    fmt = body.get("response_format")
    if not names or not isinstance(fmt, dict) or not isinstance(fmt.get("json_schema"), dict):
        return None
    schemas: list[Any] = [fmt["json_schema"].get("schema")]
    while schemas:
        schema = schemas.pop()
        if isinstance(schema, list):
            schemas.extend(schema)
        if not isinstance(schema, dict):
            continue
        hit = sorted(names.intersection(schema))
        if hit:
            return hit[0]
        for key, value in schema.items():
            # The keys of these are names (of fields, definitions), not keywords: look inside.
            if key in ("properties", "patternProperties", "$defs", "definitions") and isinstance(value, dict):
                schemas.extend(value.values())
            elif isinstance(value, (dict, list)):
                schemas.append(value)
    return None


def hermes_calls(tool_calls: list[dict[str, Any]]) -> str:
    """Native calls as the Hermes chat template writes them."""
    blocks = []
    for call in tool_calls:
        function = call["function"]
        try:
            arguments: Any = json.loads(function["arguments"])
        except ValueError:
            arguments = function["arguments"]
        blocks.append("<tool_call>\n" + json.dumps({"name": function["name"], "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>")
    return "\n".join(blocks)


def _reasoning_text(message: dict[str, Any]) -> str:
    about = "the functions offered" if message.get("tool_calls") else "what the user asked"
    return f"Let me think about {about} and answer step by step. The request is clear enough to act on."


def shape(
    message: dict[str, Any],
    finish: str,
    produced: str,
    body: dict[str, Any],
    settings: SimulatorSettings,
    request_hash: str,
    index: int,
    *,
    json_in_prompt: bool,
) -> tuple[dict[str, Any], str, str]:
    """(the message as this profile writes it, its finish_reason, the text that counts as tokens),
    from the decided message and the text it `produced`."""
    profile = settings.profile
    message = dict(message)
    if settings.rate_refusal and unit_draw(request_hash, "refusal", index) < settings.rate_refusal:
        if profile == "openai":
            return {"role": "assistant", "content": None, "refusal": REFUSAL}, "stop", REFUSAL
        return {"role": "assistant", "content": REFUSAL}, "stop", REFUSAL
    if settings.rate_content_filter and unit_draw(request_hash, "content_filter", index) < settings.rate_content_filter:
        return {"role": "assistant", "content": ""}, "content_filter", ""
    calls = message.get("tool_calls")
    if profile == "vllm-no-tool-parser" and calls:
        message = {"role": "assistant", "content": hermes_calls(calls), "tool_calls": []}
        finish = "stop"
    elif profile == "vllm-hermes" and calls:
        message["tool_calls"] = [{**c, "id": "chatcmpl-tool-" + sub_hash(request_hash, "hermes", index, i)[:32]} for i, c in enumerate(calls)]
        message.pop("refusal", None)
    elif profile != "openai":
        message.pop("refusal", None)
    content = message.get("content")
    if json_in_prompt and isinstance(content, str) and profile in ("reasoning", "plain-text"):
        lead = "Here is the JSON you asked for:\n" if profile == "plain-text" else ""
        content = f"{lead}```json\n{content}\n```"
    if isinstance(content, str):
        produced = content
    if profile == "reasoning":
        thought = _reasoning_text(message)
        produced = thought + " " + produced
        if unit_draw(request_hash, "think-prefix", index) < 0.5:
            content = f"<think>\n{thought}\n</think>\n\n{content or ''}"
        else:
            message["reasoning_content"] = thought
    limit = max_tokens(body)
    if limit is not None and isinstance(content, str) and estimate_tokens(produced) > limit:
        content, finish = truncate_words(content, limit), "length"
    if content is not None or "content" in message:
        message["content"] = content
    return message, finish, produced


def max_tokens(body: dict[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


# What a client of each family must set (toolfactory's `llm` settings, as `--set` overrides):
# the shapes above are what a run meets when these are left at their defaults. The settings a
# run's preflight chooses when left `auto` (the modes, the token-limit name, refused sampling
# parameters) are set here too, so that a run without preflight (benchmarks) sends the same.
CLIENT_SETTINGS: dict[str, dict[str, Any]] = {
    "openai": {},
    "vllm-hermes": {},
    "vllm-no-tool-parser": {"llm.tool_calling": "text"},
    "reasoning": {
        **{f"llm.roles.{role}.{field}": value for role in ("user", "assistant", "tool", "judge", "designer", "target")
           for field, value in (("max_tokens_parameter", "max_completion_tokens"), ("temperature", None))},
    },
    "plain-text": {"llm.tool_calling": "text", "llm.structured_output": "prompt"},
}


def client_overrides(profile: str) -> list[str]:
    """`--set` arguments that point toolfactory's client at the simulator in `profile`."""
    settings = {"llm.simulator.profile": profile, **CLIENT_SETTINGS[profile]}
    return [f"{key}={'null' if value is None else value}" for key, value in settings.items()]
