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
from typing import Any, ClassVar, Iterator, Protocol

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


class Stage(Protocol):
    """A stage may also set ``streams_inputs: ClassVar[bool] = True``: its `run` then gets no
    records and reads the spec's inputs itself, record by record (a fan-in stage whose inputs
    together would not fit in memory; see :meth:`ShardContext.iter`)."""

    name: ClassVar[str]

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
