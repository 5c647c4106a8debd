"""Running one shard of one stage: read inputs, call the stage, commit, report metrics.

This is the unit of work a Prefect task runs on a Ray worker; it knows nothing of either.
It is idempotent: a shard whose output is already committed is not run again, and an
interrupted shard, run again, overwrites its own files (see :mod:`toolfactory.storage.shards`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from toolfactory.run.attempts import COMPLETED, AttemptLog
from toolfactory.config import Config, LLMConfig
from toolfactory.errors import BudgetExhausted, DriverGone, ShardIncomplete
from toolfactory.run.lifetime import Driver
from toolfactory.llm import LLMGateway, RequestCache, resolve_endpoint
from toolfactory.llm.cost import priced_usage, total_cost
from toolfactory.llm.limits import SharedLimit
from toolfactory.llm.usage import UsageMeter
from toolfactory.run.metrics import ShardMetrics, stored_metrics
from toolfactory.storage.shards import ShardPaths, commit_shard, encode_records, read_records
from toolfactory.stages import ShardContext, ShardSpec, stage_named
from toolfactory.storage import ObjectStore


class LimitSource(Protocol):
    """Where a worker finds the run's shared rate limit and budget (a Ray actor's name)."""

    def connect(self, llm: LLMConfig) -> SharedLimit: ...


@dataclass(frozen=True)
class ShardJob:
    """Everything a worker needs to run a shard; plain data, cheap to ship to Ray."""

    run_id: str
    config: Config
    spec: ShardSpec
    llm_base_url: str | None  # the endpoint resolved by the driver (e.g. a started simulator)
    driver: Driver | None = None  # the process that submitted it: no commit once it is gone
    # The run's shared limit and budget (a LimitSource; None: neither is set). Typed Any because
    # Prefect validates flow parameters with pydantic, which cannot check a Protocol.
    limits: Any = None

    @property
    def paths(self) -> ShardPaths:
        return ShardPaths(self.run_id, self.spec.stage, self.spec.index)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def run_shard(job: ShardJob, node: str | None = None) -> ShardMetrics:
    """Run `job` to completion and return its metrics. `node` names the cluster node running it,
    given by the executor that knows it (on one host, the host name cannot tell nodes apart)."""
    store = ObjectStore.open(job.config.storage)
    done = stored_metrics(store, job.paths) if store.exists(job.paths.main) else None
    if done is not None:
        return done
    return asyncio.run(_run(job, store, node))


async def _run(job: ShardJob, store: ObjectStore, node: str | None) -> ShardMetrics:
    started_at, started = _now(), time.perf_counter()
    attempt_id, meter = uuid.uuid4().hex, UsageMeter()
    # The attempt's usage reaches storage as it goes, so a killed attempt is still counted.
    with AttemptLog(store, job.paths, attempt_id, meter, started_at, llm=job.config.llm) as log:
        metrics = await _attempt(job, store, attempt_id, meter, started_at, started, node)
        log.close(COMPLETED)
    return metrics


async def _attempt(job: ShardJob, store: ObjectStore, attempt_id: str, meter: UsageMeter, started_at: str,
                   started: float, node: str | None) -> ShardMetrics:
    stage = stage_named(job.spec.stage)
    streams = getattr(stage, "streams_inputs", False)
    inputs = [] if streams else [record for path in job.spec.inputs for record in read_records(store, path)]
    endpoint = resolve_endpoint(job.config.llm, job.llm_base_url)
    limit = job.limits.connect(job.config.llm) if job.limits is not None else None
    try:
        async with LLMGateway(endpoint, job.config.llm, RequestCache(store), meter, limit) as gateway:
            ctx = ShardContext(config=job.config, run_id=job.run_id, gateway=gateway, store=store)
            output = await stage.run(job.spec, inputs, ctx)
    except BudgetExhausted as exc:
        # The shard's work is not done (not rejected): it fails, and a re-run with a larger budget redoes it.
        stopped = BudgetExhausted(f"{job.spec.stage} shard {job.spec.index}: {exc}")
        # An exception's attributes travel as plain data (errors.py); the flow reads them back as ShardMetrics.
        stopped.metrics = ShardMetrics.from_dict({**_facts(job, attempt_id, started_at, started, meter, node),
                                                  "items_in": len(inputs), "items_out": 0, "rejected": 0}).to_dict()
        raise stopped from None
    rows, unstorable = encode_records(output.records, job.spec.stage)
    output.rejected.extend(unstorable)
    metrics = ShardMetrics.from_dict({
        **_facts(job, attempt_id, started_at, started, meter, node),
        "inputs": list(job.spec.inputs),  # what it read: a fan-in shard may run on some (fan_in.py)
        "missing_inputs": list(job.spec.params.get("missing_inputs", [])),
        "items_in": output.items_in,
        "items_out": len(rows) if output.items_out is None else output.items_out,
        "rejected": len(output.rejected),
        "rejections": dict(output.rejections()),
        "layers": {layer: list(counts) for layer, counts in output.layers.items()},
        "profile": {dimension: dict(counts) for dimension, counts in output.profile.items()},
    })
    failed = sum(output.transient_failures.values())
    if failed > job.config.run.tolerate_transient_failures * max(output.items_in, 1):
        reasons = ", ".join(f"{code}: {n}" for code, n in sorted(output.transient_failures.items()))
        # The endpoint's own words, once: what an operator reads first when a night fails.
        said = next((r.detail for r in output.rejected if set(r.reasons) & set(output.transient_failures)), "")
        incomplete = ShardIncomplete(
            f"{job.spec.stage} shard {job.spec.index}: {failed} of {output.items_in} records failed on "
            f"transient LLM errors ({reasons}" + (f"; first: {_one_line(said)}" if said else "")
            + "); answers obtained so far are cached, a re-run completes it"
        )
        incomplete.metrics = metrics.to_dict()  # what the attempt spent, for the stats
        raise incomplete
    if job.driver is not None and job.driver.gone():
        # Its driver was killed: the run is resumed by `rerun`, which runs this shard again
        # from the cache; a commit now would race with that re-run.
        raise DriverGone(f"{job.spec.stage} shard {job.spec.index}: its driver (pid {job.driver.pid}) is gone; not committed")
    commit_shard(store, job.paths, rows, output.rejected, metrics.to_dict())  # the sidecar: its JSON
    return metrics


def _facts(job: ShardJob, attempt_id: str, started_at: str, started: float, meter: UsageMeter,
           node: str | None) -> dict[str, Any]:
    """The metrics of any attempt, finished or not: who it was, where, when, and what its LLM use
    cost (the fields of :class:`ShardMetrics` every attempt has; `node` only where one is known)."""
    by_role = priced_usage(job.config.llm, meter.to_dict())
    return {
        "attempt_id": attempt_id,
        "run_id": job.run_id,
        "stage": job.spec.stage,
        "shard": job.spec.index,
        "fingerprint": job.spec.fingerprint(),
        "llm": {**meter.totals(), "cost_usd": total_cost(by_role)},
        "llm_by_role": by_role,
        "started_at": started_at,
        "finished_at": _now(),
        "wall_s": round(time.perf_counter() - started, 3),
        **({"node": node} if node else {}),
    }


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
