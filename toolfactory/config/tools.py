"""The `tools` section: tool files, synthesis, the pool and the executable sources."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from toolfactory.config.section import Section
from toolfactory.executable.mcp.settings import McpSourceSettings
from toolfactory.executable.settings import PythonEnvironmentSettings


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
