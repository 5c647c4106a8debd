"""A shard that fails on transient LLM errors after its retries is an expected outcome: one WARNING
line, no ERROR and no traceback, in the Prefect API's log and on the Ray workers' stderr, while the
retries still happen and the driver still records the shard failed with its error and attempts.
On the Prefect test harness, the session's Ray and a simulator served over HTTP."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import http, small_run_overrides
from toolfactory.simulator import SimulatorSettings, start_simulator

pytestmark = [pytest.mark.e2e, pytest.mark.fault_matrix]


def ray_worker_logs() -> list[Path]:
    """The stderr files of every Ray worker of the cluster this process is connected to."""
    import ray

    # Each node's object store socket is in its session folder, beside the session's logs.
    sessions = {Path(node["ObjectStoreSocketName"]).parent.parent for node in ray.nodes() if node["Alive"]}
    return sorted(path for session in sessions for path in (session / "logs").glob("worker-*.err"))


def _sizes(paths: list[Path]) -> dict[Path, int]:
    return {path: path.stat().st_size for path in paths}


def _written_since(before: dict[Path, int]) -> str:
    """What the Ray workers wrote to their stderr since `before` (new workers included)."""
    written = []
    for path in ray_worker_logs():
        with path.open("rb") as log:
            log.seek(before.get(path, 0))
            written.append(log.read().decode(errors="replace"))
    return "".join(written)


def run_logs(flow_run_ids: list[Any]) -> list[Any]:
    """Every log record the Prefect API holds of these flow runs and of their task runs."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.client.schemas.sorting import LogSort

    found: list[Any] = []
    with get_client(sync_client=True) as client:
        while page := client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=flow_run_ids)), limit=200,
                                       offset=len(found), sort=LogSort.TIMESTAMP_ASC):
            found += page
    return found


def test_a_shard_failed_on_transient_errors_is_one_warning_line_and_still_retried_and_recorded(
    prefect_api: str, ray_cluster: None, tmp_path: Path
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    from flows.execute import summary_of
    from flows.generate import generate
    from flows.leftovers import run_flow_names, stage_flow_names

    root, run_id = tmp_path / "data", "transient-night"
    with start_simulator(SimulatorSettings()) as sim:
        # The endpoint fails every request once the run is planned (preflight has passed): the
        # tasks stage, the first to ask it, fails after its retry.
        def break_once_planned() -> None:
            deadline = time.monotonic() + 600
            while not (root / "runs" / run_id / "manifest.json").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            http.post(f"{sim.root_url}/simulator/settings", json={"rate_500": 1.0}).raise_for_status()

        breaker = threading.Thread(target=break_once_planned, daemon=True)
        breaker.start()
        before = _sizes(ray_worker_logs())
        summary = summary_of(generate(overrides=small_run_overrides(root, **{
            "run.run_id": run_id, "llm.provider": "openai-compatible", "llm.base_url": sim.base_url,
            "llm.max_retries": 0, "orchestration.task_retries": 1}), return_state=True))
        breaker.join(10)
    assert summary["status"] == "failed"
    [tasks] = [stage for stage in summary["stages"] if stage["stage"] == "tasks"]
    [failed] = tasks["failed_shards"]
    assert failed["status"] == "failed", failed
    assert failed["error"].startswith("ShardIncomplete: tasks shard 0: ") and "The server had an error" in failed["error"]
    with duckdb.connect(str(root / "stats.duckdb"), read_only=True) as con:
        [(attempts,)] = con.execute("SELECT attempts FROM shards WHERE run_id = ? AND stage = 'tasks'", [run_id]).fetchall()
    assert attempts == 2  # retried once, as the driver read it from Prefect

    with get_client(sync_client=True) as client:
        flow_runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(
            any_=[*run_flow_names(run_id), *stage_flow_names(run_id)])))
    # A Ray worker sends its records to the API in batches, every few seconds.
    deadline = time.monotonic() + 60
    logs = run_logs([flow_run.id for flow_run in flow_runs])
    while not any(log.task_run_id is not None and log.message.startswith("Finished in state") for log in logs):
        assert time.monotonic() < deadline, [log.message for log in logs]
        time.sleep(1)
        logs = run_logs([flow_run.id for flow_run in flow_runs])
    assert not [log.message for log in logs if "Traceback" in log.message]
    shard = [log for log in logs if log.task_run_id is not None and "ShardIncomplete" in log.message]
    # The retry, at INFO as Prefect says it, then the final state: one WARNING line.
    assert [log.level for log in shard] == [20, 30], [(log.level, log.message) for log in shard]
    assert "Retry 1/1" in shard[0].message and shard[1].message.startswith("Finished in state Failed(")
    assert not [log.message for log in logs if log.task_run_id is not None and log.level >= 40]

    written = _written_since(before)
    assert "ShardIncomplete" in written  # the workers' stderr holds the tasks' log lines …
    assert "Traceback" not in written and "| ERROR" not in written, written[-3000:]  # … with no traceback


def _engine_record(level: int, message: str, task_run_id: str, error: BaseException | None = None) -> logging.LogRecord:
    """A record as Prefect's task engine makes it: on its logger, with the task run's id."""
    exc_info = (type(error), error, error.__traceback__) if error is not None else None
    return logging.getLogger("prefect.task_runs").makeRecord(
        "prefect.task_runs", level, __file__, 0, message, (), exc_info, extra={"task_run_id": task_run_id})


def test_a_terminal_error_the_project_raises_is_one_warning_and_any_other_keeps_its_traceback() -> None:
    from prefect.client.schemas.objects import TaskRun
    from prefect.states import Failed

    from tasks.shard import EXPECTED_FAILURES, _retry_transient, shard_task
    from toolfactory.errors import EndpointRefused, ShardIncomplete

    refused = EndpointRefused("judge", "m", "json_schema", 400, "no", 9)
    run = TaskRun(task_key="shard", dynamic_key="0", flow_run_id=None)
    # A terminal error with retries left: Prefect declines the retry without a line of its own.
    assert _retry_transient(shard_task, run, Failed(data=refused)) is False
    final = _engine_record(logging.ERROR, "Finished in state Failed('…')", str(run.id))
    assert EXPECTED_FAILURES.filter(final) and final.levelno == logging.WARNING and final.levelname == "WARNING"

    # Retries exhausted: the engine's record with the traceback goes, its final line is a WARNING.
    other = TaskRun(task_key="shard", dynamic_key="1", flow_run_id=None)
    assert _retry_transient(shard_task, other, Failed(data=ShardIncomplete("tasks shard 1: …"))) is True
    try:
        raise ShardIncomplete("tasks shard 1: …")
    except ShardIncomplete as exc:
        assert not EXPECTED_FAILURES.filter(_engine_record(logging.ERROR, "Task run failed with exception", str(other.id), exc))
    final = _engine_record(logging.ERROR, "Finished in state Failed('…')", str(other.id))
    assert EXPECTED_FAILURES.filter(final) and final.levelno == logging.WARNING

    # Anything else is a bug to look at: both records stay ERROR, the traceback with them.
    third = TaskRun(task_key="shard", dynamic_key="2", flow_run_id=None)
    try:
        raise ValueError("a bug")
    except ValueError as exc:
        crash = _engine_record(logging.ERROR, "Task run failed with exception", str(third.id), exc)
    assert _retry_transient(shard_task, third, Failed(data=ValueError("a bug"))) is False
    final = _engine_record(logging.ERROR, "Finished in state Failed('…')", str(third.id))
    assert EXPECTED_FAILURES.filter(crash) and crash.levelno == logging.ERROR and crash.exc_info is not None
    assert EXPECTED_FAILURES.filter(final) and final.levelno == logging.ERROR
