"""API diversity: clusters of the run's APIs, their coverage, and the low/medium/high subsets of
ToolACE's diversity ablation (§5.3.3).

The paper clusters all APIs by name and description with k-means into 30 groups, builds API sets
from 6, 14 and 30 of the clusters, assigns each instance to the sets that hold its APIs, and
samples the same number of instances from each. Here the clusters are numbered by size (0 is the
cluster with the most functions), so "the first 6" are the largest ones and the low-diversity
pool, which bounds the common subset size, is as large as it can be.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from toolfactory.curation.embeddings import EMBEDDING_BATCH, embed_texts
from toolfactory.curation.records import function_key, function_text, used_functions
from toolfactory.models import Dialogue, Function

if TYPE_CHECKING:
    from toolfactory.llm import LLMGateway

DEFAULT_CLUSTERS = 30
# Share of the clusters each subset may draw from: the paper's 6, 14 and 30 of 30.
DIVERSITY_LEVELS: dict[str, float] = {"low": 6 / 30, "medium": 14 / 30, "high": 1.0}


async def cluster_apis(
    functions: Sequence[Function] | Mapping[str, str],
    gateway: LLMGateway,
    model: str,
    k: int = DEFAULT_CLUSTERS,
    seed: int = 0,
    *,
    batch_size: int = EMBEDDING_BATCH,
) -> dict[str, int]:
    """{function key: cluster} by k-means over the unit embeddings of ``"name: description"``
    (of the functions, or of the texts of a {function key: text} map).

    Fewer than `k` clusters when there are fewer distinct embeddings (k-means cannot make more
    clusters than points). Labels are renumbered by cluster size, largest first (ties by the
    smallest key), so they are the same for the same functions and seed in any input order."""
    from sklearn.cluster import KMeans  # ~1 s to import; only the curate stage needs it

    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    distinct = dict(functions) if isinstance(functions, Mapping) else {function_key(fn): function_text(fn) for fn in functions}
    keys = sorted(distinct)
    if not keys:
        return {}
    vectors = await embed_texts(gateway, distinct.values(), model=model, batch_size=batch_size)
    matrix = np.stack([vectors[distinct[key]] for key in keys])
    n_clusters = min(k, len(np.unique(matrix, axis=0)))
    labels = KMeans(n_clusters=n_clusters, n_init="auto", random_state=seed).fit_predict(matrix)
    members: dict[int, list[str]] = {}
    for key, label in zip(keys, labels, strict=True):
        members.setdefault(int(label), []).append(key)
    order = sorted(members.values(), key=lambda group: (-len(group), group[0]))
    return {key: number for number, group in enumerate(order) for key in group}


def dialogue_clusters(dialogue: Dialogue, clusters: Mapping[str, int]) -> frozenset[int]:
    """The clusters of the functions the dialogue calls (or offers, when it calls none)."""
    keys = (function_key(fn) for fn in used_functions(dialogue))
    return frozenset(clusters[key] for key in keys if key in clusters)


@dataclass(frozen=True)
class Coverage:
    """How a set of records spreads over the `k` API clusters."""

    k: int
    used: int  # clusters at least one record touches
    records_per_cluster: dict[int, int]  # every cluster 0..k-1, zeros included
    records_without_cluster: int

    @property
    def share(self) -> float:
        return self.used / self.k if self.k else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "k": self.k,
            "used": self.used,
            "share": self.share,
            "records_per_cluster": {str(c): n for c, n in self.records_per_cluster.items()},
            "records_without_cluster": self.records_without_cluster,
        }


def coverage(cluster_sets: Sequence[frozenset[int]], k: int) -> Coverage:
    """Coverage of records given their cluster sets (a record counts once in each of its clusters)."""
    per_cluster = dict.fromkeys(range(k), 0)
    for clusters in cluster_sets:
        for cluster in clusters:
            if cluster not in per_cluster:
                raise ValueError(f"cluster {cluster} is not one of the k={k} clusters 0..{k - 1}")
            per_cluster[cluster] += 1
    return Coverage(
        k=k,
        used=sum(1 for n in per_cluster.values() if n),
        records_per_cluster=per_cluster,
        records_without_cluster=sum(1 for clusters in cluster_sets if not clusters),
    )


def diversity_subsets(
    cluster_sets: Sequence[frozenset[int]],
    k: int,
    seed: int,
    *,
    size: int | None = None,
    levels: Mapping[str, float] = DIVERSITY_LEVELS,
) -> dict[str, list[int]]:
    """Equal-sized subsets (indices into `cluster_sets`, ascending) of growing API diversity.

    A level with share s may use the records whose clusters all lie in the first
    ``max(1, round(s·k))`` clusters (records with no cluster belong to none). The common size is
    the smallest such pool (capped by `size`). Within its pool each level first picks greedily the
    record that adds the most clusters not yet covered, until none adds any, then fills up at
    random: greedy covering makes each subset span as many of its clusters as its size allows, so
    coverage grows with the level, and the random rest keeps the subset otherwise a plain sample,
    as the paper's random draw is. One ``random.Random(f"{seed}:{level}")`` per level orders the
    pool, and so breaks the greedy ties too."""
    pools: dict[str, list[int]] = {}
    for level, share in levels.items():
        allowed = max(1, round(share * k))
        pools[level] = [i for i, clusters in enumerate(cluster_sets) if clusters and max(clusters) < allowed]
    common = min((len(pool) for pool in pools.values()), default=0)
    if size is not None:
        common = min(common, size)
    return {level: _select(pool, cluster_sets, common, random.Random(f"{seed}:{level}")) for level, pool in pools.items()}


def _select(pool: list[int], cluster_sets: Sequence[frozenset[int]], size: int, rng: random.Random) -> list[int]:
    order = list(pool)
    rng.shuffle(order)
    chosen: set[int] = set()
    covered: set[int] = set()
    while len(chosen) < size:
        best = max((i for i in order if i not in chosen), key=lambda i: len(cluster_sets[i] - covered), default=None)
        if best is None or not cluster_sets[best] - covered:
            break
        chosen.add(best)
        covered |= cluster_sets[best]
    rest = [i for i in order if i not in chosen][: size - len(chosen)]
    return sorted(chosen.union(rest))
