"""The `dialogues` section: the agents, the solution search and the HTTP executor."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from toolfactory.config.allowlist import HttpExecutorSettings
from toolfactory.config.recipes import RecipeName
from toolfactory.config.section import Section


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
    api_errors: list[RecipeName] = Field(default_factory=lambda: ["toolalpaca"])
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
