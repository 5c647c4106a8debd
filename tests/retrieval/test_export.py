"""``retriever_export`` on a run in a local object store: the join with accepted dialogues, the
files and the report; embedding retrieval through the gateway against the simulator over HTTP."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from toolfactory.config import StorageConfig, load_config
from toolfactory.errors import LLMFailure
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue, Task
from toolfactory.retrieval import evaluate as evaluate_module
from toolfactory.retrieval.data import build_dataset
from toolfactory.retrieval.evaluate import embedding_scores, evaluate_retrieval
from toolfactory.retrieval.export import retriever_export
from toolfactory.storage.shards import write_rows
from toolfactory.storage import ObjectStore

from .helpers import tasks

FILES = ["corpus.tsv", "qrels.test.tsv", "qrels.train.tsv", "report.json", "report.md", "test.query.txt", "train.query.txt"]


def dialogue(task: Task) -> Dialogue:
    return Dialogue(id=f"d-{task.id}", task_id=task.id, tools=[], messages=[])


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    """Run `r`: its tasks in two parts; every task's dialogue accepted except the Movies tool's.
    The `rejected/` parts hold records that must not be read."""
    store = ObjectStore.open(StorageConfig(root=str(tmp_path / "store")))
    all_tasks = tasks()
    half = len(all_tasks) // 2
    for index, part in enumerate((all_tasks[:half], all_tasks[half:])):
        write_rows(store, f"runs/r/tasks/part-{index:05d}.parquet", [(t.id, t.to_json()) for t in part])
    stray = Task(id="stray", tools=all_tasks[0].tools, instruction="A rejected task", relevant_functions=["forecast"])
    write_rows(store, "runs/r/tasks/rejected/part-00000.parquet", [(stray.id, stray.to_json())])
    accepted = [dialogue(t) for t in all_tasks if t.tools[0].name != "Movies"]
    write_rows(store, "runs/r/verify/part-00000.parquet", [(d.id, d.to_json()) for d in accepted])
    write_rows(store, "runs/r/verify/rejected/part-00000.parquet", [("x", dialogue(stray).to_json())])
    return store


def export(store: ObjectStore, out: Path, gateway: LLMGateway | None = None, **options: Any) -> dict[str, Any]:
    return asyncio.run(retriever_export(store, "r", out, gateway=gateway, **options))


def all_query_texts(out: Path) -> list[str]:
    return [line.split("\t", 1)[1] for name in ("train.query.txt", "test.query.txt") for line in (out / name).read_text().splitlines()]


def test_pairs_come_from_tasks_with_an_accepted_dialogue(store: ObjectStore, tmp_path: Path) -> None:
    report = export(store, tmp_path / "out")
    texts = all_query_texts(tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == FILES
    assert len(texts) == len(tasks()) - 2  # the two Movies tasks have no accepted dialogue
    assert not any("film" in text or "rejected" in text for text in texts)
    assert report["data"]["tasks_read"] == len(tasks()) and report["data"]["tasks_used"] == len(tasks()) - 2
    assert report["data"]["documents"] == 10  # Movies' APIs are offered by no used task


def test_all_tasks_when_asked(store: ObjectStore, tmp_path: Path) -> None:
    report = export(store, tmp_path / "out", all_tasks=True)
    assert len(all_query_texts(tmp_path / "out")) == len(tasks())
    assert report["data"]["source"] == "all tasks of the run" and report["data"]["documents"] == 12


def test_the_report_without_a_gateway(store: ObjectStore, tmp_path: Path) -> None:
    report = export(store, tmp_path / "out", seed=1)
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == report
    evaluation = report["evaluation"]
    assert evaluation["split"] == "test" and evaluation["queries"] == report["data"]["test_queries"] > 0
    assert set(evaluation["methods"]) == {"random", "bm25"} and "embedding" in evaluation["skipped"]
    assert all(0.0 <= v <= 1.0 for scores in evaluation["methods"].values() for v in scores.values())
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| Method | NDCG@1 | NDCG@5 |" in markdown and "| BM25 (BM25Okapi) |" in markdown
    assert "embedding not run" in markdown


def test_an_empty_run_writes_empty_files_and_says_so(tmp_path: Path) -> None:
    empty = ObjectStore.open(StorageConfig(root=str(tmp_path / "empty")))
    report = export(empty, tmp_path / "out")
    assert report["data"]["tasks_read"] == 0 and not report["evaluation"]["methods"]
    assert (tmp_path / "out" / "test.query.txt").read_text() == ""
    assert "no queries" in (tmp_path / "out" / "report.md").read_text()


def gateway_for(simulator_url: str) -> LLMGateway:
    return LLMGateway(Endpoint(simulator_url, "sk-test"), load_config(None, [], environ={}).llm)


def test_embedding_retrieval_through_the_gateway(
    store: ObjectStore, tmp_path: Path, simulator_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evaluate_module, "EMBEDDING_BATCH", 4)  # several requests per text list

    async def go() -> tuple[dict[str, Any], int]:
        async with gateway_for(simulator_url) as gateway:
            report = await retriever_export(store, "r", tmp_path / "out", gateway=gateway)
            return report, gateway.meter.role("embedding").calls

    report, calls = asyncio.run(go())
    methods = report["evaluation"]["methods"]
    assert set(methods) == {"random", "bm25", "embedding"} and not report["evaluation"]["skipped"]
    assert methods["embedding"]["model"] == "sim-embedding"
    # the simulator's vectors are hashed words, not a model: only the shape of the result is checked
    assert all(0.0 <= methods["embedding"][f"ndcg@{k}"] <= 1.0 for k in (1, 5))
    assert calls == -(-report["evaluation"]["queries"] // 4) + -(-report["data"]["documents"] // 4)
    assert "| Embedding (`sim-embedding`) |" in (tmp_path / "out" / "report.md").read_text()


def test_a_query_identical_to_a_document_ranks_it_first(simulator_url: str) -> None:
    documents = [doc.text for doc in build_dataset(tasks(), seed=0).corpus]

    async def go() -> Any:
        async with gateway_for(simulator_url) as gateway:
            return await embedding_scores(gateway, [documents[4], documents[9]], documents, model="sim-embedding")

    scores = asyncio.run(go())
    assert scores.shape == (2, len(documents))
    assert scores.argmax(axis=1).tolist() == [4, 9]
    assert scores[0, 4] == pytest.approx(1.0) and scores[1, 9] == pytest.approx(1.0)


class FailingGateway:
    """Stands in for a gateway whose embedding requests failed after its retries."""

    async def embed(self, texts: list[str], *, model: str) -> list[list[float]]:
        raise LLMFailure("llm_server_error", "500 from the endpoint", transient=True)


def test_failed_embedding_requests_keep_the_bm25_scores() -> None:
    dataset = build_dataset(tasks(), seed=0)
    report = asyncio.run(evaluate_retrieval(dataset, gateway=FailingGateway(), embedding_model="m"))  # type: ignore[arg-type]
    assert set(report["methods"]) == {"random", "bm25"}
    assert "llm_server_error" in report["skipped"]["embedding"]
