"""Train / validation / test splits by tool or by category, so that the test split measures
generalization to tools (or categories) the model never saw — ToolLLM §3's I1-Tool and I1-Cat
levels, which hold out tools and categories rather than instructions.

Each unit (a tool id, or a category) is assigned a split by a hash of (seed, unit) compared with
the cumulative fractions: the same on every machine and every run, independent of record order,
so an export can be streamed and re-run. A record goes to the *latest* split among its units'
(train < validation < test): a record that uses a test tool is a test record, so no test tool
(or category) ever appears in a training or validation record, and no validation tool in a
training record. Multi-tool records make the later splits a little larger than their fraction.

Units of a record: its ``source_tools`` (ids, or categories with ``by="category"``). A record
without ``source_tools`` (imported data) is split by the names of its functions, each name a
unit, in both modes: the category of an imported function is unknown. ToolLLM's ``Finish`` is
never a unit: every ToolLLM record offers it, so it would drag all of them into one split.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Literal

from toolfactory.export.base import ExportError
from toolfactory.export.turns import FINISH
from toolfactory.models import Dialogue

SPLITS: tuple[str, ...] = ("train", "validation", "test")
BY = ("tool", "category")


@dataclass(frozen=True)
class SplitSpec:
    """Fractions of the units (tools or categories) in each split, and what a unit is."""

    train: float = 0.8
    validation: float = 0.1
    test: float = 0.1
    by: Literal["tool", "category"] = "tool"
    """``tool``: unseen tools in test (I1-Tool); ``category``: unseen categories (I1-Cat)."""

    def __post_init__(self) -> None:
        for name, value in self.fractions:
            if not (0.0 <= value <= 1.0) or math.isnan(value):
                raise ExportError(f"split fraction {name}={value!r}: a fraction is between 0 and 1")
        total = sum(value for _, value in self.fractions)
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            raise ExportError(f"split fractions {dict(self.fractions)} sum to {total:g}, not 1")
        if self.by not in BY:
            raise ExportError(f"split by {self.by!r}: allowed values are {', '.join(BY)}")

    @property
    def fractions(self) -> tuple[tuple[str, float], ...]:
        return (("train", self.train), ("validation", self.validation), ("test", self.test))

    def to_dict(self) -> dict[str, object]:
        return {"by": self.by, "fractions": dict(self.fractions)}


def unit_split(unit: str, spec: SplitSpec, seed: int) -> str:
    """The split of one unit: where a hash of (seed, unit), uniform in [0, 1), falls."""
    digest = hashlib.sha256(f"{seed}\x1f{unit}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64
    cumulative = 0.0
    for name, fraction in spec.fractions:
        cumulative += fraction
        if point < cumulative:
            return name
    return next(name for name, fraction in reversed(spec.fractions) if fraction > 0)


def record_units(dialogue: Dialogue, by: str) -> list[str]:
    """The units that decide a record's split (see the module doc)."""
    if dialogue.source_tools:
        if by == "category":
            return sorted({f"category:{t.category}" for t in dialogue.source_tools})
        return sorted({f"tool:{t.id}" for t in dialogue.source_tools})
    names = sorted({f"function:{f.name}" for f in dialogue.tools if f.name != FINISH})
    return names or [f"record:{dialogue.id}"]


def record_split(dialogue: Dialogue, spec: SplitSpec, seed: int) -> tuple[str, list[str]]:
    """(the record's split, its units): the latest split among the units'."""
    units = record_units(dialogue, spec.by)
    order = {name: i for i, name in enumerate(SPLITS)}
    return max((unit_split(unit, spec, seed) for unit in units), key=order.__getitem__), units
