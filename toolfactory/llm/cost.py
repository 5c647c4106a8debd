"""What LLM use costs, from the prices configured per role (`llm.roles.<role>.usd_per_million_*`).

A role without a price has no cost (None), never a cost of zero: the stats, the report and the
artifact then show tokens only, so an unpriced model never looks free.
"""

from __future__ import annotations

from typing import Any

from toolfactory.config import LLMConfig


def role_cost(llm: LLMConfig, role: str, prompt_tokens: int, completion_tokens: int,
              cached_prompt_tokens: int = 0) -> float | None:
    """USD of `role`'s tokens, or None when the role has no price (or is not a configured role).

    `cached_prompt_tokens` (part of `prompt_tokens`) are billed at the role's cached price; a role
    without one bills them as any prompt token, which never under-states what was spent."""
    spec = llm.roles.get(role)  # type: ignore[call-overload]
    if spec is None or (spec.usd_per_million_prompt_tokens is None and spec.usd_per_million_completion_tokens is None):
        return None
    prompt_price = spec.usd_per_million_prompt_tokens or 0.0
    cached_price = prompt_price if spec.usd_per_million_cached_prompt_tokens is None else spec.usd_per_million_cached_prompt_tokens
    cached = min(max(cached_prompt_tokens, 0), prompt_tokens)
    return ((prompt_tokens - cached) * prompt_price + cached * cached_price
            + completion_tokens * (spec.usd_per_million_completion_tokens or 0.0)) / 1e6


def priced_usage(llm: LLMConfig, by_role: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`by_role` (see :meth:`UsageMeter.to_dict`) with each role's ``cost_usd`` (None: unpriced)."""
    out = {}
    for role, usage in by_role.items():
        cost = role_cost(llm, role, usage["prompt_tokens"], usage["completion_tokens"],
                         usage.get("cached_prompt_tokens") or 0)
        out[role] = {**usage, "cost_usd": None if cost is None else round(cost, 8)}
    return out


def total_cost(by_role: dict[str, dict[str, Any]]) -> float | None:
    """The sum of the roles' costs; None when a role that used tokens has no price."""
    total = 0.0
    for usage in by_role.values():
        if usage.get("cost_usd") is None:
            if usage.get("prompt_tokens") or usage.get("completion_tokens"):
                return None
            continue
        total += usage["cost_usd"]
    return round(total, 8)
