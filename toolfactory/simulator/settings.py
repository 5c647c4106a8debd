"""Knobs of the simulator: added latency, transport faults, content faults and tool behaviours.

One pydantic model so the HTTP admin endpoint, the command line (one flag per field, generated
from this model) and Python callers all share a single validated definition that cannot drift.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolfactory.errors import ConfigError

class SettingsRefused(ConfigError, ValueError):
    """Settings given as a mapping (a run config's `llm.simulator`) that the model refuses; the
    message names every wrong field as the caller's config names it."""


Profile = Literal["openai", "vllm-hermes", "vllm-no-tool-parser", "reasoning", "plain-text"]


class SimulatorSettings(BaseModel):
    """How the simulator behaves; every rate is a fraction of requests in [0, 1]."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    latency_ms: float = Field(
        default=0.0, ge=0.0, description="Mean latency added to each chat/embedding request (ms)."
    )
    latency_jitter_ms: float = Field(
        default=0.0,
        ge=0.0,
        description="Uniform +- jitter around latency_ms (ms), fixed per request and attempt.",
    )
    rate_429: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of requests answered HTTP 429 with a Retry-After header.",
    )
    retry_after_s: float = Field(
        default=0.2,
        ge=0.0,
        description="Value of the Retry-After header sent with a 429 (seconds).",
    )
    rate_500: float = Field(
        default=0.0, ge=0.0, le=1.0, description="Fraction of requests answered HTTP 500."
    )
    rate_timeout: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of requests that hang for timeout_hang_s before answering.",
    )
    timeout_hang_s: float = Field(
        default=30.0, ge=0.0, description="How long a 'timeout' request hangs before answering (s)."
    )
    rate_malformed_json: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of JSON answers (response_format JSON and tool-call arguments) "
        "returned as broken JSON text.",
    )
    rate_hallucinated_function: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of tool-call answers naming a function that is not in `tools`.",
    )
    rate_missing_required: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of tool-call answers with one required argument removed.",
    )
    rate_wrong_type: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of tool-call answers with one argument of the wrong JSON type.",
    )
    rate_parallel_calls: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of tool-call turns holding 2-3 calls instead of one (never when "
        "the request sets parallel_tool_calls=false).",
    )
    rate_follow_up_call: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of answers to tool results that call a function again instead of "
        "summarising (at most 3 tool-call turns per conversation).",
    )
    rate_clarify: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of tool turns before any tool result that ask the user for a "
        "required argument instead of calling (unless tool_choice forces a call).",
    )
    rate_decline: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of tool turns before any tool result that decline in text (no "
        "offered function helps) instead of calling (unless tool_choice forces a call).",
    )
    decline_when_irrelevant: bool = Field(
        default=False,
        description="Decline in text instead of calling when the last user message shares no "
        "word stem (nor a known value such as a city) with any callable function (unless "
        "tool_choice forces a call).",
    )
    sample_variation: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description="Probability that a resample (a request with a `seed`) is answered independently "
        "of the same request without a seed; otherwise it repeats that answer (low-temperature sampling).",
    )
    boolean_true_rate: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Probability that a boolean in a JSON answer (response_format) is true.",
    )
    embedding_dim: int = Field(
        default=64,
        ge=1,
        le=65536,
        description="Dimension of embedding vectors (unless the request sets `dimensions`).",
    )
    profile: Profile = Field(
        default="openai",
        description="The provider family whose response shapes the simulator reproduces: openai "
        "(native tools and JSON Schema, `refusal`); vllm-hermes (native tools through the hermes "
        "parser); vllm-no-tool-parser (400 for tool_choice auto/required, calls as <tool_call> "
        "text in content); reasoning (reasoning_content or a <think> prefix, 400 for max_tokens "
        "and a non-default temperature); plain-text (400 for tools and response_format, JSON in "
        "fenced blocks). Answers longer than the token limit are cut with finish_reason length.",
    )
    rate_refusal: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of answers that are refusals (openai: the `refusal` field; other "
        "profiles: an apology in the content).",
    )
    judge_scrutiny: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Probability that a verdict (a boolean answering a review question) follows a "
        "careful reading of the quoted dialogue: a call value found nowhere before it, a number the "
        "answer invents, 'nothing came back' after real results fail it. 0: verdicts are draws "
        "(boolean_true_rate); higher values make a better judge.",
    )
    obedience: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Probability of following a mode the prompt states: a request-writing prompt "
        "that asks for parallel, dependent, missing-value or no-tool requests gets requests "
        "written that way, and a request that says so gets parallel calls, a follow-up call, a "
        "question for the missing value or (no word shared with any function) a decline.",
    )
    refused_schema_keywords: str = Field(
        default="",
        description="Comma-separated JSON Schema keywords (e.g. 'contains,minItems') that a "
        "constrained decoder without them refuses: a json_schema response_format using one is "
        "answered with a 400, in every profile.",
    )
    choices: Literal["all", "first", "refused"] = Field(
        default="all",
        description="How the server treats `n` (choices per request): all (answers n choices, the "
        "prompt counted once, as OpenAI and vLLM do); first (answers one choice whatever n asks, as "
        "some OpenAI-compatible providers do); refused (a 400 for n above 1).",
    )
    rate_content_filter: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of answers stopped by a content filter (finish_reason "
        "content_filter, empty content).",
    )
    prefix_cache_blocks: int = Field(
        default=262_144,
        ge=0,
        description="Blocks of past prompts the emulated provider prompt cache holds (least "
        "recently used dropped first; openai and reasoning: 128-token blocks from 1,024 tokens on, "
        "vLLM profiles: 16-token blocks; plain-text: none), reported as "
        "usage.prompt_tokens_details.cached_tokens. 0: nothing is cached.",
    )
    seed: int = Field(
        default=0,
        description="Mixed into every request hash: another seed gives another (still "
        "deterministic) simulator.",
    )


def settings_from_mapping(values: Mapping[str, Any], name: str = "") -> SimulatorSettings:
    """The settings of `values`, or :class:`SettingsRefused` naming each wrong field as
    ``<name>.<field>`` (`name`: where the caller's config holds them, e.g. `llm.simulator`)."""
    try:
        return SimulatorSettings(**values)
    except ValidationError as exc:
        raise SettingsRefused(describe(exc, name)) from None


def describe(exc: ValidationError, name: str = "") -> str:
    """One line for a validation error: `invalid config: <name>.<field>: <what is wrong>; …`."""
    problems = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "settings"
        where = f"{name}.{field}" if name else field
        if error["type"] == "extra_forbidden":
            problems.append(f"{where}: unknown field (allowed: {', '.join(sorted(SimulatorSettings.model_fields))})")
        else:
            got = error.get("input")
            problems.append(f"{where}: {error['msg']}" + ("" if isinstance(got, dict) else f" (got {got!r})"))
    return "invalid config: " + "; ".join(problems)
