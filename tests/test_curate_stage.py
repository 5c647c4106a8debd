"""The curate stage through the real gateway and the simulator's embeddings: duplicates within a
run and against earlier runs, complexity levels, API clusters and diversity subsets, mode steering."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest

from toolfactory.config import load_config
from toolfactory.curation import signature_row
from toolfactory.models import Dialogue
from toolfactory.run.pool import DIALOGUES
from toolfactory.storage.shards import write_rows
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.stages import StageOutput
from toolfactory.stages.curate.stage import record_key
from benchmarks.corpus import valid_dialogues
from toolfactory.storage import ObjectStore

from curation.staged import curate_parts


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings()) as simulator:
        yield simulator


def curate(sim: Any, dialogues: list[Dialogue], root: Path, pool_files: list[str] = (), *overrides: str) -> StageOutput:  # type: ignore[assignment]
    """The three curation stages over `dialogues` in two verify parts."""
    half = len(dialogues) // 2
    return curate_parts(sim.base_url, [dialogues[:half], dialogues[half:]], root, pool_files, *overrides)


def distinct_dialogues(n: int) -> list[Dialogue]:
    """Valid dialogues whose first requests differ (the corpus repeats some templates)."""
    seen: set[str] = set()
    out = []
    for d in valid_dialogues(3 * n, seed=3):
        text = next(m.content for m in d.messages if m.role == "user")
        if text not in seen:
            seen.add(text)
            out.append(d)
    return out[:n]


def test_copies_within_the_run_are_rejected_and_the_rest_scored(sim: Any, tmp_path: Path) -> None:
    dialogues = distinct_dialogues(40)
    copy = dialogues[0].model_copy(deep=True, update={"id": "zz-copy"})
    out = curate(sim, [*dialogues, copy], tmp_path, (), "curate.clusters=5")
    kept = [d for d in out.records if isinstance(d, Dialogue)]
    assert len(kept) + len(out.rejected) == out.items_in == 41
    assert "zz-copy" in {r.id for r in out.rejected} and "duplicate_exact" in out.rejections()
    assert dialogues[0].id in {d.id for d in kept}
    levels = Counter(d.curation["complexity_level"] for d in kept)
    assert set(levels) == {"easy", "medium", "hard"} and max(levels.values()) - min(levels.values()) <= 2
    assert all(0.0 <= d.curation["complexity"] <= 2.0 for d in kept)
    assert all(set(d.curation["clusters"]) <= set(range(5)) for d in kept)
    assert out.profile["clusters"]["k"] == 5 and 1 <= out.profile["clusters"]["used"] <= 5
    sizes = {level: n for level, n in out.profile["diversity_subsets"].items()}
    assert set(sizes) == {"low", "medium", "high"} and len(set(sizes.values())) == 1
    assert sum(out.profile["modes"].values()) == len(kept)


def test_dialogues_of_an_earlier_run_are_duplicates_tonight(sim: Any, tmp_path: Path) -> None:
    dialogues = distinct_dialogues(10)
    store = ObjectStore.open(load_config(None, [f"storage.root={tmp_path}"], environ={}).storage)
    rows = [signature_row(record_key("last-night", d.id), d) for d in dialogues[:4]]
    write_rows(store, f"{DIALOGUES}/last-night.parquet", [(r["key"], json.dumps(r)) for r in rows])
    out = curate(sim, dialogues, tmp_path, [f"{DIALOGUES}/last-night.parquet"], "curate.clusters=3")
    assert {r.id for r in out.rejected} == {d.id for d in dialogues[:4]}
    assert all("last-night/" in r.detail for r in out.rejected)
    only_exact = curate(sim, dialogues, tmp_path, [f"{DIALOGUES}/last-night.parquet"], "curate.clusters=3", "curate.dedup=false")
    assert not only_exact.rejected


def test_the_mode_mix_is_steered_toward_its_targets(sim: Any, tmp_path: Path) -> None:
    dialogues = distinct_dialogues(60)
    modes = Counter(d.mode for d in dialogues)
    assert len(modes) >= 2
    major, minor = (m for m, _ in modes.most_common(2))
    out = curate(sim, dialogues, tmp_path, (), "curate.clusters=3", f"curate.mode_targets={{{major}: 0.5, {minor}: 0.5}}")
    kept = Counter(d.mode for d in out.records if isinstance(d, Dialogue))
    assert set(kept) == {major, minor} and kept[major] == kept[minor] == modes[minor]
    assert set(out.rejections()) == {"curate_mode_steering"}


def test_the_pool_gets_the_measured_signatures_of_the_kept_dialogues(sim: Any, tmp_path: Path) -> None:
    from toolfactory.run.pool import publish_dialogues
    from toolfactory.storage.shards import ShardPaths, read_records

    from curation.staged import RUN

    dialogues = distinct_dialogues(10)
    copy = dialogues[1].model_copy(deep=True, update={"id": "zz-copy"})  # rejected: not published
    curate(sim, [*dialogues, copy], tmp_path, (), "curate.clusters=3")
    store = ObjectStore.open(load_config(None, [f"storage.root={tmp_path}"], environ={}).storage)
    published = []
    for index in (0, 1):
        dataset, measured = ShardPaths(RUN, "curate", index), ShardPaths(RUN, "measure", index)
        count = publish_dialogues(store, RUN, dataset, measured)
        path = f"{DIALOGUES}/{RUN}.parquet" if index == 0 else f"{DIALOGUES}/{RUN}.{index}.parquet"
        rows = read_records(store, path)
        assert count == len(rows) == len(read_records(store, dataset.main))
        published += rows
        # A dataset part without its measure part: the same rows, computed from its dialogues.
        store.delete(measured.main)
        assert publish_dialogues(store, RUN, dataset, measured) == count
        assert read_records(store, path) == rows
    expected = [signature_row(record_key(RUN, d.id), d) for d in dialogues]
    assert sorted(published, key=lambda r: r["key"]) == sorted(expected, key=lambda r: r["key"])
