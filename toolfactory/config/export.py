"""The `export` section: the formats written after every run and their splits."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from toolfactory.config.section import Section

# The corruptions that are mistakes a model makes in its own reply (not in a tool's response or
# the order of messages), which the rule layer confirms: the default of `preference.corruptions`.
MODEL_FAULTS = ("unknown_function", "missing_required", "wrong_type", "enum_violation", "out_of_range",
                "unknown_argument", "arguments_not_json", "invented_value", "refusal_with_call")


class PreferenceConfig(Section):
    """Preference pairs (`trl_preference`, `llamafactory_ranking`): an accepted dialogue and a
    rejected attempt at the same task, cut where they part (see export/pairs.py)."""

    completion: Literal["step", "rest"] = "step"
    """`step`: chosen and rejected are the one assistant reply where the two part; `rest`: the rest
    of each dialogue from there (trl_preference only: LLaMA-Factory's ranking data holds one reply)."""
    max_pairs_per_dialogue: int = Field(4, ge=1)
    """The most pairs made from one accepted dialogue."""
    synthesize: bool = False
    """For a dialogue with no real rejected attempt, make rejected ones by injecting a labelled
    fault (`corruptions`) that the rule layer confirms; those pairs say `synthesized: true`."""
    corruptions: list[str] = Field(default_factory=lambda: list(MODEL_FAULTS))
    """The kinds of fault `synthesize` injects (stages/verify/corruption.py)."""

    @field_validator("corruptions")
    @classmethod
    def _known_kinds(cls, value: list[str]) -> list[str]:
        # Only the faults of a model's own reply (the configuration is below the stages: the
        # corruptions' module is checked to hold each of these names by the tests).
        unknown = [kind for kind in value if kind not in MODEL_FAULTS]
        if unknown:
            raise ValueError(f"unknown corruption {unknown[0]!r} (one of: {', '.join(MODEL_FAULTS)})")
        if not value:
            raise ValueError("at least one corruption kind")
        return value


class ExportConfig(Section):
    """Exports written at the end of every run, under `<root>/runs/<run_id>/export/<format>/`
    (`toolfactory export` writes any format on demand)."""

    formats: list[Literal["openai", "sharegpt", "toolbench", "toolalpaca", "xlam", "bfcl", "hf", "tasks", "trl_preference",
                          "llamafactory_ranking"]] = Field(
        default_factory=lambda: ["openai", "hf"]
    )
    """Formats to write after every run; [] writes none."""
    split_by: Literal["tool", "category"] = "tool"
    """Train / validation / test by unseen tools (ToolLLM I1-Tool) or unseen categories (I1-Cat)."""
    splits: dict[Literal["train", "validation", "test"], float] = Field(
        default_factory=lambda: {"train": 0.8, "validation": 0.1, "test": 0.1}
    )
    """Fractions of the tools (or categories) per split."""
    preference: PreferenceConfig = Field(default_factory=PreferenceConfig)
    """Preference pairs (formats `trl_preference` and `llamafactory_ranking`)."""
