"""Fan-in stages that proceed without a failed input, and what a later execution does once it arrives.

The pool stage reads every tools shard and the select stage every measure shard (fan-in,
docs/architecture.md §2). With `run.fan_in: proceed`, such a shard whose inputs are partly
missing runs on those that exist (:func:`available`) and says which it lacked (its metrics `inputs`
and `missing_inputs`, the stats, the manifest). When a later `rerun` has committed the missing
upstream shards, the run catches up, stage by stage, as each stage's declared
:class:`~toolfactory.stages.base.Inputs` says (its shape, and for a fan-in stage what late inputs do);
no stage is named here:

* pool (fan-in, grow): the pool is shared with later runs, which may have planned on it: it grows instead
             (:func:`supplements`). Shard k reads only the late tools parts and rejects
             near-duplicates of the tools the run's earlier pool parts hold (`params.prior`), as
             one pool shard would have;
* tasks (fan-out): new shards anchor on the tools of the new pool part (`params.anchors`), sampling tool
             sets from the whole pool;
* dialogues, verify, measure (one-to-one): one new shard per new shard upstream;
* select (fan-in, decide again): decided again (:func:`reselection`). Its decisions are relative to the whole dataset
             (complexity levels are quantiles of it, diversity subsets are drawn from it, and of
             two duplicates the one of smaller id is kept), so a selection over part of the measures
             cannot be completed by another over the rest. The selection over every measure part
             replaces it, and the dataset parts it decided are made again from it: unless the pool
             grew by a supplement, the run's dataset, curation included, is then the one a clean
             run makes;
* curate (decided): one shard per verify shard, reading the selection: a new one for a new verify shard.

Every supplement is an ordinary shard with the next free index, so the shard protocol holds (a
deterministic name, the main part last, idempotent re-runs), the dataset is the union of the curate
parts, and no record can appear twice. A run whose pool grew by a supplement holds the same records
as a clean run up to the choices that depend on order (which of two near-duplicate tools is kept,
and so which tasks are anchored on them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from toolfactory.run.metrics import stored_metrics
from toolfactory.stages import ShardSpec, stage_named
from toolfactory.stages.base import DECIDE_AGAIN, DECIDED, FAN_IN, FAN_OUT, GROW, ONE_TO_ONE, Inputs, decided_inputs
from toolfactory.storage import ObjectStore
from toolfactory.storage.shards import ShardPaths


def declared(stage: str) -> Inputs:
    """What `stage`'s shards read, as the stage declares it (:class:`~toolfactory.stages.base.Inputs`)."""
    return stage_named(stage).inputs


def fan_in_upstream(stage: str) -> str | None:
    """The stage whose every shard a fan-in `stage` reads; None for any other stage."""
    inputs = declared(stage)
    return inputs.upstream if inputs.shape == FAN_IN else None


def follows(stage: str) -> str | None:
    """The stage a one-to-one `stage` follows shard by shard; None for any other stage."""
    inputs = declared(stage)
    return inputs.upstream if inputs.shape == ONE_TO_ONE else None


def decides_again(stage: str) -> bool:
    """Whether `stage` is decided again over its whole input when part of it arrives late."""
    return declared(stage).late == DECIDE_AGAIN


def chains(stages: Sequence[str]) -> list[tuple[str, ...]]:
    """`stages` (in run order) in groups that run together: a one-to-one stage joins the group of
    the stage it follows, whose shard i is all its shard i waits for; every other stage reads a
    whole stage (or the pool a whole stage made) and starts a group of its own."""
    groups: list[list[str]] = []
    for stage in stages:
        if groups and follows(stage) == groups[-1][-1]:
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
    metrics = stored_metrics(store, paths)
    return spec.inputs if metrics is None or metrics.inputs is None else metrics.inputs


def supplements(stage: str, plan: dict[str, list[ShardSpec]], store: ObjectStore, run_id: str) -> list[ShardSpec]:
    """The shards `stage` needs, beyond its plan, for what its upstream stage gained since, by the
    shape it declares (a stage that decides again does so instead: :func:`reselection`)."""
    inputs = declared(stage)
    if inputs.shape == FAN_OUT:
        return _anchored_supplements(stage, inputs, plan, store, run_id)
    if inputs.shape == DECIDED:
        return _decided_supplements(stage, inputs, plan, store, run_id)
    specs = plan.get(stage, [])
    if inputs.shape == ONE_TO_ONE and specs:
        have = {spec.index for spec in specs}
        return [ShardSpec(stage, up.index, (_main(run_id, up),)) for up in plan[str(inputs.upstream)] if up.index not in have]
    if inputs.late != GROW or not specs:
        return []
    read: set[str] = set()
    for spec in specs:
        read_by = _read_by(store, run_id, spec)
        if read_by is None:  # a fan-in shard still to run: it will read what exists then
            return []
        read.update(read_by)
    late = tuple(path for up in plan[str(inputs.upstream)] if (path := _main(run_id, up)) not in read and store.exists(path))
    if not late:
        return []
    first = specs[0]
    params: dict[str, Any] = {key: value for key, value in first.params.items() if key not in ("missing_inputs", "prior")}
    params["prior"] = [_main(run_id, spec) for spec in specs]
    return [ShardSpec(stage, max(spec.index for spec in specs) + 1, late, params)]


@dataclass(frozen=True)
class Reselection:
    """The run's selection to be decided again: its one select shard, and the committed shards
    made from what it replaces (selections, then the dataset parts they decided), to be made not
    done so that they run again."""

    select: ShardSpec
    stale: list[ShardSpec]


def reselection(stage: str, plan: dict[str, list[ShardSpec]], store: ObjectStore, run_id: str,
                proceed: bool) -> Reselection | None:
    """The selection (`stage`, a stage that decides again) over every part of its upstream stage
    in the plan, when the run's is not that: a selection still to run is planned on every part (the
    plan may have grown since); a committed selection that did not read a part that exists now (it
    proceeded without it, or the part was added since) is replaced, with the dataset parts it
    decided. With `proceed` false, a committed selection is kept until every part exists (the new
    one would wait for them). None: the run's selection stands."""
    selects = plan.get(stage, [])
    if not selects:
        return None
    measured = tuple(_main(run_id, spec) for spec in plan.get(str(declared(stage).upstream), []))
    first = selects[0]
    params = {key: value for key, value in first.params.items() if key not in ("missing_inputs", "prior")}
    whole = ShardSpec(stage, first.index, measured, params)
    committed = [spec for spec in selects if store.exists(_main(run_id, spec))]
    if not committed:
        return None if selects == [whole] else Reselection(whole, [])
    read = {path for spec in committed for path in _read_by(store, run_id, spec) or ()}
    exists = [store.exists(path) for path in measured]
    if all(path in read or not there for path, there in zip(measured, exists)):
        return None
    if not proceed and not all(exists):
        return None
    decided = {_main(run_id, spec) for spec in committed}
    curated = [spec for name in _decided_by(stage) for spec in plan.get(name, [])
               if set(spec.inputs) & decided and store.exists(_main(run_id, spec))]
    return Reselection(whole, [*committed, *curated])


def _decided_by(stage: str) -> list[str]:
    """The stages whose shards apply the decisions of `stage` (the dataset: curate)."""
    from toolfactory.stages import STAGE_NAMES

    return [name for name in STAGE_NAMES if declared(name).shape == DECIDED and declared(name).upstream == stage]


def grown(specs: list[ShardSpec], added: list[ShardSpec]) -> list[ShardSpec]:
    """A stage's plan with `added`: a spec of an index already planned replaces it (that shard has
    not run: :func:`supplements` plans only such shards again)."""
    replaced = {spec.index for spec in added}
    return sorted([*(spec for spec in specs if spec.index not in replaced), *added], key=lambda spec: spec.index)


def _decided_supplements(stage: str, inputs: Inputs, plan: dict[str, list[ShardSpec]], store: ObjectStore,
                         run_id: str) -> list[ShardSpec]:
    """Shards of a decided stage (curate) for the shards it follows that have none, and shards
    still to run planned again on the decision (selection) that read their inputs, when that is
    not the one they name."""
    follows_by_index = inputs.per[-1]  # the stage the decision read (measure): shard i of each is there
    decided_by: dict[str, str] = {}  # part read -> the decision that read it
    for spec in plan.get(str(inputs.upstream), []):
        for path in _read_by(store, run_id, spec) or ():
            decided_by[path] = _main(run_id, spec)
    planned = {spec.index: spec for spec in plan.get(stage, [])}
    added: list[ShardSpec] = []
    for part in plan.get(follows_by_index, []):
        decision = decided_by.get(_main(run_id, part))
        if decision is None:  # not decided on yet: a later execution adds it
            continue
        current = planned.get(part.index)
        wanted = decided_inputs(inputs, run_id, part.index, decision)
        if current is None or (current.inputs != wanted and not store.exists(_main(run_id, current))):
            added.append(ShardSpec(stage, part.index, wanted))
    return added


def _anchored_supplements(stage: str, inputs: Inputs, plan: dict[str, list[ShardSpec]], store: ObjectStore,
                          run_id: str) -> list[ShardSpec]:
    """Shards of a fan-out stage (tasks) anchored on each upstream supplement part (the pool's)
    that has none yet, sampling from the whole upstream output."""
    specs, upstream = plan.get(stage, []), plan.get(str(inputs.upstream), [])
    if not specs or len(upstream) < 2:
        return []
    anchored = {spec.params.get("anchors") for spec in specs}
    added: list[ShardSpec] = []
    index = max(spec.index for spec in specs) + 1
    for part in upstream[1:]:
        anchors = _main(run_id, part)
        if anchors in anchored or not store.exists(anchors):
            continue
        whole = tuple(_main(run_id, spec) for spec in upstream if spec.index <= part.index)
        parts = max(1, len(part.inputs))  # one shard per late shard upstream of it, as in the plan
        for k in range(parts):
            added.append(ShardSpec(stage, index, whole, {"part": k, "parts": parts, "anchors": anchors}))
            index += 1
    return added
