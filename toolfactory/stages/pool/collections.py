"""Collections for tools that come without one (ToolLLM §2.1: RapidAPI's category → collection → tool).

ToolLLM draws its I3 (intra-collection) tool sets from RapidAPI collections. A tool keeps the
collections its source gives it (the seed catalog's, a ToolBench tool's ``collection`` /
``collections`` field, or the query groups of a ToolBench G3 file, which were drawn from one
collection each). A tool with none — ToolBench's tool files and query files carry no
collection — gets one derived from its neighbours in its own category, so that a collection
never crosses a category (as on RapidAPI, where a collection is a curated subset of related
tools):

* each tool is described by TF-IDF over its name, description and its functions' names and
  descriptions (scikit-learn's ``TfidfVectorizer``, English stop words removed);
* the tools of one category are grouped by agglomerative clustering with average linkage on
  cosine distance (``AgglomerativeClustering``) into ``ceil(n / size)`` clusters, `size` being
  `tools.pool.collection_size`: deterministic, and tools that share words end up together;
* a cluster is named after its category and its three heaviest terms
  (``"Sports / football, league, scores"``). A cluster of one tool is no collection: it has no
  partner to be sampled with.

Only the tools of one pool shard are clustered, so derived collections never mix tools of
different runs; the names are stored with the tools in the pool.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Sequence

from toolfactory.models import Tool

DERIVED = "derived"  # `provenance["collections"]` of a tool whose collections were derived


def tool_text(tool: Tool) -> str:
    parts = [tool.name, tool.description]
    for fn in tool.functions:
        parts += [fn.name.replace("_", " "), fn.description]
    return " ".join(p for p in parts if p)


def derive_collections(tools: Sequence[Tool], *, size: int) -> dict[str, list[str]]:
    """Collection names for the tools of `tools` that have none, by tool id (see the module doc)."""
    from sklearn.cluster import AgglomerativeClustering  # ~1 s to import; only this stage needs it
    from sklearn.feature_extraction.text import TfidfVectorizer

    by_category: dict[str, list[Tool]] = defaultdict(list)
    for tool in tools:
        if not tool.collections:
            by_category[tool.category].append(tool)
    derived: dict[str, list[str]] = {}
    used: set[str] = set()
    for category, members in sorted(by_category.items()):
        if len(members) < 2:
            continue
        members = sorted(members, key=lambda t: t.id)  # the input order must not change the clusters
        vectorizer = TfidfVectorizer(stop_words="english", token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z]+\b")
        try:
            matrix = vectorizer.fit_transform([tool_text(t) for t in members])
        except ValueError:  # no word at all (only stop words or digits): one collection for the category
            matrix = None
        clusters = math.ceil(len(members) / size)
        if matrix is None or clusters == 1 or matrix.shape[1] == 0:
            labels = [0] * len(members)
        else:
            dense = matrix.toarray()
            if not dense.any(axis=1).all():  # a tool with no term has no cosine distance: give it a tiny one
                dense[~dense.any(axis=1), 0] = 1e-9
            model = AgglomerativeClustering(n_clusters=clusters, metric="cosine", linkage="average")
            labels = [int(label) for label in model.fit_predict(dense)]
        terms = vectorizer.get_feature_names_out() if matrix is not None else []
        for label in sorted(set(labels)):
            rows = [i for i, value in enumerate(labels) if value == label]
            if len(rows) < 2:
                continue
            name = category
            if matrix is not None and len(terms):
                weights = matrix[rows].sum(axis=0).A1
                top = [str(terms[i]) for i in sorted(range(len(terms)), key=lambda i: (-weights[i], terms[i]))[:3]]
                name = f"{category} / {', '.join(top)}"
            base, n = name, 1
            while name in used:  # two clusters with the same heaviest terms stay two collections
                n += 1
                name = f"{base} ({n})"
            used.add(name)
            for i in rows:
                derived[members[i].id] = [name]
    return derived
