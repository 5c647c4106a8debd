"""The `run` and `orchestration` sections: a run's identity and failure policy, Prefect and Ray."""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import Field, field_validator

from toolfactory.config.section import Section


class RunConfig(Section):
    """Identity and failure policy of a run."""

    seed: int | None = 0
    """Seed of every sampling decision; the shard plan is a function of (config, seed). null: a
    seed derived from the run id, so that every run (e.g. each night) samples anew; the seed
    used is stored with the run, so a re-run reproduces it."""

    def with_seed_for(self, run_id: str) -> RunConfig:
        if self.seed is not None:
            return self
        return self.model_copy(update={"seed": int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16)})
    run_id: str | None = None
    """Run id; generated from the time and a config hash when unset."""
    tolerate_transient_failures: float = Field(0.0, ge=0.0, le=1.0)
    """Fraction of a shard's records that may fail on transient LLM errors (after retries) and be
    rejected with their reason; above it the shard fails and a re-run completes it from cache."""
    min_accepted: int = Field(1, ge=0)
    """A run whose dataset (the curate stage's output) holds fewer dialogues ends failed, with
    the reason, and is not exported (its records stay in storage; `toolfactory export` writes
    them on demand). 0: no floor."""
    min_pass_rate: dict[Literal["domains", "tools", "pool", "tasks", "dialogues", "verify", "measure", "select", "curate"], float] = Field(
        default_factory=dict
    )
    """Optional pass-rate floor per stage (records kept over records judged, as `stats` shows),
    e.g. `{verify: 0.3}`: a run with a stage below its floor ends failed like `min_accepted`."""

    @field_validator("min_pass_rate")
    @classmethod
    def _rates(cls, value: dict[str, float]) -> dict[str, float]:
        if any(not 0.0 <= rate <= 1.0 for rate in value.values()):
            raise ValueError("pass-rate floors must be between 0 and 1")
        return value

    fan_in: Literal["wait", "proceed"] = "wait"
    """A stage that reads every shard of the stage before it (pool, curate) when some of them
    failed: `wait` leaves it blocked until `rerun` has them all (a finished run is then exactly a
    clean run's); `proceed` runs it on the shards that exist, records the missing ones, and a later
    `rerun` adds what they bring as supplement shards, down to the dataset."""
    root_in_use: Literal["wait", "fail"] = "wait"
    """When another run holds the storage root (its pool is shared): wait for it, or fail at once
    with one message naming that run."""
    root_wait_s: float = Field(43200.0, ge=0)
    """How long to wait for the storage root before failing (with `root_in_use: wait`)."""


class OrchestrationConfig(Section):
    """Prefect and Ray. PREFECT_API_URL and RAY_ADDRESS in the environment select servers."""

    ray_address: str | None = None
    """Ray cluster address; default RAY_ADDRESS from the environment, else a local Ray."""
    ray_num_cpus: int | None = Field(None, ge=1)
    """CPUs of a local Ray (default: all)."""
    shard_cpus: float = Field(1.0, gt=0, le=64)
    """Ray CPUs a shard task reserves. A shard mostly waits for LLM answers, so a fraction (0.25:
    four shards in flight per core) keeps more requests going and lets the shards of stages that
    overlap start as soon as their input commits; 1 is one shard per core."""
    task_retries: int = Field(2, ge=0, le=10)
    """Retries of a shard task after a transient error."""
    task_retry_delay_s: float = Field(2.0, ge=0)
    """Delay between shard task retries."""
    # The processes a run starts for itself are waited for in wall time, with a line every 15 s
    # while they start. The defaults are sized for a loaded 2-core machine (load 30: a shared CI
    # runner, a worker node running other jobs), where Prefect's 20 s and Ray's 30 s were too short
    # and 180 s was enough; an idle machine starts each in seconds, and a process that exits while
    # starting fails at once, whatever its deadline.
    prefect_start_timeout_s: float = Field(300.0, gt=0, le=3600)
    """How long to wait for the temporary Prefect API the run starts when PREFECT_API_URL is unset."""
    ray_start_timeout_s: float = Field(300.0, gt=0, le=3600)
    """How long to wait for the local Ray the run starts when no cluster address is set: its head
    (GCS, raylet and agents) and the driver's connection to it."""
    simulator_start_timeout_s: float = Field(180.0, gt=0, le=3600)
    """How long to wait for the offline simulator (`llm.provider: simulator`) to answer."""
    session_host_close_timeout_s: float = Field(60.0, gt=0, le=3600)
    """How long the run waits, when its stages end, for each node's session host to stop the
    executable sources' processes it kept warm (:mod:`toolfactory.executable.node_pool`); a host
    still busy after that is killed, and its processes with it."""
