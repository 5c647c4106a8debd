"""The `curate` section: deduplication, complexity, clusters, mode steering and decontamination."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from toolfactory.config.section import Section


BUILTIN_BENCHMARKS = ("bfcl", "toolbench", "toolalpaca")


class BenchmarkFile(Section):
    """An evaluation set of the user's: a JSON or JSON-lines file of test items."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_]*$", max_length=40)
    """Names the set in the rejection code `contaminated_<name>` and in the stats."""
    path: str
    """A JSON file (a list of items, or an object holding one) or a JSON-lines file (an item a line)."""
    field: str | None = None
    """Where an item's question is: a key or a dotted path (`question`, `turns.0.content`, `*` for
    every element of a list). Unset: the first of question, query, instruction, instructions,
    prompt, user, request, input, text, messages, conversations that holds text. Chat messages
    count by their user turns."""


class DecontaminateConfig(Section):
    """Decontamination against evaluation sets: n-gram overlap and MinHash near-duplicates."""

    enabled: bool = True
    """Check the run's dialogues against the sets below and reject those that overlap one."""
    benchmarks: list[Literal["bfcl", "toolbench", "toolalpaca"]] = Field(default_factory=lambda: list(BUILTIN_BENCHMARKS))
    """Built-in sets: BFCL's test categories (from the installed bfcl-eval package; skipped, and
    counted, when it is absent), ToolBench's test queries and ToolAlpaca's evaluation sets (both
    shipped with toolfactory)."""
    files: list[BenchmarkFile] = Field(default_factory=list)
    """Evaluation sets of your own."""
    ngram: int = Field(13, ge=5, le=50)
    """A run of this many words shared with an item is an overlap."""
    min_words: int = Field(8, ge=3, le=50)
    """Items shorter than this match only as a whole turn (same words, any order or casing); items
    from this length up to `ngram` words also match contained in a longer request."""
    ordered_threshold: float = Field(0.5, gt=0.0, le=1.0)
    """MinHash similarity over word 3-shingles (in order) at or above which a turn is a near copy."""
    bag_threshold: float = Field(0.8, gt=0.0, le=1.0)
    """MinHash similarity over the set of words (any order) at or above which a turn is a near copy."""
    tools_threshold: float = Field(0.6, gt=0.0, le=1.0)
    """The same word-set similarity that suffices when the dialogue also offers every function the
    item names."""

    @model_validator(mode="after")
    def _consistent(self) -> DecontaminateConfig:
        if self.min_words > self.ngram:
            raise ValueError(f"min_words ({self.min_words}) must not exceed ngram ({self.ngram})")
        if self.tools_threshold > self.bag_threshold:
            raise ValueError(f"tools_threshold ({self.tools_threshold}) must not exceed bag_threshold ({self.bag_threshold})")
        names = [f.name for f in self.files]
        for index, name in enumerate(names):
            if name in BUILTIN_BENCHMARKS:
                raise ValueError(f"files.{index}.name: {name!r} is a built-in benchmark; name your file otherwise")
            if name in names[:index]:
                raise ValueError(f"files.{index}.name: {name!r} names another file too")
        return self


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
    turn_masks: list[Literal["error_recovered", "samples_disagreed", "flagged"]] = Field(
        default_factory=lambda: ["error_recovered", "samples_disagreed", "flagged"])
    """Which reasons mask an assistant turn from the loss (docs/guide/turn_masks.md): a failed call
    the dialogue recovered from, a turn whose samples disagreed, a turn a rule flagged with a
    warning (`flagged_<rule>`). [] : every assistant turn is learned."""
    decontaminate: DecontaminateConfig = Field(default_factory=lambda: DecontaminateConfig())
    """Reject dialogues whose user requests overlap the test items of the benchmarks a model made
    from the data will be scored on (docs/guide/decontamination.md)."""
