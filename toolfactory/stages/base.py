"""The stage interface: plan shards, then turn one input shard into one output shard.

A stage is a pure function of its input shard, the run's config and LLM answers (docs/architecture.md §2).
It never reads another stage's internals, only the shard files named in its :class:`ShardSpec`,
which is what lets any shard be re-run alone, on any worker. A spec lists its inputs explicitly,
so a stage whose shards need several upstream shards (a sampler over the whole tool pool) fits
the same interface as the one-to-one stages of the minimal chain.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterator, Literal, Protocol

from toolfactory.config import Config
from toolfactory.llm import LLMGateway
from toolfactory.models import Record, Rejected, canonical_json
from toolfactory.storage import ObjectStore


@dataclass(frozen=True)
class ShardSpec:
    stage: str
    index: int
    inputs: tuple[str, ...]  # storage paths of the input shard files
    params: dict[str, Any] = field(default_factory=dict, hash=False)

    def fingerprint(self) -> str:
        """Identity of the shard's input, recorded with its status."""
        payload = canonical_json([self.stage, self.index, list(self.inputs), self.params])
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "index": self.index, "inputs": list(self.inputs), "params": self.params}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ShardSpec:
        return cls(data["stage"], int(data["index"]), tuple(data["inputs"]), dict(data.get("params") or {}))


# Profile dimensions the stats read the cost per recipe from: the LLM requests a stage made for
# the records of each recipe (answered by the endpoint or the cache), and the recipes of its
# output records.
CALLS_BY_RECIPE = "llm_calls"
RECIPES = "recipes"


@dataclass
class StageOutput:
    records: list[Record] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    items_in: int = 0
    # The items the shard passes, when its records are not one per item passed (a fan-in stage
    # that writes its decisions); None: its records.
    items_out: int | None = None
    # Records that failed on transient LLM errors: the shard is incomplete unless tolerated.
    transient_failures: Counter[str] = field(default_factory=Counter)
    # Checks in layers (verify: rules, then model): layer -> (records in, records passed).
    layers: dict[str, tuple[int, int]] = field(default_factory=dict)
    # What the shard's output is made of (tools by source, parameter types, …): dimension ->
    # value -> count, summed over shards in the stats.
    profile: dict[str, Counter[str]] = field(default_factory=dict)

    def reject(self, stage: str, record_id: str, reasons: list[str], record: dict[str, Any], detail: str = "") -> None:
        self.rejected.append(Rejected(id=record_id, stage=stage, reasons=reasons, detail=detail, record=record))

    def merge(self, other: StageOutput) -> None:
        """Add another part of the same shard's work to this output."""
        self.records += other.records
        self.rejected += other.rejected
        self.items_in += other.items_in
        self.transient_failures.update(other.transient_failures)
        for layer, (n_in, n_ok) in other.layers.items():
            a, b = self.layers.get(layer, (0, 0))
            self.layers[layer] = (a + n_in, b + n_ok)
        for dimension, counts in other.profile.items():
            self.profile.setdefault(dimension, Counter()).update(counts)

    def count(self, dimension: str, value: str, n: int = 1) -> None:
        self.profile.setdefault(dimension, Counter())[value] += n

    def rejections(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for item in self.rejected:
            counts.update(item.reasons)
        return counts


@dataclass
class ShardContext:
    config: Config
    run_id: str
    gateway: LLMGateway
    store: ObjectStore | None = None

    def read(self, path: str) -> list[dict[str, Any]]:
        """The records of a shard file named in the spec's params (immutable pool files)."""
        from toolfactory.storage.shards import read_records

        if self.store is None:
            raise RuntimeError("this shard context has no storage")
        return read_records(self.store, path)

    def iter(self, path: str) -> Iterator[dict[str, Any]]:
        """The records of a shard file one at a time (see :func:`toolfactory.storage.shards.iter_records`)."""
        from toolfactory.storage.shards import iter_records

        if self.store is None:
            raise RuntimeError("this shard context has no storage")
        return iter_records(self.store, path)


@dataclass(frozen=True)
class Planning:
    """What a stage plans from: the config, the plans made so far and the pool at plan time."""

    config: Config
    run_id: str
    plans: dict[str, list[ShardSpec]]  # "sources", "documents" and every earlier stage
    pool_tools: tuple[str, ...] = ()  # immutable files of <root>/pool/tools, one per earlier run
    pool_tree: tuple[str, ...] = ()  # immutable files of <root>/pool/tree
    pool_dialogues: tuple[str, ...] = ()  # immutable files of <root>/pool/dialogues (signatures)

    def outputs(self, stage: str) -> tuple[str, ...]:
        """The main files of every shard of `stage`."""
        from toolfactory.storage.shards import ShardPaths

        return tuple(ShardPaths(self.run_id, stage, spec.index).main for spec in self.plans.get(stage, []))


# How a stage's shards read the stage before it (docs/architecture.md §2, the shapes table).
ONE_TO_ONE = "one_to_one"  # shard i reads shard i of the upstream stage
FAN_IN = "fan_in"  # one shard reads every shard of the upstream stage
FAN_OUT = "fan_out"  # every shard reads every upstream shard and works on a part of it (`part` of `parts`)
DECIDED = "decided"  # shard i reads shard i of each stage in `per`, and the upstream stage's decision
SOURCES = "sources"  # shards read the run's stored inputs (or nothing), no stage's output
Shape = Literal["one_to_one", "fan_in", "fan_out", "decided", "sources"]
# What a fan-in stage does when upstream shards it ran without commit later (§4, rule 8): its
# output is shared with later runs and may not change, so it grows by a supplement shard over the
# late parts (the pool); or its decisions are relative to the whole input, so it decides again over
# all of it (the selection).
GROW = "grow"
DECIDE_AGAIN = "decide_again"
Late = Literal["grow", "decide_again"]


@dataclass(frozen=True)
class Inputs:
    """What a stage's shards read of the stages before it: the stage graph's one source. Each
    stage's `plan` builds its shards' inputs from it, and the run's fan-in and catch-up
    (:mod:`toolfactory.run.fan_in`), the stages that run at once (:func:`toolfactory.run.fan_in.chains`)
    and the stats are derived from it."""

    upstream: str | None  # the stage whose output the shards read; None: the run's stored inputs
    shape: Shape
    late: Late | None = None  # a fan-in stage's answer to upstream shards committed after it ran
    per: tuple[str, ...] = ()  # a decided stage: the stages whose shard i its shard i reads

    def __post_init__(self) -> None:
        if (self.shape == FAN_IN) != (self.late is not None):
            raise ValueError(f"Inputs.late: a fan-in stage, and only one, says what late inputs do (shape {self.shape!r})")
        if (self.shape == DECIDED) != bool(self.per):
            raise ValueError(f"Inputs.per: a decided stage, and only one, names the stages it follows (shape {self.shape!r})")


def decided_inputs(inputs: Inputs, run_id: str, index: int, decision: str) -> tuple[str, ...]:
    """What shard `index` of a decided stage reads: shard `index` of each stage of `inputs.per`,
    then `decision`, the upstream shard that decided on them."""
    from toolfactory.storage.shards import ShardPaths

    return (*(ShardPaths(run_id, stage, index).main for stage in inputs.per), decision)


class Stage(Protocol):
    """A stage may also set ``streams_inputs: ClassVar[bool] = True``: its `run` then gets no
    records and reads the spec's inputs itself, record by record (a fan-in stage whose inputs
    together would not fit in memory; see :meth:`ShardContext.iter`).

    `inputs` declares what its shards read (:class:`Inputs`); `plan` follows it."""

    name: ClassVar[str]
    inputs: ClassVar[Inputs]

    def plan(self, planning: Planning) -> list[ShardSpec]:
        """This stage's shards (deterministic in the planning)."""
        ...

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        """Turn the records of the shard's inputs into output records and rejections."""
        ...


def one_to_one(stage: str, planning: Planning, upstream: str) -> list[ShardSpec]:
    """Shard i of `stage` reads shard i of the `upstream` stage."""
    from toolfactory.storage.shards import ShardPaths

    return [
        ShardSpec(stage, spec.index, (ShardPaths(planning.run_id, spec.stage, spec.index).main,))
        for spec in planning.plans[upstream]
    ]


def upstream_of(inputs: Inputs) -> str:
    """The stage a stage reads, for a stage that reads one (every shape but `sources`)."""
    if inputs.upstream is None:
        raise ValueError(f"Inputs.upstream: a {inputs.shape} stage reads a stage's output; none is named")
    return inputs.upstream
