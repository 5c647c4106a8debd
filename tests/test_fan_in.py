"""Fan-in shards that proceed without an input, and the supplements a later execution adds."""

from __future__ import annotations

import json
from pathlib import Path

from toolfactory.config import load_config
from toolfactory.fan_in import available, supplements
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
