"""API retriever data: (instruction, relevant APIs) pairs, split by tool (ToolLLM §3.1).

ToolLLM trains its API retriever on the instructions of §2.2 with their relevant APIs as
positives, against a corpus of API documents. Here a document is one function of a pool tool that
some task offers, in the shape of a ToolBench ``api_list`` entry so that the files of
:mod:`toolfactory.retrieval.layout` are ToolBench's; a query is one distinct instruction (one qid
per text, as ToolBench's ``query_id_map``) whose relevant APIs are its task's
``relevant_functions``.

The split is by tool, so the test measures retrieval of APIs of tools never seen as positives
in training: queries whose relevant tools overlap are kept together (a multi-tool query links
its tools) and whole groups go to the test split, chosen with a seed. Train queries are numbered
before test queries, ids count from 1, as in ToolBench.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Iterable

from toolfactory.models import Function, Task, Tool

_DEFAULT_RETURNS: dict[str, Any] = {"type": "object"}


@dataclass(frozen=True)
class ApiDocument:
    """One API (a function of a pool tool) as a retrieval document."""

    docid: int
    tool_id: str
    content: dict[str, Any]

    @property
    def text(self) -> str:
        return document_text(self.content)


@dataclass(frozen=True)
class Query:
    """One distinct instruction with the docids of its relevant APIs and their tools."""

    qid: int
    text: str
    docids: tuple[int, ...]
    tool_ids: frozenset[str]
    task_ids: tuple[str, ...]


@dataclass
class RetrievalDataset:
    """The corpus of every API of the tools the tasks offer, and the queries split by tool."""

    corpus: list[ApiDocument]
    train: list[Query]
    test: list[Query]
    stats: dict[str, int] = field(default_factory=dict)

    def split(self, name: str) -> list[Query]:
        if name not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {name!r}")
        return self.train if name == "train" else self.test


def _rapidapi_type(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "string")
    if isinstance(kind, list):  # ["string", "null"]: the first type that is not null
        kind = next((k for k in kind if k != "null"), "string")
    return str(kind).upper()


def _rapidapi_parameters(function: Function, required: bool) -> list[dict[str, Any]]:
    """Parameters in ToolBench's shape ({name, type, description, default}), from JSON Schema."""
    names = set(function.parameters.get("required") or [])
    properties = function.parameters.get("properties") or {}
    return [
        {
            "name": name,
            "type": _rapidapi_type(schema),
            "description": str(schema.get("description", "")),
            "default": schema.get("default", ""),
        }
        for name, schema in properties.items()
        if (name in names) == required and isinstance(schema, dict)
    ]


def api_document(tool: Tool, function: Function) -> dict[str, Any]:
    """A function of a canonical tool as a ToolBench ``api_list`` entry (plus ``tool_id``).

    ``api_name`` is the function's name, the name a model calls and tasks list as relevant."""
    content: dict[str, Any] = {
        "category_name": tool.category,
        "tool_name": tool.name,
        "api_name": function.name,
        "api_description": function.description,
        "required_parameters": _rapidapi_parameters(function, required=True),
        "optional_parameters": _rapidapi_parameters(function, required=False),
        "method": function.method or "",
    }
    if function.returns != _DEFAULT_RETURNS:  # the default says nothing about the API
        content["template_response"] = function.returns
    content["tool_id"] = tool.id  # not ToolBench's: two pool tools may share a name
    return content


def document_text(content: dict[str, Any]) -> str:
    """The text a retriever embeds for a document: ToolBench's ``process_retrieval_ducoment``
    (toolbench/utils.py), so a retriever reads what ToolBench's retrievers read."""
    return (
        f"{content.get('category_name', '') or ''}, {content.get('tool_name', '') or ''}, "
        f"{content.get('api_name', '') or ''}, {content.get('api_description', '') or ''}"
        f", required_params: {json.dumps(content.get('required_parameters', ''))}"
        f", optional_params: {json.dumps(content.get('optional_parameters', ''))}"
        f", return_schema: {json.dumps(content.get('template_response', ''))}"
    )


@dataclass
class _Draft:
    text: str
    docids: list[int] = field(default_factory=list)
    task_ids: list[str] = field(default_factory=list)


def build_dataset(tasks: Iterable[Task], *, seed: int = 0, test_fraction: float = 0.2) -> RetrievalDataset:
    """The corpus and the train/test queries of `tasks` (see the module doc)."""
    docids: dict[tuple[str, str], int] = {}
    corpus: list[ApiDocument] = []
    drafts: dict[str, _Draft] = {}
    stats = {"tasks": 0, "unknown_relevant_functions": 0, "tasks_without_relevant_api": 0, "merged_duplicate_instructions": 0}
    for task in tasks:
        stats["tasks"] += 1
        for tool in task.tools:
            for function in tool.functions:
                key = (tool.id, function.name)
                if key not in docids:
                    docids[key] = len(corpus) + 1
                    corpus.append(ApiDocument(docids[key], tool.id, api_document(tool, function)))
        relevant = []
        for name in dict.fromkeys(task.relevant_functions):
            owner = next((tool for tool in task.tools if tool.function(name) is not None), None)
            if owner is None:
                stats["unknown_relevant_functions"] += 1
            else:
                relevant.append(docids[(owner.id, name)])
        if not relevant:
            stats["tasks_without_relevant_api"] += 1
            continue
        # One line per query and no \t or \n inside it: ToolBench's query files are line-based.
        text = " ".join(task.instruction.split())
        if text in drafts:  # one qid per distinct query text, as ToolBench's query_id_map
            stats["merged_duplicate_instructions"] += 1
        draft = drafts.setdefault(text, _Draft(text))
        draft.docids.extend(d for d in relevant if d not in draft.docids)
        draft.task_ids.append(task.id)
    train, test = _split_by_tool(list(drafts.values()), corpus, seed=seed, test_fraction=test_fraction)
    numbered = [*train, *test]
    queries = [
        Query(qid, d.text, tuple(d.docids), frozenset(corpus[i - 1].tool_id for i in d.docids), tuple(d.task_ids))
        for qid, d in enumerate(numbered, start=1)
    ]
    stats["queries"] = len(queries)
    return RetrievalDataset(corpus, queries[: len(train)], queries[len(train) :], stats)


def _tool_groups(drafts: list[_Draft], corpus: list[ApiDocument]) -> list[list[_Draft]]:
    """Queries grouped so that no tool is relevant to queries of two groups (union-find)."""
    parent: dict[str, str] = {}

    def root(tool: str) -> str:
        while parent.setdefault(tool, tool) != tool:
            parent[tool] = parent[parent[tool]]
            tool = parent[tool]
        return tool

    for draft in drafts:
        tools = [corpus[i - 1].tool_id for i in draft.docids]
        for other in tools[1:]:
            parent[root(other)] = root(tools[0])
    groups: dict[str, list[_Draft]] = {}
    for draft in drafts:  # in query order, so the groups' order is deterministic before shuffling
        groups.setdefault(root(corpus[draft.docids[0] - 1].tool_id), []).append(draft)
    return list(groups.values())


def _split_by_tool(
    drafts: list[_Draft], corpus: list[ApiDocument], *, seed: int, test_fraction: float
) -> tuple[list[_Draft], list[_Draft]]:
    """(train, test): whole tool groups go to test, in a seeded order, while that brings the test
    size closer to ``test_fraction`` of the queries; each split gets at least one group when there
    are two and ``test_fraction`` is positive."""
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
    groups = _tool_groups(drafts, corpus)
    random.Random(seed).shuffle(groups)
    target = max(1, round(test_fraction * len(drafts))) if test_fraction > 0 and len(groups) > 1 else 0
    chosen: list[int] = []
    size = 0
    for index, group in enumerate(groups):
        if abs(size + len(group) - target) < abs(size - target):
            chosen.append(index)
            size += len(group)
    if target and not chosen:
        chosen = [min(range(len(groups)), key=lambda i: len(groups[i]))]
    if len(chosen) == len(groups) > 1:
        chosen.pop()
    picked = set(chosen)
    train = [d for i, g in enumerate(groups) if i not in picked for d in g]
    test = [d for i, g in enumerate(groups) if i in picked for d in g]
    return train, test
