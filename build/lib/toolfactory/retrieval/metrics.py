"""NDCG@k with binary relevance, the metric of ToolLLM §3.1 (Table 2).

ToolBench scores a retriever with ``sklearn.metrics.ndcg_score`` over the scores of the whole
corpus (toolbench/retrieval/api_evaluator.py): every relevant API of a query has gain 1, the
discount of rank ``i`` (1-based) is ``1 / log2(i + 1)``, and the ideal DCG puts all relevant APIs
first. This is the same metric in numpy, so that the project does not depend on scikit-learn
for one function; the tests check it against hand-computed values and against scikit-learn.

Ties are averaged as scikit-learn does (``ignore_ties=False``): documents with equal scores
share the mean gain of their group. That is the expected NDCG over every order of the tied
documents, so a retriever that gives many documents the same score (BM25 gives 0 to every
document without a query term) is neither rewarded nor punished by the order of the corpus.
"""

from __future__ import annotations

from typing import Collection, Sequence

import numpy as np


def _discounts(n: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=float))


def ideal_dcg(n_relevant: int, k: int) -> float:
    """DCG@k of a ranking that puts all `n_relevant` relevant documents first."""
    return float(_discounts(min(k, n_relevant)).sum())


def ndcg_at_k(scores: Sequence[float] | np.ndarray, relevant: Collection[int], k: int) -> float:
    """NDCG@k of one query: `scores` over the whole corpus, `relevant` the indices of its relevant
    documents (all of them count, even when there are more than `k`)."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not relevant:
        raise ValueError("NDCG is undefined for a query without relevant documents")
    values = np.asarray(scores, dtype=float)
    gains = np.zeros(len(values))
    gains[list(relevant)] = 1.0
    order = np.argsort(-values, kind="stable")
    ranked_scores, ranked_gains = values[order], gains[order]
    discounts = _discounts(min(k, len(values)))
    dcg, start = 0.0, 0
    while start < len(discounts):
        # the group of documents tied with the one at `start`
        end = start + int(np.searchsorted(-ranked_scores[start:], -ranked_scores[start], side="right"))
        dcg += float(ranked_gains[start:end].mean()) * float(discounts[start:end].sum())
        start = end
    return dcg / ideal_dcg(len(relevant), k)


def random_ndcg_at_k(n_relevant: int, n_documents: int, k: int) -> float:
    """The expected NDCG@k of a uniformly random ranking: each rank holds a relevant document with
    probability ``n_relevant / n_documents``. The baseline a retriever has to beat."""
    if not 0 < n_relevant <= n_documents:
        raise ValueError(f"need 0 < n_relevant <= n_documents, got {n_relevant} of {n_documents}")
    expected_dcg = n_relevant / n_documents * float(_discounts(min(k, n_documents)).sum())
    return expected_dcg / ideal_dcg(n_relevant, k)
