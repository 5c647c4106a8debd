"""The stage interface: plan shards, then turn one input shard into one output shard.

A stage is a pure function of its input shard, the run's config and LLM answers (DESIGN.md §2).
It never reads another stage's internals, only the shard files named in its :class:`ShardSpec`,
which is what lets any shard be re-run alone, on any worker. A spec lists its inputs explicitly,
so a stage whose shards need several upstream shards (a sampler over the whole tool pool) fits
the same interface as the one-to-one stages of the minimal chain.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from toolfactory.config import Config
from toolfactory.llm import LLMGateway
from toolfactory.models import Record, Rejected, canonical_json


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


@dataclass
class StageOutput:
    records: list[Record] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    items_in: int = 0
    # Records that failed on transient LLM errors: the shard is incomplete unless tolerated.
    transient_failures: Counter[str] = field(default_factory=Counter)
    # Checks in layers (verify: rules, then model): layer -> (records in, records passed).
    layers: dict[str, tuple[int, int]] = field(default_factory=dict)

    def reject(self, stage: str, record_id: str, reasons: list[str], record: dict[str, Any], detail: str = "") -> None:
        self.rejected.append(Rejected(id=record_id, stage=stage, reasons=reasons, detail=detail, record=record))

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


class Stage(Protocol):
    name: ClassVar[str]

    def plan(self, config: Config, run_id: str, upstream: list[ShardSpec]) -> list[ShardSpec]:
        """This stage's shards, from the upstream stage's plan (deterministic)."""
        ...

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        """Turn the records of the shard's inputs into output records and rejections."""
        ...


def one_to_one(stage: str, run_id: str, upstream: list[ShardSpec]) -> list[ShardSpec]:
    """Shard i of `stage` reads shard i of the upstream stage (the minimal chain's plan)."""
    from toolfactory.shards import ShardPaths

    return [
        ShardSpec(stage, spec.index, (ShardPaths(run_id, spec.stage, spec.index).main,))
        for spec in upstream
    ]
