"""A driver killed outright leaves its flow runs Running in Prefect; the next execution of its run
sets them Crashed (flows/leftovers.py), on the Prefect test harness and the session's Ray."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import small_run_overrides

pytestmark = [pytest.mark.e2e, pytest.mark.fault_matrix]
TOOLFACTORY = str(Path(sys.executable).with_name("toolfactory"))


def _flow_runs(names: list[str]) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    with get_client(sync_client=True) as client:
        return client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=names)))


def _task_runs(flow_run_ids: list[Any]) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        return client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=flow_run_ids)))


def test_the_flow_runs_of_a_sigkilled_driver_are_set_crashed_by_the_next_execution_of_its_run(
    prefect_api: str, ray_head: str, ray_cluster: None, tmp_path: Path
) -> None:
    from flows.execute import summary_of
    from flows.leftovers import run_flow_names, stage_flow_names
    from flows.rerun import rerun

    root, run_id = tmp_path / "data", "killed-driver"
    names = [*run_flow_names(run_id), *stage_flow_names(run_id)]
    overrides = small_run_overrides(root, **{"run.run_id": run_id, "llm.simulator.latency_ms": 300, "tools.max_tools": 4,
                                             "tools.tools_per_shard": 2, "llm.max_concurrency": 1})
    # The session's Prefect API and Ray, as a worker's flow process has them: its flow runs outlive it.
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TOOLFACTORY_")},
           "PREFECT_API_URL": prefect_api, "RAY_ADDRESS": ray_head}
    driver = subprocess.Popen([TOOLFACTORY, "run", *sum((["--set", o] for o in overrides), [])], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while not any(r.name == f"{run_id}/tasks" and r.state_type.value == "RUNNING" for r in _flow_runs(names)):
            assert driver.poll() is None, f"the driver exited with {driver.returncode} before its tasks stage ran"
            assert time.monotonic() < deadline, "no tasks stage flow running after 600 s"
            time.sleep(0.5)
        time.sleep(2)  # its shard tasks running too
    finally:
        driver.kill()  # the driver alone, as the kernel kills a process out of memory
        driver.wait()
    left = {r.name: r for r in _flow_runs(names) if r.state_type.value != "COMPLETED"}
    assert f"generate-{run_id}" in left and left.keys() & set(stage_flow_names(run_id)), left.keys()
    assert {r.state_type.value for r in left.values()} <= {"RUNNING", "PENDING"}  # nobody ended them

    finished = summary_of(rerun(run_id=run_id, overrides=[f"storage.root={root}", "llm.simulator.latency_ms=0",
                                                          "llm.max_concurrency=32"], return_state=True))
    assert finished["status"] == "completed"
    runs = _flow_runs(names)
    killed = [r for r in runs if r.id in {left[name].id for name in left}]
    assert {r.name: r.state_type.value for r in killed} == {name: "CRASHED" for name in left}
    assert all("driver is gone" in (r.state.message or "") and f"rerun-{run_id}" in (r.state.message or "")
               for r in killed), [r.state.message for r in killed]
    assert not [t.name for t in _task_runs([r.id for r in killed]) if t.state_type.value in ("RUNNING", "PENDING")]
    # The execution that found them ended as any other: its own flows are not touched.
    assert {r.state_type.value for r in runs if r.id not in {k.id for k in killed}} == {"COMPLETED"}
