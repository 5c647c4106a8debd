"""Accounting of LLM use: calls, cache hits, tokens, latency and failures, per role."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RoleUsage:
    calls: int = 0  # requests answered by the endpoint
    cache_hits: int = 0  # requests answered from the cache
    retries: int = 0  # extra attempts after 429 / 5xx / timeouts
    reasks: int = 0  # follow-up requests after an invalid structured answer
    prompt_tokens: int = 0
    # Of the prompt tokens, those the endpoint served from its prompt (prefix) cache, as it
    # reports them: billed at the role's cached price (`usd_per_million_cached_prompt_tokens`).
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    failures: Counter[str] = field(default_factory=Counter)
    # Who answered, as the answers say it (`model` and `system_fingerprint` of each chat answer,
    # cached ones included): the provenance of the data, whatever the config calls the endpoint.
    served_by: Counter[str] = field(default_factory=Counter)

    def answered_by(self, answer: dict[str, Any]) -> None:
        self.served_by[served_by(answer)] += 1


def served_by(answer: dict[str, Any]) -> str:
    """`model` or `model (fingerprint)` of a chat completion's body."""
    model = str(answer.get("model") or "unknown model")
    fingerprint = answer.get("system_fingerprint")
    return f"{model} ({fingerprint})" if fingerprint else model


def cached_tokens(counted: dict[str, Any]) -> int:
    """The prompt tokens an answer's `usage` says were served from the endpoint's prompt cache.

    OpenAI, vLLM (``--enable-prompt-tokens-details``) and SGLang write them in
    ``prompt_tokens_details.cached_tokens``; DeepSeek in ``prompt_cache_hit_tokens``. An endpoint
    that says nothing served none, as far as anyone can bill."""
    details = counted.get("prompt_tokens_details")
    if isinstance(details, dict) and details.get("cached_tokens") is not None:
        return int(details["cached_tokens"] or 0)
    return int(counted.get("prompt_cache_hit_tokens") or 0)


class UsageMeter:
    def __init__(self) -> None:
        self.by_role: dict[str, RoleUsage] = {}

    def role(self, role: str) -> RoleUsage:
        return self.by_role.setdefault(role, RoleUsage())

    def totals(self) -> dict[str, Any]:
        keys = ("calls", "cache_hits", "retries", "reasks", "prompt_tokens", "cached_prompt_tokens", "completion_tokens")
        totals: dict[str, Any] = {k: sum(getattr(u, k) for u in self.by_role.values()) for k in keys}
        totals["latency_s"] = round(sum(u.latency_s for u in self.by_role.values()), 3)
        return totals

    def to_dict(self) -> dict[str, Any]:
        return {
            role: {
                "calls": u.calls,
                "cache_hits": u.cache_hits,
                "retries": u.retries,
                "reasks": u.reasks,
                "prompt_tokens": u.prompt_tokens,
                "cached_prompt_tokens": u.cached_prompt_tokens,
                "completion_tokens": u.completion_tokens,
                "latency_s": round(u.latency_s, 3),
                "failures": dict(u.failures),
                "served_by": dict(u.served_by),
            }
            for role, u in sorted(self.by_role.items())
        }
