"""Fan-in stages that proceed without a failed input, and the supplement shards that add it later.

The pool stage reads every tools shard and the select stage every measure shard (fan-in,
docs/architecture.md §2). With `run.fan_in: proceed`, such a shard whose inputs are partly missing
runs on those that exist (:func:`available`) and says which it lacked (its metrics `inputs` and
`missing_inputs`, the stats, the manifest). Its output is committed like any other and is never
rewritten. When a later `rerun` has committed the missing upstream shards, the run's plan grows
(:func:`supplements`), stage by stage:

* pool:      shard k reads only the late tools parts and rejects near-duplicates of the tools the
             run's earlier pool parts hold (`params.prior`), as one pool shard would have;
* tasks:     new shards anchor on the tools of the new pool part (`params.anchors`), sampling tool
             sets from the whole pool;
* dialogues, verify, measure: one new shard per new shard upstream;
* select:    shard k reads the new measure parts and rejects duplicates of the dataset's earlier
             parts (`params.prior`: the earlier selections, which name the measures they read);
* curate:    one shard per verify shard, reading the selection that decided on its measures: a
             new one for a new verify shard, and one planned on the first selection that has not
             run yet is planned again on the supplement that read its measures.

Every supplement is an ordinary shard with the next free index, so the shard protocol holds (a
deterministic name, the main part last, idempotent re-runs), the dataset is the union of the curate
parts, and no record can appear twice. A run finished this way holds the same records as a clean
run up to the choices that depend on order (which of two near-duplicates is kept).
"""

from __future__ import annotations

from typing import Any, Sequence

from toolfactory.storage.shards import ShardPaths, read_metrics
from toolfactory.stages import ShardSpec
from toolfactory.storage import ObjectStore

# fan-in stage -> the stage whose every shard it reads
FAN_IN = {"pool": "tools", "select": "measure"}
# one-to-one stage -> the stage it follows shard by shard
ONE_TO_ONE = {"dialogues": "tasks", "verify": "dialogues", "measure": "verify"}


def chains(stages: Sequence[str]) -> list[tuple[str, ...]]:
    """`stages` (in run order) in groups that run together: a one-to-one stage joins the group of
    the stage it follows, whose shard i is all its shard i waits for; every other stage reads a
    whole stage (or the pool a whole stage made) and starts a group of its own."""
    groups: list[list[str]] = []
    for stage in stages:
        if groups and ONE_TO_ONE.get(stage) == groups[-1][-1]:
            groups[-1].append(stage)
        else:
            groups.append([stage])
    return [tuple(group) for group in groups]


def available(spec: ShardSpec, store: ObjectStore) -> ShardSpec | None:
    """A fan-in shard on the inputs that exist, recording the missing ones; None if none exist."""
    present = tuple(path for path in spec.inputs if store.exists(path))
    if not present:
        return None
    missing = [path for path in spec.inputs if path not in present]
    params = {**spec.params, "missing_inputs": missing} if missing else spec.params
    return ShardSpec(spec.stage, spec.index, present, params)


def _main(run_id: str, spec: ShardSpec) -> str:
    return ShardPaths(run_id, spec.stage, spec.index).main


def _read_by(store: ObjectStore, run_id: str, spec: ShardSpec) -> tuple[str, ...] | None:
    """The inputs a committed shard read (its planned inputs for a shard from before this was
    recorded); None while it is not committed."""
    paths = ShardPaths(run_id, spec.stage, spec.index)
    if not store.exists(paths.main):
        return None
    metrics = read_metrics(store, paths) or {}
    return tuple(metrics.get("inputs", spec.inputs))


def supplements(stage: str, plan: dict[str, list[ShardSpec]], store: ObjectStore, run_id: str) -> list[ShardSpec]:
    """The shards `stage` needs, beyond its plan, for what its upstream stage gained since."""
    specs = plan.get(stage, [])
    upstream = FAN_IN.get(stage) or ONE_TO_ONE.get(stage)
    if upstream is None and stage == "tasks":
        return _task_supplements(plan, store, run_id)
    if stage == "curate":
        return _dataset_supplements(plan, store, run_id)
    if upstream is None or not specs:
        return []
    if stage in ONE_TO_ONE:
        have = {spec.index for spec in specs}
        return [ShardSpec(stage, up.index, (_main(run_id, up),)) for up in plan[upstream] if up.index not in have]
    read: set[str] = set()
    for spec in specs:
        inputs = _read_by(store, run_id, spec)
        if inputs is None:  # a fan-in shard still to run: it will read what exists then
            return []
        read.update(inputs)
    late = tuple(path for up in plan[upstream] if (path := _main(run_id, up)) not in read and store.exists(path))
    if not late:
        return []
    first = specs[0]
    params: dict[str, Any] = {key: value for key, value in first.params.items() if key not in ("missing_inputs", "prior")}
    params["prior"] = [_main(run_id, spec) for spec in specs]
    return [ShardSpec(stage, max(spec.index for spec in specs) + 1, late, params)]


def grown(specs: list[ShardSpec], added: list[ShardSpec]) -> list[ShardSpec]:
    """A stage's plan with `added`: a spec of an index already planned replaces it (that shard has
    not run: :func:`supplements` plans only such shards again)."""
    replaced = {spec.index for spec in added}
    return sorted([*(spec for spec in specs if spec.index not in replaced), *added], key=lambda spec: spec.index)


def _dataset_supplements(plan: dict[str, list[ShardSpec]], store: ObjectStore, run_id: str) -> list[ShardSpec]:
    """Curate shards for verify shards without one, and curate shards still to run planned again
    on the selection that read their measures, when that is not the one they name."""
    from toolfactory.stages.curate.stage import dataset_inputs

    decided_by: dict[str, str] = {}  # measure part -> the selection that read it
    for spec in plan.get("select", []):
        for path in _read_by(store, run_id, spec) or ():
            decided_by[path] = _main(run_id, spec)
    planned = {spec.index: spec for spec in plan.get("curate", [])}
    added: list[ShardSpec] = []
    for measure in plan.get("measure", []):
        selection = decided_by.get(_main(run_id, measure))
        if selection is None:  # not decided on yet: a later execution adds it
            continue
        spec = planned.get(measure.index)
        inputs = dataset_inputs(run_id, measure.index, selection)
        if spec is None or (spec.inputs != inputs and not store.exists(_main(run_id, spec))):
            added.append(ShardSpec("curate", measure.index, inputs))
    return added


def _task_supplements(plan: dict[str, list[ShardSpec]], store: ObjectStore, run_id: str) -> list[ShardSpec]:
    """Tasks anchored on the tools of each pool supplement that has none yet."""
    tasks, pool = plan.get("tasks", []), plan.get("pool", [])
    if not tasks or len(pool) < 2:
        return []
    anchored = {spec.params.get("anchors") for spec in tasks}
    added: list[ShardSpec] = []
    index = max(spec.index for spec in tasks) + 1
    for part in pool[1:]:
        anchors = _main(run_id, part)
        if anchors in anchored or not store.exists(anchors):
            continue
        whole = tuple(_main(run_id, spec) for spec in pool if spec.index <= part.index)
        parts = max(1, len(part.inputs))  # one tasks shard per late tools shard, as in the plan
        for k in range(parts):
            added.append(ShardSpec("tasks", index, whole, {"part": k, "parts": parts, "anchors": anchors}))
            index += 1
    return added
