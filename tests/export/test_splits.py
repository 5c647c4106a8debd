"""Splits by tool and by category: unseen tools (categories) in test, fractions, determinism."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from toolfactory.export import SPLITS, ExportError, SplitSpec, export_run, record_split, unit_split
from toolfactory.models import Dialogue, Function
from toolfactory.definitions.finish import FINISH_FUNCTION

from .helpers import RUN, corpus, open_store, read_jsonl, write_run

ORDER = {name: i for i, name in enumerate(SPLITS)}


@pytest.fixture(scope="module")
def many() -> list[Dialogue]:
    """300 dialogues over a pool of 360 tools in 120 categories (ten renamed catalog copies)."""
    return corpus(300, seed=11, copies=10)


def _assigned(dialogues: list[Dialogue], spec: SplitSpec, seed: int) -> tuple[dict[str, list[Dialogue]], dict[str, str]]:
    """Records by split, and each unit's own split."""
    records: dict[str, list[Dialogue]] = {s: [] for s in SPLITS}
    units: dict[str, str] = {}
    for dialogue in dialogues:
        split, keys = record_split(dialogue, spec, seed)
        records[split].append(dialogue)
        units.update({key: unit_split(key, spec, seed) for key in keys})
    return records, units


def test_no_test_tool_is_seen_in_training(many: list[Dialogue]) -> None:
    records, units = _assigned(many, SplitSpec(), seed=0)
    for split, dialogues in records.items():
        for dialogue in dialogues:
            for ref in dialogue.source_tools:
                # a tool appears only in its own split or a later one
                assert ORDER[units[f"tool:{ref.id}"]] <= ORDER[split]
    seen_before_test = {r.id for s in ("train", "validation") for d in records[s] for r in d.source_tools}
    test_tools = {key.removeprefix("tool:") for key, split in units.items() if split == "test"}
    assert test_tools and not (test_tools & seen_before_test)


def test_single_tool_records_never_share_a_tool_across_splits(many: list[Dialogue]) -> None:
    records, _ = _assigned(many, SplitSpec(), seed=0)
    splits_of: dict[str, set[str]] = {}
    for split, dialogues in records.items():
        for dialogue in dialogues:
            if len(dialogue.source_tools) == 1:
                splits_of.setdefault(dialogue.source_tools[0].id, set()).add(split)
    assert splits_of and all(len(s) == 1 for s in splits_of.values())


def test_fractions_are_roughly_respected(many: list[Dialogue]) -> None:
    records, units = _assigned(many, SplitSpec(), seed=0)
    tools = Counter(units.values())
    total = sum(tools.values())
    assert abs(tools["train"] / total - 0.8) < 0.08
    assert abs(tools["validation"] / total - 0.1) < 0.06 and abs(tools["test"] / total - 0.1) < 0.06
    # records: two-tool records go to the later split of their tools, so the later splits grow a little
    share = {s: len(records[s]) / len(many) for s in SPLITS}
    assert 0.65 < share["train"] < 0.88
    assert 0.05 < share["validation"] < 0.2 and 0.05 < share["test"] < 0.2


def test_by_category_holds_out_whole_categories(many: list[Dialogue]) -> None:
    spec = SplitSpec(by="category")
    records, units = _assigned(many, spec, seed=0)
    assert all(key.startswith("category:") for key in units)
    train_categories = {r.category for d in records["train"] for r in d.source_tools}
    test_categories = {key.removeprefix("category:") for key, split in units.items() if split == "test"}
    assert test_categories and not (test_categories & train_categories)
    for split, dialogues in records.items():
        for dialogue in dialogues:
            assert max((units[f"category:{r.category}"] for r in dialogue.source_tools), key=ORDER.__getitem__) == split
    assert all(records[s] for s in SPLITS)


def test_seed_changes_the_assignment_and_is_deterministic(many: list[Dialogue]) -> None:
    first = [record_split(d, SplitSpec(), 0)[0] for d in many]
    assert first == [record_split(d, SplitSpec(), 0)[0] for d in many]
    assert first != [record_split(d, SplitSpec(), 1)[0] for d in many]


def test_records_without_source_tools_are_split_by_function_names_without_finish() -> None:
    functions = [Function(name="get_weather"), FINISH_FUNCTION]
    dialogue = Dialogue(id="d", task_id="t", tools=functions, messages=[])
    split, units = record_split(dialogue, SplitSpec(), 0)
    assert units == ["function:get_weather"] and split == unit_split("function:get_weather", SplitSpec(), 0)
    bare = Dialogue(id="d", task_id="t", tools=[FINISH_FUNCTION], messages=[])
    assert record_split(bare, SplitSpec(), 0)[1] == ["record:d"]


def test_a_zero_fraction_split_gets_nothing_but_its_file(tmp_path: Path, many: list[Dialogue]) -> None:
    store = open_store(tmp_path / "store")
    write_run(store, many[:60])
    summary = export_run(store, RUN, "openai", tmp_path / "out", splits=SplitSpec(train=0.9, validation=0.0, test=0.1))
    assert summary["splits"]["validation"] == 0 and (tmp_path / "out/validation.jsonl").read_text() == ""
    assert summary["splits"]["train"] + summary["splits"]["test"] == 60


@pytest.mark.parametrize("kwargs, message", [
    ({"train": 0.8, "validation": 0.1, "test": 0.2}, "sum to 1.1"),
    ({"train": -0.1, "validation": 0.6, "test": 0.5}, "train=-0.1"),
    ({"by": "collection"}, "allowed values are tool, category"),
])
def test_bad_split_specs_say_what_is_wrong(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ExportError, match=message):
        SplitSpec(**kwargs)  # type: ignore[arg-type]


def test_export_writes_the_split_the_spec_decides(tmp_path: Path, many: list[Dialogue]) -> None:
    store = open_store(tmp_path / "store")
    write_run(store, many[:100], shard_size=30)
    summary = export_run(store, RUN, "bfcl", tmp_path / "out", splits=SplitSpec(by="category"), seed=5)
    exported = {s: [row["record_id"] for row in read_jsonl(tmp_path / f"out/{s}/record_ids.jsonl")] for s in SPLITS}
    by_id = {d.id: d for d in many}
    for split, ids in exported.items():
        assert all(record_split(by_id[i], SplitSpec(by="category"), 5)[0] == split for i in ids)
    assert summary["split"] == {"by": "category", "fractions": {"train": 0.8, "validation": 0.1, "test": 0.1}, "seed": 5}
