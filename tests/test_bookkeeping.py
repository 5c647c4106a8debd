"""What the driver records of a run as it executes it (toolfactory.run.bookkeeping): shards found
committed, shards blocked by a missing input, and the plan grown by fan-in supplements, in a real
local storage root and a real DuckDB file."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

from toolfactory.config import load_config
from toolfactory.llm.usage import UsageMeter
from toolfactory.run.bookkeeping import RunBook
from toolfactory.run.manifest import Manifest, load_manifest, write_manifest
from toolfactory.stages import STAGE_NAMES, ShardSpec
from toolfactory.storage import ObjectStore
from toolfactory.storage.shards import ShardPaths, commit_shard

RUN = "20261125-030000-book"
LOG = logging.getLogger(__name__)


def _part(stage: str, index: int) -> str:
    return ShardPaths(RUN, stage, index).main


def _metrics(stage: str, shard: int, inputs: list[str]) -> dict[str, Any]:
    """A shard's metrics shaped as toolfactory.run.execution returns them."""
    meter = UsageMeter()
    return {
        "attempt_id": uuid.uuid4().hex, "run_id": RUN, "stage": stage, "shard": shard, "fingerprint": f"fp-{stage}-{shard}",
        "inputs": inputs, "missing_inputs": [], "items_in": 1, "items_out": 1, "rejected": 0, "rejections": {},
        "layers": {}, "profile": {}, "llm": meter.totals(), "llm_by_role": meter.to_dict(),
        "started_at": "2026-11-25T03:00:00.000+00:00", "finished_at": "2026-11-25T03:00:01.000+00:00", "wall_s": 1.0,
    }


def _commit(store: ObjectStore, stage: str, index: int, inputs: list[str]) -> None:
    commit_shard(store, ShardPaths(RUN, stage, index), [(f"{stage}-{index}", "{}")], [], _metrics(stage, index, inputs))


def _book(tmp_path: Path, plan: dict[str, list[ShardSpec]], *overrides: str) -> RunBook:
    config = load_config(None, [f"storage.root={tmp_path / 'root'}", *overrides], environ={})
    store = ObjectStore.open(config.storage)
    manifest = Manifest.create(RUN, config, plan)
    write_manifest(store, manifest)
    book = RunBook(manifest, store, LOG)
    book.start(checksums=False)
    return book


def _shard_statuses(book: RunBook, stage: str) -> dict[int, tuple[str, str | None]]:
    row = book.stats.run_summary(RUN, STAGE_NAMES).stage(stage)
    assert row is not None
    return {f.shard: (f.status, f.error) for f in row.failed_shards}


def test_a_committed_shard_is_recorded_from_its_sidecar_and_only_the_others_are_pending(tmp_path: Path) -> None:
    plan = {
        "tasks": [ShardSpec("tasks", i, (_part("pool", 0),), {"part": i, "parts": 2}) for i in range(2)],
        "dialogues": [ShardSpec("dialogues", i, (_part("tasks", i),)) for i in range(2)],
    }
    book = _book(tmp_path, plan)
    _commit(book.store, "dialogues", 0, [_part("tasks", 0)])

    assert [spec.index for spec in book.pending("dialogues")] == [1]
    stage = book.stats.run_summary(RUN, STAGE_NAMES).stage("dialogues")
    assert stage is not None and stage.shards_completed == 1


def test_a_shard_whose_input_is_missing_is_recorded_blocked_naming_it(tmp_path: Path) -> None:
    plan = {"verify": [ShardSpec("verify", 0, (_part("dialogues", 0),))]}
    book = _book(tmp_path, plan)

    assert book.runnable(plan["verify"], proceed=False) == []
    status, error = _shard_statuses(book, "verify")[0]
    assert status == "blocked" and _part("dialogues", 0) in error


def test_late_inputs_grow_the_plan_and_the_stored_manifest_before_they_run(tmp_path: Path) -> None:
    plan = {
        "tools": [ShardSpec("tools", i, (f"runs/{RUN}/sources/part-{i:05d}.parquet",)) for i in range(2)],
        "pool": [ShardSpec("pool", 0, (_part("tools", 0), _part("tools", 1)))],
    }
    book = _book(tmp_path, plan, "run.fan_in=proceed")
    _commit(book.store, "tools", 0, [])
    _commit(book.store, "pool", 0, [_part("tools", 0)])  # proceeded without tools part 1
    assert book.pending("pool") == []

    _commit(book.store, "tools", 1, [])  # a re-run committed it
    [supplement] = book.pending("pool")
    assert (supplement.index, supplement.inputs) == (1, (_part("tools", 1),))
    stored = load_manifest(book.store, RUN).shard_plan()["pool"]
    assert [spec.index for spec in stored] == [0, 1]


def test_a_fan_in_shard_committed_without_an_input_is_kept_partial_in_the_manifest(tmp_path: Path) -> None:
    plan = {
        "tools": [ShardSpec("tools", i, (f"runs/{RUN}/sources/part-{i:05d}.parquet",)) for i in range(2)],
        "pool": [ShardSpec("pool", 0, (_part("tools", 0), _part("tools", 1)))],
    }
    book = _book(tmp_path, plan, "run.fan_in=proceed")
    _commit(book.store, "tools", 0, [])
    [ran] = book.runnable(plan["pool"], proceed=True)  # runs on tools part 0 alone
    _commit(book.store, "pool", 0, [_part("tools", 0)])

    book.settled(("pool",), [ran])
    [entry] = load_manifest(book.store, RUN).partial
    assert (entry["stage"], entry["shard"], entry["missing"]) == ("pool", 0, [_part("tools", 1)])


def test_a_selection_made_without_a_measure_part_is_made_again_once_it_arrives(tmp_path: Path) -> None:
    measures = [_part("measure", i) for i in range(2)]
    plan = {
        "measure": [ShardSpec("measure", i, (_part("verify", i),)) for i in range(2)],
        "select": [ShardSpec("select", 0, tuple(measures), {"pool_dialogues": []})],
        "curate": [ShardSpec("curate", i, (_part("verify", i), _part("measure", i), _part("select", 0))) for i in range(2)],
    }
    book = _book(tmp_path, plan, "run.fan_in=proceed")
    _commit(book.store, "measure", 0, [_part("verify", 0)])
    _commit(book.store, "select", 0, measures[:1])  # proceeded without measure part 1
    _commit(book.store, "curate", 0, list(plan["curate"][0].inputs))
    assert book.pending("select") == []

    _commit(book.store, "measure", 1, [_part("verify", 1)])  # a re-run committed it
    assert book.pending("select") == plan["select"]  # over both parts, as a clean run's
    assert not book.store.exists(_part("curate", 0))  # decided by the selection replaced: made again
    assert [spec.index for spec in book.pending("curate")] == [0, 1]
    assert load_manifest(book.store, RUN).shard_plan()["select"] == plan["select"]
