"""Flow runs a killed driver left unfinished, set Crashed by the next execution of its run.

A driver killed outright (SIGKILL, out of memory) cannot end its flow runs: the run's flow, its
stage flows and their shard task runs would stay Running in Prefect for good. A Prefect worker sets
Crashed the flow run whose process it started once that process exits, but not the stage flows
that ran inside it; a driver started from the command line has no one to do even that.

So each execution of a run records its driver (host, process id, start time: the
:class:`~toolfactory.run.lifetime.Driver` its shards check before they commit) in the labels of
its flow run, and before it runs anything it ends what earlier executions of the run left:

* every stage flow of the run that has not ended, and the flow above it: stage flows run only
  while their execution holds the storage root's lease (:mod:`toolfactory.run.lease`), and all of
  them end before it lets the lease go; this execution holds it now, so the driver that ran them
  is gone, wherever it ran;
* every flow of the run (`generate-<run>`, `rerun-<run>`) that has not ended and whose recorded
  driver ran on this host and is gone.

Each is set Crashed, with every flow and task run below it that had not ended, and a message that
names the execution that found it. A flow whose driver ran on another host and was killed after
its last stage flow ended cannot be told from one that is still ending: it is left as it is (the
Prefect worker that started it, if any, sets it Crashed).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterName,
    FlowRunFilterParentFlowRunId,
    FlowRunFilterState,
    FlowRunFilterStateType,
    TaskRunFilter,
    TaskRunFilterState,
    TaskRunFilterStateType,
)
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.states import Crashed

from toolfactory.run.lifetime import Driver
from toolfactory.stages import STAGE_NAMES

# The states of a run that its process ends; a Scheduled one has not begun (a deployment's next run).
UNFINISHED = [StateType.PENDING, StateType.RUNNING, StateType.PAUSED, StateType.CANCELLING]
HOST, PID, STARTED = "toolfactory.driver.host", "toolfactory.driver.pid", "toolfactory.driver.started"


def run_flow_names(run_id: str) -> list[str]:
    """The names of the flow runs that execute run `run_id` (flows/generate.py, flows/rerun.py)."""
    return [f"generate-{run_id}", f"rerun-{run_id}"]


def stage_flow_names(run_id: str) -> list[str]:
    """The names of run `run_id`'s stage flows (flows/execute.py)."""
    return [f"{run_id}/{stage}" for stage in STAGE_NAMES]


def take_over(run_id: str, flow_run: FlowRun, driver: Driver, log: Any) -> list[FlowRun]:
    """Record `driver` as the one executing run `run_id` in `flow_run`, and set Crashed what
    earlier executions of the run left unfinished (see the module's doc); those flow runs, each
    named in `log`."""
    with get_client(sync_client=True) as client:
        client.update_flow_run_labels(flow_run.id, {HOST: driver.host, PID: str(driver.pid), STARTED: driver.started or ""})
        left = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            name=FlowRunFilterName(any_=[*run_flow_names(run_id), *stage_flow_names(run_id)]),
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=UNFINISHED))))
        gone: dict[UUID, FlowRun] = {}
        for found in left:
            if found.id == flow_run.id:
                continue
            if found.name in run_flow_names(run_id):
                if _driver_gone(found):
                    gone.setdefault(found.id, found)
                continue
            parent = _parent_flow_run(client, found)
            top = parent if parent is not None and parent.id != flow_run.id and _unfinished(parent) else found
            gone.setdefault(top.id, top)
        message = (f"its driver is gone (killed, or out of memory) without ending it; found by flow run "
                   f"{flow_run.name!r}, which executes run {run_id} again")
        for top in gone.values():
            log.warning("flow run %r of run %s was left %s by a driver that is gone: set Crashed, with what it left "
                        "unfinished below it", top.name, run_id, top.state_name)
            _crash(client, top.id, message)
    return list(gone.values())


def _driver_gone(flow_run: FlowRun) -> bool:
    labels = flow_run.labels or {}
    if HOST not in labels or not str(labels.get(PID, "")).isdigit():
        return False  # it has not begun to execute the run: it may still be waiting for the root
    return Driver(str(labels[HOST]), int(labels[PID]), str(labels.get(STARTED) or "") or None).gone()


def _unfinished(flow_run: FlowRun) -> bool:
    return flow_run.state_type in UNFINISHED


def _parent_flow_run(client: SyncPrefectClient, flow_run: FlowRun) -> FlowRun | None:
    if flow_run.parent_task_run_id is None:
        return None
    task_run = client.read_task_run(flow_run.parent_task_run_id)
    return client.read_flow_run(task_run.flow_run_id) if task_run.flow_run_id is not None else None


def _crash(client: SyncPrefectClient, flow_run_id: UUID, message: str) -> None:
    """Set `flow_run_id` Crashed, with every unfinished task run and sub-flow below it."""
    unfinished_tasks = TaskRunFilter(state=TaskRunFilterState(type=TaskRunFilterStateType(any_=UNFINISHED)))
    for task_run in client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                                          task_run_filter=unfinished_tasks):
        client.set_task_run_state(task_run.id, Crashed(message=message), force=True)
    for child in client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id]),
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=UNFINISHED)))):
        _crash(client, child.id, message)
    client.set_flow_run_state(flow_run_id, Crashed(message=message), force=True)
