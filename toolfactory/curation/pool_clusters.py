"""API clusters fitted on the whole pool and kept in it (ToolACE §4 diversity, §5.3.3).

The paper clusters *all* its APIs once, so a cluster number and the low/medium/high subsets built
on them mean one thing across the dataset. A nightly run sees a part of the pool only; clustering
its APIs alone would renumber the clusters every night. So the k-means centroids are fitted once
on every function of the pool (every night's tools, and the run's) and stored in the pool under a
name that says what they depend on (embedding model and k); later runs assign their functions to
the nearest stored centroid. Numbers are by size at fit time, largest first, as in
:func:`.diversity.cluster_apis`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np

from toolfactory.curation.embeddings import embed_texts
from toolfactory.curation.records import function_key, function_text
from toolfactory.models import Function

if TYPE_CHECKING:
    from toolfactory.llm import LLMGateway
    from toolfactory.storage import ObjectStore

CLUSTERS = "pool/clusters"


@dataclass(frozen=True)
class Centroids:
    model: str  # the embedding model whose space they live in
    vectors: np.ndarray  # (clusters, dimensions), row i is cluster i
    fitted_on: int  # distinct functions of the pool they were fitted on
    run_id: str  # the run that fitted them

    @property
    def k(self) -> int:
        return int(self.vectors.shape[0])

    def to_json(self) -> str:
        return json.dumps({"model": self.model, "fitted_on": self.fitted_on, "run_id": self.run_id,
                           "centroids": self.vectors.tolist()})

    @classmethod
    def from_json(cls, text: str) -> Centroids:
        data = json.loads(text)
        return cls(data["model"], np.asarray(data["centroids"], dtype=float), int(data["fitted_on"]), data["run_id"])

    def assign(self, vectors: np.ndarray) -> np.ndarray:
        """The nearest centroid of each row (k-means' own assignment rule)."""
        distances = ((vectors[:, None, :] - self.vectors[None, :, :]) ** 2).sum(axis=2)
        return distances.argmin(axis=1)


Functions = Sequence[Function] | Mapping[str, str]  # functions, or their {key: text}


def function_texts(functions: Functions) -> dict[str, str]:
    """{:func:`.records.function_key`: :func:`.records.function_text`} of distinct functions."""
    if isinstance(functions, Mapping):
        return dict(functions)
    return {function_key(fn): function_text(fn) for fn in functions}


def centroids_path(model: str, k: int) -> str:
    return f"{CLUSTERS}/{re.sub(r'[^A-Za-z0-9._-]+', '_', model)}-k{k}.json"


async def fit_centroids(functions: Functions, gateway: LLMGateway, model: str, k: int, seed: int, run_id: str) -> Centroids | None:
    """k-means over the unit embeddings of the functions; clusters renumbered largest first
    (ties by their smallest function key). None without functions."""
    from sklearn.cluster import KMeans  # ~1 s to import; only the curate stage needs it

    distinct = function_texts(functions)
    keys = sorted(distinct)
    if not keys:
        return None
    vectors = await embed_texts(gateway, distinct.values(), model=model)
    matrix = np.stack([vectors[distinct[key]] for key in keys])
    n_clusters = min(k, len(np.unique(matrix, axis=0)))
    fitted = KMeans(n_clusters=n_clusters, n_init="auto", random_state=seed).fit(matrix)
    members: dict[int, list[str]] = {}
    for key, label in zip(keys, fitted.labels_, strict=True):
        members.setdefault(int(label), []).append(key)
    order = sorted(members, key=lambda label: (-len(members[label]), members[label][0]))
    return Centroids(model, fitted.cluster_centers_[order], len(keys), run_id)


async def assign_clusters(functions: Functions, centroids: Centroids, gateway: LLMGateway) -> dict[str, int]:
    """{function key: cluster} of each function by its nearest centroid."""
    distinct = function_texts(functions)
    if not distinct:
        return {}
    vectors = await embed_texts(gateway, distinct.values(), model=centroids.model)
    keys = sorted(distinct)
    labels = centroids.assign(np.stack([vectors[distinct[key]] for key in keys]))
    return {key: int(label) for key, label in zip(keys, labels, strict=True)}


async def pool_centroids(store: ObjectStore | None, pool_functions: Functions | Callable[[], Functions],
                         gateway: LLMGateway, *, model: str, k: int, seed: int, run_id: str) -> Centroids | None:
    """The pool's stored centroids for (model, k); fitted on `pool_functions` (a callable is
    called only then: reading the whole pool is the costly part) and stored when there are none
    yet (the first writer wins: a re-run reads what its first attempt stored)."""
    path = centroids_path(model, k)
    stored = store.read_bytes_or_none(path) if store is not None else None
    if stored is not None:
        return Centroids.from_json(stored.decode())
    functions = pool_functions() if callable(pool_functions) else pool_functions
    centroids = await fit_centroids(functions, gateway, model, k, seed, run_id)
    if centroids is not None and store is not None:
        store.write_bytes(path, centroids.to_json().encode())
    return centroids
