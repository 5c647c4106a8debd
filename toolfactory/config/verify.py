"""The `verify` section: rules, judges, policy and the limits of a record."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from toolfactory.config.recipes import RecipeName
from toolfactory.config.section import Section


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
    decision as casting them all, since vote i is always the same sample of the same request);
    `all`: every vote is cast."""
    judge_call: Literal["per_aspect", "combined"] = "combined"
    """`combined`: one structured request answers every aspect at once, each aspect with its own
    verdict, votes and reason code (one request per judged record, two on a split vote, with
    `llm.multiple_choices`); `per_aspect`: each aspect asked on its own (ToolACE §3.2). `benchmarks.judges`
    measures how often the two agree; on a judge model that answers aspects differently when
    asked together, set `per_aspect`."""
    execution_answers: list[Literal["hallucination", "consistency", "tool_response", "repetition", "meaningless_tokens"]] = Field(
        default_factory=lambda: ["tool_response"]
    )
    """Judge aspects whose votes are not requested on a record the execution layer accepted and whose
    every call ran on an executable source: execution has answered them (a real tool's response is
    what the tool answered). The referee sample still asks them, to measure what they would add.
    [] asks every aspect everywhere."""
    referee_share: float = Field(0.2, ge=0.0, le=1.0)
    """Share of each verify shard's executed dialogues (accepted, or rejected with
    `exec_state_mismatch` / `exec_result_mismatch`) that the judges also vote on, with a labelled
    corruption of each accepted one, to measure them against execution (docs/guide/referee.md).
    Their votes there never decide a record."""
    referee_min: int = Field(3, ge=0)
    """At least this many executed dialogues refereed per verify shard (all when fewer); with
    `referee_share` 0, 0 turns the referee off."""
    judge_min_agreement: float | None = Field(None, ge=0.0, le=1.0)
    """Floor: a run whose judges agree with execution on fewer refereed records than this share (per
    judge model, every aspect together) ends failed with the figures and is not exported, like
    `run.min_accepted`; a run with the floor set and nothing refereed fails too. null: off."""
    rejecting_warnings: list[str] = Field(default_factory=list)
    """Warning rules whose findings reject a record in this run, e.g. `[arg_value_ungrounded]` to
    reject every call value not traceable to the conversation (a warning by default: derived
    values such as a currency code for "dollars" look invented to it)."""
    max_steps: dict[RecipeName, int] = Field(default_factory=lambda: {"toolalpaca": 5})
    """Policy: the most function calls a dialogue of each recipe may make (`filter_too_many_steps`);
    a recipe not listed has no step limit (ToolLLM's search has its own max_depth)."""
    keep_error_recovery: list[RecipeName] = Field(default_factory=lambda: ["toolalpaca"])
    """Policy: recipes that keep a call answered with an error and then made correctly."""
    execution: bool = True
    """Replay the calls that ran on executable sources (`tools.environments`, `tools.mcp`) in fresh
    environments, between the rules and the judges (`exec_*` rules); records without such calls
    pass it untouched."""
    execution_unavailable: Literal["record", "reject"] = "record"
    """A record whose executable source cannot start for the replay (not configured, not
    installed, gone): `record` checks it from the record without running anything
    (docs/guide/execution-verification.md says what that proves), counted per source as
    `execution_checked_from_record`; `reject` rejects it as `exec_start_failed`."""
    max_depth: int = Field(64, ge=1, le=200)
    """Deepest nesting of a schema, call arguments or JSON tool response; deeper is `record_too_deep`.
    At most 200: the libraries the rules use stop at about 255 levels."""
    max_record_chars: int = Field(2_000_000, ge=1)
    """Most characters of a record's texts, arguments and tool definitions; more is `record_too_large`."""
