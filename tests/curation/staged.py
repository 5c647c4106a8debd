"""Running the three curation stages (measure, select, curate) in-process over verify parts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Sequence

from toolfactory.config import load_config
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue
from toolfactory.storage.shards import ShardPaths, encode_records, write_rows
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.curate.stage import CurateStage, dataset_inputs
from toolfactory.stages.measure.stage import MeasureStage
from toolfactory.stages.select.stage import SelectStage
from toolfactory.storage import ObjectStore

RUN = "tonight"


def _write(store: ObjectStore, path: str, records: Sequence[Any]) -> None:
    rows, unstorable = encode_records(records, "test")
    assert not unstorable
    write_rows(store, path, rows)


def curate_parts(base_url: str, parts: Sequence[Sequence[Dialogue]], root: Path, pool_files: Sequence[str] = (),
                 *overrides: str, order: Sequence[int] | None = None) -> StageOutput:
    """The curate output of verify parts 0, 1, … holding `parts`; measure shards run in `order`."""
    config = load_config(None, [f"storage.root={root}", *overrides], environ={})
    store = ObjectStore.open(config.storage)
    indices = list(range(len(parts)))

    async def go() -> StageOutput:
        async with LLMGateway(Endpoint(base_url, "sk-test"), config.llm) as gateway:
            ctx = ShardContext(config=config, run_id=RUN, gateway=gateway, store=store)
            for index, dialogues in zip(indices, parts, strict=True):
                _write(store, ShardPaths(RUN, "verify", index).main, dialogues)
            for i in order or range(len(parts)):
                index = indices[i]
                out = await MeasureStage().run(ShardSpec("measure", index, ()), [d.model_dump() for d in parts[i]], ctx)
                _write(store, ShardPaths(RUN, "measure", index).main, out.records)
            measured = tuple(ShardPaths(RUN, "measure", index).main for index in indices)
            params: dict[str, Any] = {"pool_dialogues": list(pool_files), "pool_tools": []}
            selected = await SelectStage().run(ShardSpec("select", 0, measured, params), [], ctx)
            selection = ShardPaths(RUN, "select", 0).main
            _write(store, selection, selected.records)
            total = StageOutput()
            total.profile = selected.profile
            for index in indices:
                spec = ShardSpec("curate", index, dataset_inputs(RUN, index, selection))
                out = await CurateStage().run(spec, [], ctx)  # it reads its inputs itself
                _write(store, ShardPaths(RUN, "curate", index).main, out.records)
                total.merge(out)
            # The selection passes what the curate shards keep: its pass rate in the stats.
            assert selected.items_out == selected.items_in - len(total.rejected) == total.items_in - len(total.rejected)
            return total

    return asyncio.run(go())
