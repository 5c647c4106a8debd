"""The deployments of deploy/prefect.yaml, registered with the real `prefect deploy` and run by a
real process worker from a checkout (no image): the pull step finds the project through the
worker's TOOLFACTORY_HOME, and the nightly flow completes a small run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, small_run_overrides

pytestmark = [pytest.mark.e2e, pytest.mark.fault_matrix]
BIN = Path(sys.executable).parent


def test_the_nightly_deployment_runs_on_a_local_process_worker(prefect_api: str, ray_head: str, tmp_path: Path) -> None:
    from prefect.deployments import run_deployment

    env = {k: v for k, v in os.environ.items() if k != "TOOLFACTORY_HOME"}
    env.update(PREFECT_API_URL=prefect_api, RAY_AUTH_MODE="disabled", PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    subprocess.run([BIN / "prefect", "work-pool", "create", "toolfactory", "--type", "process", "--overwrite"],
                   env=env, cwd=REPO, check=True, capture_output=True, timeout=120)
    deployed = subprocess.run([BIN / "prefect", "--no-prompt", "deploy", "--prefect-file", "deploy/prefect.yaml", "--all"],
                              env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert deployed.returncode == 0, deployed.stdout[-2000:] + deployed.stderr[-2000:]
    log = (tmp_path / "worker.log").open("w")
    # The worker asks for flow runs every second, not every 10 s, and the test asks for the run's
    # state every second, not every 5 s: the test waits for one run, not for the polls.
    # Its flow runs use a Ray cluster, as in production (RAY_ADDRESS in docker-compose.yml).
    worker = subprocess.Popen([BIN / "prefect", "worker", "start", "--pool", "toolfactory", "--type", "process"],
                              env={**env, "TOOLFACTORY_HOME": str(REPO), "PREFECT_WORKER_QUERY_SECONDS": "1", "RAY_ADDRESS": ray_head},
                              cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        overrides = ["run.seed=null", *small_run_overrides(tmp_path / "data", **{"tools.max_tools": 4})]
        flow_run = run_deployment("generate/nightly", parameters={"overrides": overrides}, timeout=600, poll_interval=1)
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:  # Prefect's worker can hang in its shutdown while its server's SQLite is busy
            worker.kill()
            worker.wait(timeout=30)
        log.close()
    worker_log = (tmp_path / "worker.log").read_text()
    assert flow_run.state is not None and flow_run.state.is_completed(), worker_log[-3000:]
    assert "set_working_directory' completed successfully" in worker_log
    assert list((tmp_path / "data" / "runs").glob("*/curate/part-00000.parquet"))

