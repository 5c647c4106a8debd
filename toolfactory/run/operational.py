"""Settings a re-run may change: those that say how a run reaches its endpoint, storage and
workers, never what it generates.

A re-run keeps its run's config (the manifest's), so that every shard it adds is made exactly as
the others were. An operator finishing a run on a bad night may still need to point it at another
replica of the same endpoint, slow it down, give it a larger budget, retry more, tolerate more transient failures, let fan-in stages proceed or use
another embedding backend; those overrides are applied and recorded in the manifest. Any other
override is refused with one message, never ignored.
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any, Sequence

from toolfactory.config import Config, apply_overrides, override_key, validate_config
from toolfactory.errors import ConfigError

# Dotted prefixes of the operational settings (a prefix ending in "." covers a whole section).
OPERATIONAL = (
    "storage.", "stats.", "orchestration.", "export.",
    "run.tolerate_transient_failures", "run.min_accepted", "run.min_pass_rate", "run.fan_in",
    "llm.base_url", "llm.api_key_env", "llm.api_key_secret_block",
    "llm.max_concurrency", "llm.prefix_cache_min_tokens", "llm.rate_limit.", "llm.budget.", "llm.max_retries", "llm.backoff_initial_s", "llm.backoff_max_s", "llm.timeout_s",
    "llm.max_repeated_refusals",
    "llm.embedding_model", "llm.embedding_backend", "llm.local_embedding_model",
    # the simulator's transport, not its answers
    "llm.simulator.latency_ms", "llm.simulator.latency_jitter_ms", "llm.simulator.rate_429", "llm.simulator.rate_500",
    "llm.simulator.rate_timeout", "llm.simulator.retry_after_s", "llm.simulator.timeout_hang_s",
)


def is_operational(key: str) -> bool:
    return any(key == prefix or (prefix.endswith(".") and key.startswith(prefix)) for prefix in OPERATIONAL)


def check_operational(overrides: Sequence[str]) -> None:
    """Raise :class:`ConfigError` naming every override a re-run may not apply."""
    refused = [key for key in map(override_key, overrides) if not is_operational(key)]
    if refused:
        allowed = ", ".join(p.rstrip(".") + (".*" if p.endswith(".") else "") for p in OPERATIONAL)
        raise ConfigError(
            f"rerun --set {', '.join(refused)}: a re-run keeps its run's config, so that every shard is made the "
            f"same way; it may change only how the run is carried out: {allowed}"
        )


def rerun_config(snapshot: dict[str, Any], overrides: Sequence[str]) -> Config:
    """The run's config (`snapshot`, from its manifest) with operational `overrides` applied."""
    check_operational(overrides)
    return validate_config(apply_overrides(copy.deepcopy(snapshot), overrides))


def rerun_record(overrides: Sequence[str]) -> dict[str, Any]:
    """What the manifest keeps of a re-run that changed settings."""
    return {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "overrides": list(overrides)}
