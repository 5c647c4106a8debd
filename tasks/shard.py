"""The Prefect task that runs one (stage, shard) on a Ray worker."""

from __future__ import annotations

from typing import Any

import ray
from prefect import Task, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.runtime import task_run
from prefect.states import State

from toolfactory.config import Config
from toolfactory.errors import retryable
from toolfactory.run.execution import ShardJob, run_shard


def _retry_transient(_task: Task[Any, Any], _run: TaskRun, state: State[Any]) -> bool:
    """Retry only what a retry can fix; a terminal error fails the shard at once."""
    try:
        state.result()
    except Exception as exc:
        return retryable(exc)
    return False


@task(
    name="shard",
    task_run_name="{run_id}/{stage}/part-{index:05d}",
    cache_policy=NO_CACHE,  # shards are idempotent through storage, not Prefect's result cache
    persist_result=False,
    retry_condition_fn=_retry_transient,
)
def shard_task(run_id: str, stage: str, index: int, job: ShardJob) -> dict[str, Any]:
    metrics = run_shard(job, node=_ray_node())
    return {**metrics, "attempts": int(task_run.run_count or 1)}


def _ray_node() -> str | None:
    """The Ray node this task runs on, kept in the shard's metrics (None outside a Ray worker)."""
    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None


def configured(config: Config) -> Task[..., dict[str, Any]]:
    return shard_task.with_options(
        retries=config.orchestration.task_retries,
        retry_delay_seconds=config.orchestration.task_retry_delay_s,
    )
