"""The `tasks` section: recipes, scenarios, modes, complexity, API filtering and blueprints."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from toolfactory.config.recipes import RecipeName
from toolfactory.config.section import Section, proportions


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
    repairs: int = Field(1, ge=0, le=3)
    """Times a blueprint that failed (a call's error, a state left as it was) goes back to the
    designer with what its calls answered, to be written again (APIGen-MT's feedback); 0: never."""
    spanning: float = Field(0.25, ge=0.0, le=1.0)
    """Share of blueprints designed over two executable sources (one is the anchor's, the other
    drawn from the pool's other sources): read a value in one, act on it in the other. Needs
    `tasks.explore` (which knows the pool's sources) and two sources; otherwise every blueprint
    has one."""

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
    instructions_per_executable_tool: int | None = Field(None, ge=1, le=200)
    """Instructions per anchor tool that comes from an executable source (`tools.environments`,
    `tools.mcp`): its calls really run, so its dialogues are checked by execution rather than by a
    model's opinion, and a source has many functions. Null: `instructions_per_tool`."""
    recipes: dict[RecipeName, float] = Field(
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
    explore: bool = True
    """Before writing requests over a tool from an executable source, explore a fresh environment of
    it (its state, and the answers of the functions vetting found to change nothing), once per
    source and tasks shard, and list what exists there in the request-writing prompts, asking to
    name only those values where a request refers to existing things (docs/tools/executable.md)."""

    @field_validator("recipes", "scenarios", "modes")
    @classmethod
    def _shares(cls, value: dict[str, float]) -> dict[str, float]:
        return proportions(value)
