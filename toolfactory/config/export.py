"""The `export` section: the formats written after every run and their splits."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from toolfactory.config.section import Section


class ExportConfig(Section):
    """Exports written at the end of every run, under `<root>/runs/<run_id>/export/<format>/`
    (`toolfactory export` writes any format on demand)."""

    formats: list[Literal["openai", "sharegpt", "toolbench", "toolalpaca", "xlam", "bfcl", "hf", "tasks"]] = Field(
        default_factory=lambda: ["openai", "hf"]
    )
    """Formats to write after every run; [] writes none."""
    split_by: Literal["tool", "category"] = "tool"
    """Train / validation / test by unseen tools (ToolLLM I1-Tool) or unseen categories (I1-Cat)."""
    splits: dict[Literal["train", "validation", "test"], float] = Field(
        default_factory=lambda: {"train": 0.8, "validation": 0.1, "test": 0.1}
    )
    """Fractions of the tools (or categories) per split."""
