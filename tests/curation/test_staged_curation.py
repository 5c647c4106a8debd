"""The staged curation (measure, select, curate) decides as the in-memory library functions do,
finds duplicates across verify parts, does not depend on the order shards finish in, and a
supplement selection rejects duplicates of the dataset's earlier parts."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import duckdb
import pytest

from curation.staged import RUN, curate_parts
from toolfactory.config import load_config
from toolfactory.curation import (
    DialogueIndex,
    cluster_apis,
    deduplicate,
    dialogue_clusters,
    diversity_subsets,
    offered_functions,
    query_complexity,
    subsets,
)
from toolfactory.curation.duplicate_pairs import Pair, SignatureTable
from toolfactory.curation.duplicate_rule import first_kept
from toolfactory.curation.selection import cut_ranks
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue
from benchmarks.corpus import valid_dialogues

RUN_SCOPE = ("curate.clusters=4", "curate.clusters_scope=run")


def corpus(n: int) -> list[Dialogue]:
    """Valid dialogues with the corpus's own near-duplicates (it repeats templates) and two copies."""
    dialogues = valid_dialogues(n, seed=5)
    return [*dialogues, dialogues[3].model_copy(deep=True, update={"id": "zz-copy-a"}),
            dialogues[n - 2].model_copy(deep=True, update={"id": "aa-copy-b"})]


def reference(base_url: str, dialogues: list[Dialogue], root: Path) -> dict[str, Any]:
    """What the single in-memory curate shard decided: the library functions over every record."""
    config = load_config(None, [f"storage.root={root}", *RUN_SCOPE], environ={})

    async def go() -> dict[str, Any]:
        ordered = sorted(dialogues, key=lambda d: d.id)
        found = deduplicate(((f"{RUN}/{d.id}", d) for d in ordered), DialogueIndex(config.curate.dedup_threshold))
        kept = [d for d in ordered if f"{RUN}/{d.id}" not in found.duplicates]
        async with LLMGateway(Endpoint(base_url, "sk-test"), config.llm) as gateway:
            values = await query_complexity(kept, gateway, config.llm.embedding_model)
            clusters = await cluster_apis(offered_functions(kept), gateway, config.llm.embedding_model, 4, 0)
        levels = subsets(values, (1 / 3, 2 / 3), keys=[d.id for d in kept])
        sets = [dialogue_clusters(d, clusters) for d in kept]
        subsets_of = diversity_subsets(sets, len(set(clusters.values())) or 1, 0)
        return {
            "rejected": {d.id: sorted({f"duplicate_{m.kind}" for m in found.duplicates[f"{RUN}/{d.id}"]})
                         for d in ordered if f"{RUN}/{d.id}" in found.duplicates},
            "curation": {d.id: {"complexity": None if math.isnan(values[i]) else round(values[i], 4),
                                "complexity_level": levels[i], "clusters": sorted(sets[i]),
                                "diversity": [lv for lv, members in subsets_of.items() if i in members]}
                         for i, d in enumerate(kept)},
        }

    return asyncio.run(go())


def decisions(out: Any) -> dict[str, Any]:
    return {"rejected": {r.id: r.reasons for r in out.rejected},
            "curation": {d.id: d.curation for d in out.records}}


def test_the_stages_decide_as_the_single_in_memory_shard(sim: Any, tmp_path: Path) -> None:
    dialogues = corpus(60)
    expected = reference(sim.base_url, dialogues, tmp_path / "ref")
    assert len(expected["rejected"]) >= 3  # the two copies and the corpus's repeated templates
    parts = [dialogues[i::3] for i in range(3)]  # copies land in other parts than their originals
    out = curate_parts(sim.base_url, parts, tmp_path / "staged", (), *RUN_SCOPE)
    assert decisions(out) == expected


def test_a_duplicate_join_out_of_memory_is_run_again_under_the_next_limit(sim: Any, tmp_path: Path, monkeypatch: Any,
                                                                           caplog: Any) -> None:
    from toolfactory.curation import duplicate_pairs

    dialogues = corpus(30)
    parts = [dialogues[i::2] for i in range(2)]
    expected = curate_parts(sim.base_url, parts, tmp_path / "a", (), *RUN_SCOPE)
    # 2 MB holds the tables of 32 records, but not the blocks DuckDB's join needs.
    monkeypatch.setattr(duplicate_pairs, "MEMORY_LIMITS", ("2MB", "64MB"))
    out = curate_parts(sim.base_url, parts, tmp_path / "b", (), *RUN_SCOPE)
    assert decisions(out) == decisions(expected) and out.rejected
    assert "ran out of DuckDB memory; again under 64MB" in caplog.text
    monkeypatch.setattr(duplicate_pairs, "MEMORY_LIMITS", ("2MB",))  # no limit left to try: the shard fails
    with pytest.raises(duckdb.OutOfMemoryException):
        curate_parts(sim.base_url, parts, tmp_path / "c", (), *RUN_SCOPE)


def test_duplicates_in_different_verify_parts_keep_the_smaller_id(sim: Any, tmp_path: Path) -> None:
    dialogues = valid_dialogues(12, seed=7)
    copy = dialogues[0].model_copy(deep=True, update={"id": "0-first"})
    out = curate_parts(sim.base_url, [[*dialogues[:6]], [*dialogues[6:], copy]], tmp_path, (), *RUN_SCOPE)
    rejected = {r.id: r for r in out.rejected}
    assert dialogues[0].id in rejected and "0-first" not in rejected
    assert rejected[dialogues[0].id].reasons == ["duplicate_exact"] and f"{RUN}/0-first" in rejected[dialogues[0].id].detail


def test_the_dataset_does_not_depend_on_the_order_shards_finish_in(sim: Any, tmp_path: Path) -> None:
    dialogues = corpus(45)
    parts = [dialogues[i::3] for i in range(3)]
    forward = curate_parts(sim.base_url, parts, tmp_path / "a", (), *RUN_SCOPE, order=[0, 1, 2])
    backward = curate_parts(sim.base_url, parts, tmp_path / "b", (), *RUN_SCOPE, order=[2, 1, 0])
    assert [d.to_json() for d in forward.records] == [d.to_json() for d in backward.records]
    assert decisions(forward) == decisions(backward)


def test_a_record_that_duplicates_only_a_rejected_one_is_kept() -> None:
    # b duplicates a, c duplicates b but not a: b is rejected, so c is kept (the index's rule).
    pairs = [Pair("r/b", "r/a", True, None, "dialogue", 0.9), Pair("r/c", "r/b", True, None, "dialogue", 0.85)]
    assert set(first_kept(pairs, ["dialogue"])) == {"r/b"}
    assert first_kept(pairs, ["exact"]) == {}


def test_signature_pairs_match_the_datasketch_index() -> None:
    from toolfactory.curation import signature_row

    dialogues = corpus(40)
    rows = [signature_row(f"{RUN}/{d.id}", d) for d in sorted(dialogues, key=lambda d: d.id)]
    index = DialogueIndex()
    expected = {}
    for row in rows:
        found = index.find_row(row)
        if found:
            expected[row["key"]] = found
        else:
            index.add_row(row)
    with SignatureTable(0.8) as table:
        table.add_run(reversed(rows))
        assert first_kept(table.pairs(), ["exact", "instruction", "dialogue"]) == expected


def test_cut_ranks_are_the_subsets_boundaries() -> None:
    values = [0.5, 0.1, 0.1, 0.9, float("nan"), 0.3, 0.3, 0.3]
    keys = [f"d{i}" for i in range(len(values))]
    levels = subsets(values, keys=keys)
    ranked = sorted((v, k) for v, k in zip(values, keys) if not math.isnan(v))
    easy, medium = cut_ranks(len(ranked), (1 / 3, 2 / 3))
    assert [k for _, k in ranked[:easy]] == [k for k, lv in zip(keys, levels) if lv == "easy"]
    assert [k for _, k in ranked[easy:medium]] == [k for k, lv in zip(keys, levels) if lv == "medium"]
