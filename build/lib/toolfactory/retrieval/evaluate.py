"""Evaluating API retrieval on the test split: BM25 and embedding retrieval, NDCG@1 and @5.

ToolLLM §3.1 compares its trained retriever with two baselines, BM25 and OpenAI's
text-embedding-ada-002, by NDCG@1 and NDCG@5 (Table 2). Both baselines are here: BM25 with
``rank_bm25.BM25Okapi`` (its defaults k1=1.5, b=0.75), and any embedding model behind an
OpenAI-compatible ``/v1/embeddings`` endpoint, through the project's gateway, ranked by cosine
similarity. Every query is scored against the whole corpus (train and test tools alike), as
ToolBench's evaluator does, and a uniformly random ranking's expected score is reported too,
so that a figure can be read against what chance gives on the same corpus.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from rank_bm25 import BM25Okapi

from toolfactory.errors import LLMFailure
from toolfactory.retrieval.data import RetrievalDataset
from toolfactory.retrieval.metrics import ndcg_at_k, random_ndcg_at_k

if TYPE_CHECKING:
    from toolfactory.llm import LLMGateway

KS = (1, 5)
EMBEDDING_BATCH = 256  # inputs per /v1/embeddings request, well under OpenAI's 2048

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+")
# Lucene's default English stop set (EnglishAnalyzer), which Pyserini's BM25 baselines use. In a
# corpus of a few hundred APIs "the" or "to" occur in few descriptions, so their idf is high and
# a wordy query would match the wordiest description instead of the API it names.
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)


def tokenize(text: str) -> list[str]:
    """BM25's tokens: camelCase split (``getUserInfo`` → get user info), then lower-cased runs of
    letters and digits (any script), so ``checkhealth_for_squake`` and ``/cities/states`` become
    words, less :data:`STOP_WORDS`. No stemming: API names are not English a stemmer knows."""
    words = (word.lower() for word in _WORD.findall(_CAMEL_BOUNDARY.sub(" ", text)))
    return [word for word in words if word not in STOP_WORDS]


def bm25_scores(queries: Sequence[str], documents: Sequence[str]) -> np.ndarray:
    """(queries × documents) BM25Okapi scores."""
    if not queries or not documents:
        return np.zeros((len(queries), len(documents)))
    index = BM25Okapi([tokenize(doc) or [""] for doc in documents])  # an empty document breaks avgdl
    return np.array([index.get_scores(tokenize(query)) for query in queries], dtype=float)


def _unit_rows(vectors: list[list[float]]) -> np.ndarray:
    matrix = np.asarray(vectors, dtype=float)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0.0, 1.0, norms)  # a zero vector scores 0 against all


async def _embed(gateway: LLMGateway, texts: Sequence[str], model: str) -> np.ndarray:
    vectors: list[list[float]] = []
    for start in range(0, len(texts), EMBEDDING_BATCH):
        vectors += await gateway.embed(texts[start : start + EMBEDDING_BATCH], model=model)
    return _unit_rows(vectors)


async def embedding_scores(gateway: LLMGateway, queries: Sequence[str], documents: Sequence[str], *, model: str) -> np.ndarray:
    """(queries × documents) cosine similarities of the embeddings `model` gives."""
    if not queries or not documents:
        return np.zeros((len(queries), len(documents)))
    return await _embed(gateway, queries, model) @ (await _embed(gateway, documents, model)).T


def mean_ndcg(scores: np.ndarray, relevant: Sequence[Sequence[int]], ks: Sequence[int] = KS) -> dict[str, float]:
    """Mean NDCG@k over queries; row i of `scores` ranks the corpus for the query whose relevant
    documents are at the indices ``relevant[i]``."""
    return {
        f"ndcg@{k}": float(np.mean([ndcg_at_k(row, rel, k) for row, rel in zip(scores, relevant, strict=True)]))
        for k in ks
    }


def random_baseline(relevant: Sequence[Sequence[int]], n_documents: int, ks: Sequence[int] = KS) -> dict[str, float]:
    """Mean expected NDCG@k of a uniformly random ranking of the corpus, query by query."""
    return {f"ndcg@{k}": float(np.mean([random_ndcg_at_k(len(rel), n_documents, k) for rel in relevant])) for k in ks}


async def evaluate_retrieval(
    dataset: RetrievalDataset,
    *,
    split: str = "test",
    gateway: LLMGateway | None = None,
    embedding_model: str | None = None,
) -> dict[str, Any]:
    """NDCG@1/@5 of the random baseline, BM25 and (with a gateway and a model) embeddings on
    `split`. Methods are absent, with the reason under ``skipped``, when they cannot run."""
    queries = dataset.split(split)
    documents = [doc.text for doc in dataset.corpus]
    report: dict[str, Any] = {"split": split, "queries": len(queries), "documents": len(documents), "methods": {}, "skipped": {}}
    if not queries:
        report["skipped"]["all"] = f"the {split} split has no queries"
        return report
    relevant = [[docid - 1 for docid in query.docids] for query in queries]  # docids count from 1
    texts = [query.text for query in queries]
    report["methods"]["random"] = random_baseline(relevant, len(documents))
    report["methods"]["bm25"] = mean_ndcg(bm25_scores(texts, documents), relevant)
    if gateway is None or not embedding_model:
        report["skipped"]["embedding"] = "no LLM gateway or embedding model given"
        return report
    try:
        scores = await embedding_scores(gateway, texts, documents, model=embedding_model)
    except LLMFailure as exc:  # the gateway already retried: keep what BM25 found, and why not more
        report["skipped"]["embedding"] = f"the embedding requests failed ({exc})"
    else:
        report["methods"]["embedding"] = {**mean_ndcg(scores, relevant), "model": embedding_model}
    return report


_LABELS = {"random": "Random ranking (expected)", "bm25": "BM25 (BM25Okapi)", "embedding": "Embedding"}


def markdown_table(report: dict[str, Any]) -> str:
    """The report's scores as a Markdown table, ×100 like ToolLLM's Table 2."""
    lines = ["| Method | NDCG@1 | NDCG@5 |", "| --- | ---: | ---: |"]
    for name, scores in report.get("methods", {}).items():
        label = _LABELS.get(name, name)
        if "model" in scores:
            label += f" (`{scores['model']}`)"
        lines.append(f"| {label} | {100 * scores['ndcg@1']:.1f} | {100 * scores['ndcg@5']:.1f} |")
    return "\n".join(lines)
