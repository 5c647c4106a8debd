"""Fan-in shards that proceed without an input, and the supplements a later execution adds."""

from __future__ import annotations

import json
from pathlib import Path

from toolfactory.config import load_config
from toolfactory.run.fan_in import available, grown, supplements
from toolfactory.stages import ShardSpec
from toolfactory.storage import ObjectStore

RUN = "r1"


def _part(stage: str, index: int) -> str:
    return f"runs/{RUN}/{stage}/part-{index:05d}.parquet"


def _commit(store: ObjectStore, stage: str, index: int, inputs: list[str] | None = None) -> None:
    if inputs is not None:
        store.write_bytes(f"runs/{RUN}/{stage}/_metrics/part-{index:05d}.json", json.dumps({"inputs": inputs}).encode())
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


def test_a_late_verify_part_is_measured_selected_against_the_earlier_parts_and_curated(tmp_path: Path) -> None:
    store = ObjectStore.open(load_config(None, [f"storage.root={tmp_path}"], environ={}).storage)
    plan = {
        "verify": [ShardSpec("verify", i, (_part("dialogues", i),)) for i in range(2)],
        "measure": [ShardSpec("measure", i, (_part("verify", i),)) for i in range(2)],
        "select": [ShardSpec("select", 0, (_part("measure", 0), _part("measure", 1)), {"pool_dialogues": []})],
        "curate": [ShardSpec("curate", i, (_part("verify", i), _part("measure", i), _part("select", 0))) for i in range(2)],
    }
    _commit(store, "verify", 0)
    _commit(store, "measure", 0)
    _commit(store, "select", 0, inputs=[_part("measure", 0)])  # proceeded without measure part 1
    _commit(store, "curate", 0)
    assert supplements("curate", plan, store, RUN) == []  # curate 1 waits for its measures

    _commit(store, "verify", 1)  # a re-run committed it, then its measures
    _commit(store, "measure", 1)
    [select] = supplements("select", plan, store, RUN)
    assert (select.index, select.inputs, select.params["prior"]) == (1, (_part("measure", 1),), [_part("select", 0)])
    plan["select"].append(select)
    _commit(store, "select", 1, inputs=[_part("measure", 1)])
    [curate] = supplements("curate", plan, store, RUN)  # planned on select 0, which never read its measures
    assert curate == ShardSpec("curate", 1, (_part("verify", 1), _part("measure", 1), _part("select", 1)))
    plan["curate"] = grown(plan["curate"], [curate])
    assert [spec.index for spec in plan["curate"]] == [0, 1] and plan["curate"][1] == curate
    assert supplements("curate", plan, store, RUN) == []
