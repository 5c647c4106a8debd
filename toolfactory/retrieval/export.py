"""``retriever_export``: a run's API retriever data and its evaluation, written to a folder.

The pairs come from the run's tasks (``runs/<run_id>/tasks``) whose dialogue the verify stage
accepted (``runs/<run_id>/verify``, joined on ``task_id``): an instruction whose dialogue failed
verification may not be solvable with the APIs it names, and would teach the retriever a wrong
positive. ``all_tasks=True`` takes every task instead (a run without a verify stage, or to
measure what verification removes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolfactory.models import Task
from toolfactory.retrieval.data import build_dataset
from toolfactory.retrieval.evaluate import evaluate_retrieval, markdown_table
from toolfactory.retrieval.layout import write_dataset
from toolfactory.storage.shards import dataset_parts, read_records, stage_parts
from toolfactory.storage import ObjectStore

if TYPE_CHECKING:
    from toolfactory.llm import LLMGateway

DEFAULT_EMBEDDING_MODEL = "sim-embedding"  # the simulator's; pass the real model's name otherwise
REPORT_JSON, REPORT_MD = "report.json", "report.md"


def read_tasks(store: ObjectStore, run_id: str) -> list[Task]:
    return [Task.model_validate(r) for path in stage_parts(store, run_id, "tasks") for r in read_records(store, path)]


def accepted_task_ids(store: ObjectStore, run_id: str) -> set[str]:
    """Ids of the tasks with an accepted dialogue (only ``task_id`` is read of each dialogue)."""
    return {str(r["task_id"]) for path in dataset_parts(store, run_id) for r in read_records(store, path)}


def _markdown(report: dict[str, Any]) -> str:
    data = report["data"]
    lines = [
        f"# API retriever evaluation of run `{report['run_id']}` (ToolLLM §3.1)",
        "",
        f"{data['documents']} API documents; train: {data['train_queries']} queries over {data['train_tools']} tools; "
        f"test: {data['test_queries']} queries over {data['test_tools']} tools unseen in training "
        f"(split by tool, seed {report['seed']}). Queries come from {data['source']}.",
        "",
    ]
    evaluation = report["evaluation"]
    if evaluation["methods"]:
        lines += [markdown_table(evaluation), ""]
    lines.append(f"Metric: {report['metric']}")
    lines += [
        f"Not evaluated: {why}." if method == "all" else f"- {method} not run: {why}"
        for method, why in evaluation["skipped"].items()
    ]
    return "\n".join(lines) + "\n"


async def retriever_export(
    store: ObjectStore,
    run_id: str,
    out_dir: str | Path,
    *,
    gateway: LLMGateway | None = None,
    seed: int = 0,
    embedding_model: str = DEFAULT_EMBEDDING_MODEL,
    test_fraction: float = 0.2,
    all_tasks: bool = False,
) -> dict[str, Any]:
    """Write ToolBench's retriever files, ``report.json`` and ``report.md`` into `out_dir`; the report.

    Embedding retrieval runs only with a `gateway` (an async one: call this inside ``async with
    LLMGateway(...)``); BM25 and the random baseline always run."""
    tasks = read_tasks(store, run_id)
    if all_tasks:
        chosen, source = tasks, "all tasks of the run"
    else:
        accepted = accepted_task_ids(store, run_id)
        chosen, source = [t for t in tasks if t.id in accepted], "tasks with an accepted dialogue"
    dataset = build_dataset(chosen, seed=seed, test_fraction=test_fraction)
    out = Path(out_dir)
    files = write_dataset(dataset, out)
    evaluation = await evaluate_retrieval(dataset, gateway=gateway, embedding_model=embedding_model if gateway else None)
    report: dict[str, Any] = {
        "paper": "ToolLLM §3.1 (API retriever)",
        "run_id": run_id,
        "seed": seed,
        "metric": "NDCG@k with binary relevance over the whole corpus, every relevant API of a query counting, "
        "ties averaged (as sklearn.metrics.ndcg_score, which ToolBench's evaluator uses); ×100 in the table.",
        "data": {
            "source": source,
            "tasks_read": len(tasks),
            "tasks_used": len(chosen),
            "documents": len(dataset.corpus),
            "train_queries": len(dataset.train),
            "test_queries": len(dataset.test),
            "train_tools": len({t for q in dataset.train for t in q.tool_ids}),
            "test_tools": len({t for q in dataset.test for t in q.tool_ids}),
            **{key: value for key, value in dataset.stats.items() if key not in ("tasks", "queries")},
        },
        "files": sorted(path.name for path in files),
        "evaluation": evaluation,
    }
    (out / REPORT_JSON).write_text(json.dumps(report, indent=1, ensure_ascii=False))
    (out / REPORT_MD).write_text(_markdown(report))
    return report
