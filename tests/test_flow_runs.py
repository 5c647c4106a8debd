"""What the Prefect flow runs of a run say about it, on the real Prefect test harness: their names
and tags carry the run id and the run's labels, a run that waits for the storage root says so, and
a failed run's own state message (the "State Message" of its page in the UI) names its shards and
the command that finishes it.

Each flow here but the last stops at the root's lease (held by the test), after its preflight and
before any shard, which is all these messages need."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import break_endpoint_once_planned, small_run_overrides
from toolfactory.config import load_config
from toolfactory.run.lease import root_lease
from toolfactory.run.manifest import Manifest, write_manifest
from toolfactory.run.planning import plan_run
from toolfactory.storage import ObjectStore

pytestmark = pytest.mark.e2e


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def flow_run_logs() -> Iterator[list[logging.LogRecord]]:
    """The records of Prefect's flow-run loggers (which need not reach the root logger)."""
    import flows.generate  # noqa: F401  (importing the flows configures Prefect's logging again: first)

    handler = _Records()
    logger = logging.getLogger("prefect.flow_runs")
    logger.addHandler(handler)
    yield handler.records
    logger.removeHandler(handler)


def _waiting_overrides(root: Path) -> list[str]:
    return small_run_overrides(root, **{"run.root_in_use": "wait", "run.root_wait_s": 3})


def _flow_run(state: Any) -> Any:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(state.state_details.flow_run_id)


def test_a_generate_flow_run_is_named_after_its_run_id_in_every_log_line(
    prefect_api: str, tmp_path: Path, flow_run_logs: list[logging.LogRecord]
) -> None:
    from flows.generate import generate

    root = tmp_path / "data"
    with root_lease(ObjectStore.open(load_config(None, [f"storage.root={root}"]).storage), "holder", wait=False, wait_s=0):
        state = generate(config_path=None, overrides=_waiting_overrides(root), return_state=True)  # no run id given
    assert state.is_failed()
    name = _flow_run(state).name
    assert re.fullmatch(r"generate-\d{8}-\d{6}-[0-9a-f]{10}", name)
    names = {getattr(record, "flow_run_name", None) for record in flow_run_logs}
    assert flow_run_logs and names == {name}


def test_a_run_waiting_for_the_root_says_who_holds_it(
    prefect_api: str, tmp_path: Path, flow_run_logs: list[logging.LogRecord]
) -> None:
    from flows.generate import generate

    root = tmp_path / "data"
    with root_lease(ObjectStore.open(load_config(None, [f"storage.root={root}"]).storage), "holder", wait=False, wait_s=0):
        state = generate(config_path=None, overrides=_waiting_overrides(root), run_id="waiting-run", return_state=True)
    assert state.is_failed() and "in use by run holder" in str(state.message)
    [waiting] = [r.getMessage() for r in flow_run_logs if "waits for storage root" in r.getMessage()]
    assert waiting.startswith(f"run waiting-run waits for storage root {root}, in use by run holder (on ")
    assert "\n" not in waiting


def test_a_rerun_flow_run_has_the_run_tags_and_its_run_id_in_its_name(prefect_api: str, tmp_path: Path) -> None:
    from flows.rerun import rerun

    root = tmp_path / "data"
    config = load_config(None, _waiting_overrides(root))
    store = ObjectStore.open(config.storage)
    write_manifest(store, Manifest.create("run-to-finish", config, plan_run(config, "run-to-finish", store)))
    with root_lease(store, "holder", wait=False, wait_s=0):
        state = rerun(run_id="run-to-finish", overrides=[f"storage.root={root}"], return_state=True)
    assert state.is_failed()
    flow_run = _flow_run(state)
    assert flow_run.name == "rerun-run-to-finish"
    assert {"toolfactory", "provider:simulator", "recipes:toolalpaca", "rerun"} <= set(flow_run.tags)


def test_a_failed_run_states_its_shards_and_rerun_command_in_its_own_flow_run(
    prefect_api: str, ray_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (FlowFilter, FlowFilterName, FlowRunFilter, FlowRunFilterName,
                                                FlowRunFilterParentTaskRunId)

    from flows.execute import summary_of
    from flows.generate import generate
    from toolfactory.run.outcome import unfinished_shards
    from toolfactory.run.summary import RunSummary
    from toolfactory.simulator import SimulatorSettings, start_simulator

    monkeypatch.setenv("OPENAI_API_KEY", "sk-flow-runs")
    root = tmp_path / "data"
    with start_simulator(SimulatorSettings()) as sim:
        breaker = break_endpoint_once_planned(lambda: bool(list(root.glob("runs/*/manifest.json"))), sim.root_url)
        state = generate(overrides=small_run_overrides(root, **{
            "llm.provider": "openai-compatible", "llm.base_url": sim.base_url, "llm.max_retries": 0,
            "orchestration.task_retries": 0, "tools.tools_per_shard": 4, "run.run_id": "failed-night",
        }), return_state=True)
        breaker.join()
    summary = summary_of(state)
    shards = unfinished_shards(RunSummary.from_dict(summary))
    assert summary["status"] == "failed" and any(shard.endswith("(failed)") for shard in shards)
    # What the UI shows on the run's page: the state the API keeps, not the one this process returned.
    flow_run = _flow_run(state)
    assert flow_run.state is not None and flow_run.state.is_failed()
    message = str(flow_run.state.message)
    assert message == state.message and "\n" not in message
    for shard in shards[:8]:
        assert shard in message
    assert len(shards) <= 8 or f"and {len(shards) - 8} more" in message
    assert message.endswith(f"Finish the run with: toolfactory rerun failed-night --set storage.root={root}")
    # The nightly runs alone: the `generate` flow's runs, or the runs that are no sub-flow
    # (the Runs page's "Hide subflows"); the stage flows carry the run's tags too.
    with get_client(sync_client=True) as client:
        of_run = FlowRunFilterName(like_="failed-night")
        stages = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_="failed-night/")))
        top = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=of_run, parent_task_run_id=FlowRunFilterParentTaskRunId(is_null_=True)))
        nightly = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=of_run), flow_filter=FlowFilter(name=FlowFilterName(any_=["generate"])))
    assert stages and all(run.parent_task_run_id is not None and "toolfactory" in run.tags for run in stages)
    assert [run.id for run in top] == [run.id for run in nightly] == [flow_run.id]
