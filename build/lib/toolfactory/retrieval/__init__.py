"""API retriever data and its evaluation (ToolLLM §3.1).

``data`` builds (instruction, relevant APIs) pairs split by tool; ``layout`` writes them as
ToolBench's retriever files; ``evaluate`` scores BM25 and embedding retrieval by NDCG@1/@5
(``metrics``); ``export`` does all of it for a run's stored tasks and accepted dialogues.
"""

from toolfactory.retrieval.data import (
    ApiDocument,
    Query,
    RetrievalDataset,
    api_document,
    build_dataset,
    document_text,
)
from toolfactory.retrieval.evaluate import bm25_scores, embedding_scores, evaluate_retrieval, markdown_table, tokenize
from toolfactory.retrieval.export import retriever_export
from toolfactory.retrieval.layout import read_corpus, read_qrels, read_queries, write_dataset
from toolfactory.retrieval.metrics import ndcg_at_k, random_ndcg_at_k

__all__ = [
    "ApiDocument",
    "Query",
    "RetrievalDataset",
    "api_document",
    "bm25_scores",
    "build_dataset",
    "document_text",
    "embedding_scores",
    "evaluate_retrieval",
    "markdown_table",
    "ndcg_at_k",
    "random_ndcg_at_k",
    "read_corpus",
    "read_qrels",
    "read_queries",
    "retriever_export",
    "tokenize",
    "write_dataset",
]
