"""The Prefect task that runs one (stage, shard) on a Ray worker."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any

import ray
from prefect import Task, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.runtime import task_run
from prefect.states import State

from toolfactory.config import Config
from toolfactory.errors import ToolfactoryError, retryable
from toolfactory.executable.node_pool import use_host
from toolfactory.run.execution import ShardJob, run_shard
from toolfactory.run.metrics import ShardMetrics


class ExpectedFailures(logging.Filter):
    """Prefect's task engine ends a failed task run with two ERROR records: the exception with its
    traceback ("Task run failed with exception: … - Retries are exhausted"; none when the retry
    condition declined a retry), then "Finished in state Failed(…)". A shard that fails with an
    error toolfactory raises on purpose (:class:`~toolfactory.errors.ToolfactoryError`: records that
    failed on transient LLM errors, a refusal, the budget, a driver gone) has an expected outcome,
    which its message states and the driver records with its attempts (flows/execute.py): in the
    Prefect API's log and on the Ray worker's stderr (Prefect's console handler) it is the final
    state's line alone, as a WARNING. Any other exception keeps both records, traceback included.

    A filter of the engine's logger, so it applies before any handler, in the process that runs the
    task (a Ray worker, or the driver)."""

    _KEPT = 1024  # task runs whose final line is still to come, at most (a worker runs a few at once)

    def __init__(self) -> None:
        super().__init__()
        self._due: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def expect(self, task_run_id: object) -> None:
        """The task run failed as expected: its final state's line is a WARNING."""
        with self._lock:
            self._due[str(task_run_id)] = None
            while len(self._due) > self._KEPT:
                self._due.popitem(last=False)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        run = str(getattr(record, "task_run_id", None))
        if record.exc_info:
            if isinstance(record.exc_info[1], ToolfactoryError):
                self.expect(run)
                return False
            return True
        with self._lock:
            due = self._due.pop(run, False) is None
        if due:
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        return True


EXPECTED_FAILURES = ExpectedFailures()
logging.getLogger("prefect.task_runs").addFilter(EXPECTED_FAILURES)


def _retry_transient(_task: Task[Any, Any], run: TaskRun, state: State[Any]) -> bool:
    """Retry only what a retry can fix; a terminal error fails the shard at once."""
    try:
        state.result()
    except Exception as exc:
        if retryable(exc):
            return True
        if isinstance(exc, ToolfactoryError):
            EXPECTED_FAILURES.expect(run.id)
        return False
    return False


@task(
    name="shard",
    task_run_name="{run_id}/{stage}/part-{index:05d}",
    cache_policy=NO_CACHE,  # shards are idempotent through storage, not Prefect's result cache
    persist_result=False,
    retry_condition_fn=_retry_transient,
)
def shard_task(run_id: str, stage: str, index: int, job: ShardJob) -> ShardMetrics:
    # Warm sessions of executable sources come from the node's session host, shared by every
    # worker of the node (toolfactory.executable.node_pool).
    host = use_host(run_id)
    try:
        return run_shard(job, node=_ray_node()).with_attempts(int(task_run.run_count or 1))
    finally:
        if host is not None:
            host.var.reset(host)


def _ray_node() -> str | None:
    """The Ray node this task runs on, kept in the shard's metrics (None outside a Ray worker)."""
    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None


def configured(config: Config) -> Task[..., ShardMetrics]:
    return shard_task.with_options(
        retries=config.orchestration.task_retries,
        retry_delay_seconds=config.orchestration.task_retry_delay_s,
    )
