"""The run-wide decisions of the curate stage, as a few compact records (ToolACE §4, §5.3).

Deduplication, the easy / medium / hard cut points and the API clusters depend on every record
of the run; applying them needs one record. So the decisions are taken once, on the measures of
the run (:mod:`.measures`), and kept as

* one :class:`Selection`: the complexity cut points (a record is easy when its (complexity, id)
  sorts before the first, medium before the second, else hard: :func:`.complexity.subsets` by
  rank, told by two values instead of a list), the {function key: cluster} map and k;
* one :class:`Verdict` per dialogue that is rejected (contaminated, duplicate, mode steering) or
  belongs to a diversity subset.

Their size grows with the functions of the pool, the duplicates and the subsets, not with the run;
each dataset shard reads them beside its own dialogues and measures (:func:`curation_of`).
"""

from __future__ import annotations

import math
from typing import Literal, Mapping, Sequence

from toolfactory.curation.complexity import Level
from toolfactory.models import Record

Cut = tuple[float, str]  # (complexity, dialogue id) of the first record of the next level


class Selection(Record):
    kind: Literal["selection"] = "selection"
    id: str = "selection"
    measured: list[str]  # the measure parts decided on
    cuts: list[Cut | None]  # easy below cuts[0], medium below cuts[1]; None: no record beyond
    clusters: dict[str, int]  # function key -> cluster
    k: int


class Verdict(Record):
    kind: Literal["verdict"] = "verdict"
    id: str  # the dialogue's
    reasons: list[str] = []  # rejection codes; empty: kept
    detail: str = ""
    duplicate: str | None = None  # the kind of the first duplicate match, for the counts
    contaminated: list[str] = []  # "<set>: <test>" of each evaluation set it overlaps, for the counts
    diversity: list[str] = []  # the diversity subsets it belongs to


def cut_ranks(n: int, quantiles: tuple[float, float]) -> tuple[int, int]:
    """The ranks (0-based, among `n` finite values sorted by (complexity, id)) of the first
    medium and the first hard record, as :func:`.complexity.subsets` cuts them; a rank of `n`
    or more means no record beyond."""
    low, high = quantiles
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"quantiles must satisfy 0 <= low <= high <= 1, got {quantiles}")
    return round(n * low), round(n * high)


def level(value: float | None, dialogue_id: str, cuts: Sequence[Cut | Sequence[object] | None]) -> Level | None:
    """The easy / medium / hard level of one record given the cut points (None for no value)."""
    if value is None or math.isnan(value):
        return None
    for name, cut in zip(("easy", "medium"), cuts, strict=True):
        if cut is None or (value, dialogue_id) < (float(cut[0]), str(cut[1])):  # type: ignore[index]
            return name  # type: ignore[return-value]
    return "hard"


def record_clusters(used: Sequence[str], clusters: Mapping[str, int]) -> frozenset[int]:
    """:func:`.diversity.dialogue_clusters` from the function keys a measure lists."""
    return frozenset(clusters[key] for key in used if key in clusters)


def curation_of(complexity: float | None, dialogue_id: str, used: Sequence[str], selection: Selection,
                verdict: Verdict | None) -> dict[str, object]:
    """What the dataset record says of its curation (the same fields the stage always wrote)."""
    return {
        "complexity": None if complexity is None else round(complexity, 4),
        "complexity_level": level(complexity, dialogue_id, selection.cuts),
        "clusters": sorted(record_clusters(used, selection.clusters)),
        "diversity": list(verdict.diversity) if verdict is not None else [],
    }
