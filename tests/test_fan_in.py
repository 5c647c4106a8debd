"""Fan-in shards that proceed without an input, and the supplements a later execution adds."""

from __future__ import annotations

import json
from pathlib import Path

from toolfactory.config import load_config
import pytest

from toolfactory.run.fan_in import available, chains, fan_in_upstream, follows, reselection, supplements
from toolfactory.run.metrics import ShardMetrics
from toolfactory.stages import STAGE_NAMES, ShardSpec, stage_named
from toolfactory.stages.base import FAN_IN, GROW, Inputs
from toolfactory.storage import ObjectStore

RUN = "r1"


def _part(stage: str, index: int) -> str:
    return f"runs/{RUN}/{stage}/part-{index:05d}.parquet"


def _commit(store: ObjectStore, stage: str, index: int, inputs: list[str] | None = None) -> None:
    """A committed shard; with `inputs`, its metrics sidecar says it read those."""
    if inputs is not None:
        metrics = ShardMetrics(attempt_id="a", run_id=RUN, stage=stage, shard=index, started_at="2026-01-01T00:00:00+00:00",
                               finished_at="2026-01-01T00:00:01+00:00", inputs=tuple(inputs))
        store.write_bytes(f"runs/{RUN}/{stage}/_metrics/part-{index:05d}.json", json.dumps(metrics.to_dict()).encode())
    store.write_bytes(_part(stage, index), b"records")


def _plan() -> dict[str, list[ShardSpec]]:
    tools = [ShardSpec("tools", i, (f"runs/{RUN}/sources/part-{i:05d}.parquet",)) for i in range(2)]
    pool = [ShardSpec("pool", 0, (_part("tools", 0), _part("tools", 1)), {"pool_tools": ["pool/tools/old.parquet"]})]
    tasks = [ShardSpec("tasks", i, (_part("pool", 0),), {"part": i, "parts": 2}) for i in range(2)]
    return {"tools": tools, "pool": pool, "tasks": tasks}


def test_a_fan_in_shard_proceeds_on_the_inputs_that_exist(tmp_path: Path) -> None:
    store = ObjectStore.open(load_config(None, [f"storage.root={tmp_path}"], environ={}).storage)
    spec = _plan()["pool"][0]
    assert available(spec, store) is None  # nothing to proceed on: blocked
    _commit(store, "tools", 0)
    partial = available(spec, store)
    assert partial is not None
    assert partial.inputs == (_part("tools", 0),) and partial.params["missing_inputs"] == [_part("tools", 1)]


def test_late_inputs_become_supplement_shards_down_the_stages(tmp_path: Path) -> None:
    store = ObjectStore.open(load_config(None, [f"storage.root={tmp_path}"], environ={}).storage)
    plan = _plan()
    _commit(store, "tools", 0)
    _commit(store, "pool", 0, inputs=[_part("tools", 0)])  # proceeded without tools part 1
    assert supplements("pool", plan, store, RUN) == []  # the missing part is still missing

    _commit(store, "tools", 1)  # a re-run committed it
    [pool] = supplements("pool", plan, store, RUN)
    assert (pool.index, pool.inputs) == (1, (_part("tools", 1),))
    assert pool.params == {"pool_tools": ["pool/tools/old.parquet"], "prior": [_part("pool", 0)]}
    plan["pool"].append(pool)
    assert supplements("tasks", plan, store, RUN) == []  # its part is not committed yet

    _commit(store, "pool", 1, inputs=[_part("tools", 1)])
    assert supplements("pool", plan, store, RUN) == []  # every input read: nothing more
    [task] = supplements("tasks", plan, store, RUN)
    assert task.index == 2 and task.inputs == (_part("pool", 0), _part("pool", 1))
    assert task.params == {"part": 0, "parts": 1, "anchors": _part("pool", 1)}
    plan["tasks"].append(task)
    assert supplements("tasks", plan, store, RUN) == []  # anchored once

    plan["dialogues"] = [ShardSpec("dialogues", i, (_part("tasks", i),)) for i in range(2)]
    assert supplements("dialogues", plan, store, RUN) == [ShardSpec("dialogues", 2, (_part("tasks", 2),))]


def _dataset_plan() -> dict[str, list[ShardSpec]]:
    return {
        "verify": [ShardSpec("verify", i, (_part("dialogues", i),)) for i in range(2)],
        "measure": [ShardSpec("measure", i, (_part("verify", i),)) for i in range(2)],
        "select": [ShardSpec("select", 0, (_part("measure", 0), _part("measure", 1)), {"pool_dialogues": []})],
        "curate": [ShardSpec("curate", i, (_part("verify", i), _part("measure", i), _part("select", 0))) for i in range(2)],
    }


def test_a_selection_made_without_a_measure_part_is_made_again_with_the_dataset_parts_it_decided(tmp_path: Path) -> None:
    store = ObjectStore.open(load_config(None, [f"storage.root={tmp_path}"], environ={}).storage)
    plan = _dataset_plan()
    _commit(store, "verify", 0)
    _commit(store, "measure", 0)
    _commit(store, "select", 0, inputs=[_part("measure", 0)])  # proceeded without measure part 1
    _commit(store, "curate", 0)
    assert reselection("select", plan, store, RUN, proceed=True) is None  # the missing part is still missing
    assert supplements("curate", plan, store, RUN) == []  # curate 1 waits for its measures

    _commit(store, "verify", 1)  # a re-run committed it, then its measures
    _commit(store, "measure", 1)
    assert supplements("select", plan, store, RUN) == []  # never completed by a second selection
    redo = reselection("select", plan, store, RUN, proceed=True)
    assert redo is not None and redo.select == plan["select"][0]  # over every measure part, as planned
    assert redo.stale == [plan["select"][0], plan["curate"][0]]  # curate 1 never ran: it runs anyway
    assert supplements("curate", plan, store, RUN) == []  # both planned on the one selection


def test_a_committed_selection_that_read_every_measure_part_stands(tmp_path: Path) -> None:
    store = ObjectStore.open(load_config(None, [f"storage.root={tmp_path}"], environ={}).storage)
    plan = _dataset_plan()
    for index in range(2):
        _commit(store, "measure", index)
    _commit(store, "select", 0, inputs=[_part("measure", 0), _part("measure", 1)])
    assert reselection("select", plan, store, RUN, proceed=True) is None


def test_under_wait_a_partial_selection_stands_until_every_measure_part_exists(tmp_path: Path) -> None:
    store = ObjectStore.open(load_config(None, [f"storage.root={tmp_path}"], environ={}).storage)
    plan = _dataset_plan()
    plan["measure"].append(ShardSpec("measure", 2, (_part("verify", 2),)))
    _commit(store, "measure", 0)
    _commit(store, "select", 0, inputs=[_part("measure", 0)])
    _commit(store, "measure", 1)  # arrived; measure part 2 has not
    assert reselection("select", plan, store, RUN, proceed=False) is None  # the new one would wait for part 2
    redo = reselection("select", plan, store, RUN, proceed=True)
    assert redo is not None and redo.select.inputs == tuple(_part("measure", i) for i in range(3))


def test_a_selection_still_to_run_is_planned_on_measure_parts_added_since(tmp_path: Path) -> None:
    store = ObjectStore.open(load_config(None, [f"storage.root={tmp_path}"], environ={}).storage)
    plan = _dataset_plan()
    plan["measure"].append(ShardSpec("measure", 2, (_part("verify", 2),)))  # a supplement
    redo = reselection("select", plan, store, RUN, proceed=False)
    assert redo is not None and redo.stale == []
    assert redo.select.inputs == tuple(_part("measure", i) for i in range(3)) and redo.select.params == {"pool_dialogues": []}


def test_the_stage_graph_is_what_the_stages_declare() -> None:
    assert chains(STAGE_NAMES) == [("domains",), ("tools",), ("pool",), ("tasks", "dialogues", "verify", "measure"),
                                   ("select",), ("curate",)]
    assert {name: fan_in_upstream(name) for name in STAGE_NAMES if fan_in_upstream(name)} == {"pool": "tools", "select": "measure"}
    assert [follows(name) for name in ("dialogues", "verify", "measure")] == ["tasks", "dialogues", "verify"]


def test_what_late_inputs_do_follows_the_declaration_not_the_stage_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A selection declared to grow, as the pool does, gets a supplement over the late measure
    part instead of being decided again: fan_in.py reads the declaration, not the name."""
    store = ObjectStore.open(load_config(None, [f"storage.root={tmp_path}"], environ={}).storage)
    plan = _dataset_plan()
    _commit(store, "measure", 0)
    _commit(store, "select", 0, inputs=[_part("measure", 0)])
    _commit(store, "measure", 1)
    assert supplements("select", plan, store, RUN) == []  # as declared: decided again instead
    monkeypatch.setattr(type(stage_named("select")), "inputs", Inputs("measure", FAN_IN, late=GROW))
    [grown] = supplements("select", plan, store, RUN)
    assert (grown.index, grown.inputs, grown.params["prior"]) == (1, (_part("measure", 1),), [_part("select", 0)])


def test_a_declaration_that_does_not_fit_its_shape_names_the_field() -> None:
    with pytest.raises(ValueError, match="Inputs.late"):
        Inputs("tools", FAN_IN)
    with pytest.raises(ValueError, match="Inputs.per"):
        Inputs("select", "decided")
