"""The stage flow's task runner on a real local Ray and the Prefect test harness: a Ray worker
builds the driver's Prefect settings and a client once and lends them to every task it runs, a
driver with other settings gets its own, and the task runs still reach the API as they did (each
one recorded, completed, with its result)."""

from __future__ import annotations

import sys
import time
from collections import defaultdict

import pytest

from flows.task_runner import KeptContextRayTaskRunner

ray = pytest.importorskip("ray")
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module

pytestmark = pytest.mark.e2e
TASKS = 8


def tasks_seen_by_client() -> tuple[int, int, int]:
    """This worker's pid, how many tasks have used the current sync client so far (this one
    included; 1 every time if each task gets a new client), and a setting of the driver's."""
    import os

    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES

    client = get_client(sync_client=True)
    client._tasks_seen = getattr(client, "_tasks_seen", 0) + 1  # type: ignore[attr-defined]
    return os.getpid(), client._tasks_seen, PREFECT_CLIENT_MAX_RETRIES.value()  # type: ignore[attr-defined]


def test_a_worker_lends_the_drivers_settings_and_one_client_to_the_tasks_it_runs(ray_cluster: None) -> None:
    from prefect import flow, task
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES, temporary_settings

    seen = task(tasks_seen_by_client, name="seen")

    @flow(task_runner=KeptContextRayTaskRunner())
    def several() -> tuple[str, list[tuple[int, int, int]]]:
        from prefect.runtime import flow_run

        futures = [seen.submit() for _ in range(TASKS)]
        return flow_run.id, [future.result() for future in futures]

    for retries in (7, 8):  # two drivers' settings, one after the other, on the same workers
        with temporary_settings({PREFECT_CLIENT_MAX_RETRIES: retries}):
            flow_run_id, results = several()
        assert {setting for _, _, setting in results} == {retries}
        counts: dict[int, list[int]] = defaultdict(list)
        for pid, count, _ in results:
            counts[pid].append(count)
        # Tasks run one after another in a worker, so its counts are 1, 2, 3, … whatever the
        # order; they start at 1 again with the other settings' client.
        assert all(sorted(c) == list(range(1, len(c) + 1)) for c in counts.values()), counts
        assert max(len(c) for c in counts.values()) > 1, f"no worker ran two of the {TASKS} tasks: {counts}"

        # Task runs reach the server's records after the flow returns (its events are written in
        # the background): a loaded machine may take a while.
        deadline = time.monotonic() + 120
        while True:
            with get_client(sync_client=True) as client:
                runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
            done = [run for run in runs if run.state and run.state.type.value == "COMPLETED"]
            if len(done) == TASKS or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert len(runs) == TASKS
        assert {run.state.type.value for run in runs if run.state} == {"COMPLETED"}
