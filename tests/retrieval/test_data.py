"""The retriever files: ToolBench's layout, parsed back with the csv module, and the split by tool."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from toolfactory.models import Function, Task, Tool
from toolfactory.retrieval.data import RetrievalDataset, api_document, build_dataset, document_text
from toolfactory.retrieval.layout import read_corpus, read_qrels, read_queries, write_dataset

from .helpers import TOOLS, tasks

FILES = ["corpus.tsv", "qrels.test.tsv", "qrels.train.tsv", "test.query.txt", "train.query.txt"]


def rows(path: Path) -> list[list[str]]:
    # how pandas.read_csv(sep="\t") reads them in ToolBench: minimal quoting, doubled quotes
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle, delimiter="\t"))


def written(tmp_path: Path, dataset: RetrievalDataset) -> Path:
    assert sorted(p.name for p in write_dataset(dataset, tmp_path)) == FILES
    return tmp_path


def test_the_files_parse_back_and_every_qrel_points_at_a_document_and_a_query(tmp_path: Path) -> None:
    folder = written(tmp_path, build_dataset(tasks(), seed=0))
    corpus = rows(folder / "corpus.tsv")
    assert corpus[0] == ["docid", "document_content"]
    documents = {int(docid): json.loads(content) for docid, content in corpus[1:]}
    assert sorted(documents) == list(range(1, len(documents) + 1))
    assert all({"category_name", "tool_name", "api_name", "api_description", "required_parameters",
                "optional_parameters", "method"} <= set(doc) for doc in documents.values())
    queries = {}
    for split in ("train", "test"):
        lines = rows(folder / f"{split}.query.txt")
        assert lines and all(len(line) == 2 for line in lines)  # qid, query; no header
        queries[split] = {int(qid): text for qid, text in lines}
        qrels = rows(folder / f"qrels.{split}.tsv")
        assert qrels and all(len(line) == 4 and line[1] == "0" and line[3] == "1" for line in qrels)
        assert {int(line[0]) for line in qrels} == set(queries[split])  # every query has a positive
        assert {int(line[2]) for line in qrels} <= set(documents)
    assert not set(queries["train"]) & set(queries["test"])
    assert max(queries["train"]) < min(queries["test"])  # train numbered first, as in ToolBench


def test_our_readers_read_what_was_written(tmp_path: Path) -> None:
    dataset = build_dataset(tasks(), seed=0)
    folder = written(tmp_path, dataset)
    assert read_corpus(folder / "corpus.tsv") == {doc.docid: doc.content for doc in dataset.corpus}
    assert read_queries(folder / "test.query.txt") == {q.qid: q.text for q in dataset.test}
    assert read_qrels(folder / "qrels.train.tsv") == {q.qid: set(q.docids) for q in dataset.train}


def tools_of(folder: Path, split: str) -> set[str]:
    documents = {int(docid): json.loads(content) for docid, content in rows(folder / "corpus.tsv")[1:]}
    return {documents[int(line[2])]["tool_id"] for line in rows(folder / f"qrels.{split}.tsv")}


@pytest.mark.parametrize("seed", range(8))
def test_train_and_test_share_no_tool(tmp_path: Path, seed: int) -> None:
    folder = written(tmp_path, build_dataset(tasks(), seed=seed))
    train, test = tools_of(folder, "train"), tools_of(folder, "test")
    assert train and test and not train & test


def test_a_multi_tool_query_keeps_its_tools_on_one_side() -> None:
    for seed in range(8):
        dataset = build_dataset(tasks(), seed=seed)
        multi = next(q for q in dataset.train + dataset.test if "t-multi" in q.task_ids)
        side = dataset.train if multi in dataset.train else dataset.test
        assert len(multi.tool_ids) == 2
        assert multi.tool_ids <= {t for q in side for t in q.tool_ids}


def test_the_split_is_seeded() -> None:
    def test_texts(seed: int) -> list[str]:
        return [q.text for q in build_dataset(tasks(), seed=seed).test]

    assert test_texts(3) == test_texts(3)
    assert len({tuple(test_texts(seed)) for seed in range(8)}) > 1


def test_test_fraction() -> None:
    all_queries = len(tasks())
    assert len(build_dataset(tasks(), seed=0, test_fraction=0.0).test) == 0
    assert 0 < len(build_dataset(tasks(), seed=0, test_fraction=0.3).test) < all_queries
    with pytest.raises(ValueError, match="test_fraction"):
        build_dataset(tasks(), test_fraction=1.0)


def test_one_document_per_api_of_the_offered_tools() -> None:
    dataset = build_dataset(tasks(), seed=0)
    assert sorted((d.content["tool_name"], d.content["api_name"]) for d in dataset.corpus) == sorted(
        (tool, function) for tool, functions in TOOLS.items() for function, _ in functions
    )


def test_a_document_is_toolbench_s_api_entry_and_text() -> None:
    function = Function(
        name="checkhealth_for_squake",
        description="Health of the API",
        parameters={
            "type": "object",
            "properties": {"region": {"type": "string", "description": "Region code"}, "verbose": {"type": "boolean"}},
            "required": ["region"],
        },
        method="GET",
    )
    tool = Tool(name="SQUAKE", category="Logistics", source="toolbench", functions=[function])
    content = api_document(tool, function)
    assert content == {
        "category_name": "Logistics",
        "tool_name": "SQUAKE",
        "api_name": "checkhealth_for_squake",
        "api_description": "Health of the API",
        "required_parameters": [{"name": "region", "type": "STRING", "description": "Region code", "default": ""}],
        "optional_parameters": [{"name": "verbose", "type": "BOOLEAN", "description": "", "default": ""}],
        "method": "GET",
        "tool_id": tool.id,
    }
    # toolbench/utils.py process_retrieval_ducoment: category, tool, api, description, then JSON
    assert document_text(content) == (
        'Logistics, SQUAKE, checkhealth_for_squake, Health of the API, required_params: '
        '[{"name": "region", "type": "STRING", "description": "Region code", "default": ""}], '
        'optional_params: [{"name": "verbose", "type": "BOOLEAN", "description": "", "default": ""}], '
        'return_schema: ""'
    )


def test_duplicates_merge_and_unknown_apis_are_counted() -> None:
    tool = Tool(name="Weather", functions=[Function(name="forecast"), Function(name="alerts")])
    dataset = build_dataset(
        [
            Task(id="a", tools=[tool], instruction="Rain  tomorrow?", relevant_functions=["forecast"]),
            Task(id="b", tools=[tool], instruction="Rain tomorrow?\n", relevant_functions=["alerts", "forecast"]),
            Task(id="c", tools=[tool], instruction="Snow?", relevant_functions=["no_such_api"]),
        ],
        seed=0,
    )
    queries = dataset.train + dataset.test
    assert [(q.text, q.docids, q.task_ids) for q in queries] == [("Rain tomorrow?", (1, 2), ("a", "b"))]
    assert dataset.stats == {"tasks": 3, "unknown_relevant_functions": 1, "tasks_without_relevant_api": 1,
                             "merged_duplicate_instructions": 1, "queries": 1}
    assert not dataset.test  # one tool: nothing can be held out


def test_quotes_and_tabs_survive_the_files(tmp_path: Path) -> None:
    tools = [Tool(name=name, functions=[Function(name="f", description='Say "hi"\tthere')]) for name in ("A", "B")]
    dataset = build_dataset(
        [Task(id=t.name, tools=[t], instruction=f'Call "f"\tof {t.name}\nnow', relevant_functions=["f"]) for t in tools],
        seed=0,
        test_fraction=0.5,
    )
    folder = written(tmp_path, dataset)
    texts = {**read_queries(folder / "train.query.txt"), **read_queries(folder / "test.query.txt")}
    assert sorted(texts.values()) == ['Call "f" of A now', 'Call "f" of B now']
    assert {c["api_description"] for c in read_corpus(folder / "corpus.tsv").values()} == {'Say "hi"\tthere'}
    assert all(len(line) == 2 for line in rows(folder / "corpus.tsv"))
