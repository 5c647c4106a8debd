"""ToolBench's API retriever files, written and read (ToolLLM §3.1).

ToolBench ships its retriever data as a folder (``data/retrieval/G1/``), written by
``preprocess/preprocess_retriever_data.py`` with pandas and read back by
``toolbench/retrieval/train.py``; these are the same files::

    corpus.tsv        header ``docid<TAB>document_content``; one row per API: its docid and the
                      JSON (``json.dumps``) of its ToolBench ``api_list`` entry (category_name,
                      tool_name, api_name, api_description, required_parameters,
                      optional_parameters, method, template_response)
    train.query.txt   ``qid<TAB>query``, no header
    test.query.txt    the same, for the test split
    qrels.train.tsv   ``qid<TAB>0<TAB>docid<TAB>1``, no header: one row per relevant API
    qrels.test.tsv    the same, for the test split

Fields are quoted as pandas' ``to_csv(sep="\\t")`` quotes them (the csv module's minimal quoting,
quotes doubled, ``\\n`` line ends). Differences, all invisible to ToolBench's readers (which
build dicts keyed by id): a query or a document is written once, not once per relevant API, and
each document's JSON also holds the ``tool_id`` of its pool tool.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from toolfactory.retrieval.data import RetrievalDataset

CORPUS = "corpus.tsv"
TRAIN_QUERIES, TEST_QUERIES = "train.query.txt", "test.query.txt"
TRAIN_QRELS, TEST_QRELS = "qrels.train.tsv", "qrels.test.tsv"


def _writer(handle: Any) -> Any:
    # pandas' to_csv(sep="\t") on Linux: minimal quoting with doubled quotes, "\n" line ends
    return csv.writer(handle, delimiter="\t", quoting=csv.QUOTE_MINIMAL, lineterminator="\n")


def write_dataset(dataset: RetrievalDataset, out_dir: str | Path) -> list[Path]:
    """Write the five files of the layout into `out_dir`; their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    with open(out / CORPUS, "w", newline="", encoding="utf-8") as handle:
        writer = _writer(handle)
        writer.writerow(["docid", "document_content"])
        writer.writerows([doc.docid, json.dumps(doc.content)] for doc in dataset.corpus)
    paths.append(out / CORPUS)
    for queries_name, qrels_name, queries in (
        (TRAIN_QUERIES, TRAIN_QRELS, dataset.train),
        (TEST_QUERIES, TEST_QRELS, dataset.test),
    ):
        with open(out / queries_name, "w", newline="", encoding="utf-8") as handle:
            _writer(handle).writerows([q.qid, q.text] for q in queries)
        with open(out / qrels_name, "w", newline="", encoding="utf-8") as handle:
            _writer(handle).writerows([q.qid, 0, docid, 1] for q in queries for docid in q.docids)
        paths += [out / queries_name, out / qrels_name]
    return paths


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return [row for row in csv.reader(handle, delimiter="\t") if row]


def read_corpus(path: str | Path) -> dict[int, dict[str, Any]]:
    """docid → document JSON of a ``corpus.tsv`` (ours or ToolBench's)."""
    rows = _rows(Path(path))
    if not rows or rows[0] != ["docid", "document_content"]:
        raise ValueError(f"{path}: expected the header 'docid<TAB>document_content'")
    return {int(docid): json.loads(content) for docid, content in rows[1:]}


def read_queries(path: str | Path) -> dict[int, str]:
    """qid → query text of a ``*.query.txt``."""
    return {int(qid): text for qid, text in _rows(Path(path))}


def read_qrels(path: str | Path) -> dict[int, set[int]]:
    """qid → docids of the relevant documents of a ``qrels.*.tsv`` (rows with label > 0)."""
    relevant: dict[int, set[int]] = {}
    for qid, _, docid, label in _rows(Path(path)):
        if int(label) > 0:
            relevant.setdefault(int(qid), set()).add(int(docid))
    return relevant
