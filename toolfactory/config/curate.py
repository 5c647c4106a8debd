"""The `curate` section: deduplication, complexity, clusters and mode steering."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from toolfactory.config.section import Section


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
