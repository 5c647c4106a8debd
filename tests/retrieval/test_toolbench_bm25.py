"""BM25 on ToolBench's real G1 queries: tools converted as a ToolBench source is, each query's
relevant APIs named as the converter names functions (``{api}_for_{tool}``)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from toolfactory.models import Task
from toolfactory.retrieval.data import RetrievalDataset, build_dataset
from toolfactory.retrieval.evaluate import bm25_scores, mean_ndcg, random_baseline
from toolfactory.retrieval.metrics import ndcg_at_k
from toolfactory.definitions.convert import convert, function_name
from toolfactory.stages.tools.sources import split_source


def toolbench_tasks(path: Path) -> list[Task]:
    pool = {tool.name: tool for raw in split_source(path, "toolbench") for tool in convert("toolbench", raw)}
    tasks = []
    for query in json.loads(path.read_text()):
        names = dict.fromkeys(api["tool_name"] for api in query["api_list"])
        relevant = [
            function_name(function_name(api).lower() + "_for_" + function_name(tool).lower())
            for tool, api in query["relevant APIs"]
        ]
        tasks.append(Task(id=str(query["query_id"]), tools=[pool[n] for n in names], instruction=query["query"], relevant_functions=relevant))
    return tasks


@pytest.fixture(scope="module")
def g1(shared_data: Path) -> RetrievalDataset:
    return build_dataset(toolbench_tasks(shared_data / "toolbench" / "instruction" / "G1_query.json"), seed=0)


def test_every_relevant_api_of_the_real_queries_is_a_corpus_document(g1: RetrievalDataset) -> None:
    assert g1.stats["unknown_relevant_functions"] == 0 and g1.stats["tasks_without_relevant_api"] == 0
    assert len(g1.train) + len(g1.test) == 5
    assert len(g1.corpus) == 12  # SQUAKE's 2 APIs and Transportistas de Argentina's 10
    assert all(len(q.docids) == 2 for q in g1.train + g1.test)


def test_bm25_ranks_a_relevant_api_first_and_beats_random_rankings_by_far(g1: RetrievalDataset) -> None:
    queries = g1.train + g1.test  # the five queries are too few to score one split alone
    relevant = [[docid - 1 for docid in q.docids] for q in queries]
    scores = bm25_scores([q.text for q in queries], [doc.text for doc in g1.corpus])
    bm25 = mean_ndcg(scores, relevant)

    rng = random.Random(0)  # random rankings of the same corpus for the same queries
    simulated = float(np.mean([
        ndcg_at_k([rng.random() for _ in g1.corpus], rel, 5) for _ in range(2000) for rel in relevant
    ]))
    assert simulated == pytest.approx(random_baseline(relevant, len(g1.corpus))["ndcg@5"], abs=0.02)

    assert [int(np.argmax(row)) in rel for row, rel in zip(scores, relevant)] == [True] * 5
    assert bm25["ndcg@1"] == 1.0
    assert bm25["ndcg@5"] > 0.9 and bm25["ndcg@5"] > 2.5 * simulated  # random: about 0.30
