"""The fault matrix: each fault an operator meets, reproduced on the real parts, and its outcome.

Cases covered by tests elsewhere carry the `fault_matrix` marker there (`pytest -m fault_matrix`
runs them all); this module holds the cases that had no test: a Ray worker killed mid-shard, a
driver SIGKILLed mid-stage, a fan-in stage proceeding without a failed input.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import http, process_alive, small_run_overrides
from toolfactory.run.lifetime import descendants
from toolfactory.simulator import SimulatorSettings, start_simulator

pytestmark = pytest.mark.fault_matrix
TOOLFACTORY = str(Path(sys.executable).with_name("toolfactory"))


def test_progress_counts_shards_and_writes_plain_lines_without_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    """Case 9: per-stage counts as shards finish (the same line goes to the Prefect log)."""
    from flows.progress import StageProgress
    from toolfactory.run.metrics import ShardMetrics

    done = ShardMetrics.from_dict({"attempt_id": "a", "run_id": "r", "stage": "verify", "shard": 0, "started_at": "",
                                   "finished_at": "", "items_in": 8, "items_out": 6, "rejected": 2, "llm": {"calls": 12}})
    with StageProgress("verify", 3) as progress:
        progress.shard_done(done)
        progress.shard_done(None)
    assert progress.line() == "in 8 · out 6 · pass 75% · 12 LLM calls · 1 failed"
    # stderr is not a terminal here: no bar drawn, the stage's final line only.
    assert capsys.readouterr().err == "verify     2/3 shards in 0:00:00 · in 8 · out 6 · pass 75% · 12 LLM calls · 1 failed\n"


def _usage_files(root: Path, stage: str) -> list[dict[str, Any]]:
    found = []
    for path in root.glob(f"runs/*/{stage}/_usage/part-*/*.json"):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):  # replaced while read
            continue
    return found


def _wait_for(condition: Any, seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := condition():
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")



def _command(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def _committed(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.glob("runs/*/*/part-*.parquet")}


def _attempts(root: Path, run_id: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(root / "stats.duckdb"), read_only=True) as con:
        return con.execute(
            "SELECT stage, shard, outcome, llm_calls, attempt_id FROM shard_attempts WHERE run_id = ? ORDER BY stage, shard",
            [run_id],
        ).fetchall()


@pytest.mark.e2e
def test_a_ray_worker_killed_mid_shard_is_retried_and_its_calls_are_counted(
    prefect_api: str, ray_cluster: None, tmp_path: Path
) -> None:
    """Case 5b: the killed attempt's LLM calls are in the stats, once, also after a re-run."""
    from flows.execute import summary_of
    from flows.generate import generate
    from flows.rerun import rerun

    root = tmp_path / "data"
    with start_simulator(SimulatorSettings(latency_ms=250)) as sim:
        overrides = small_run_overrides(root, **{
            "llm.provider": "openai-compatible", "llm.base_url": sim.base_url, "llm.simulator.latency_ms": 250,
            "tools.max_tools": 4, "tasks.instructions_per_tool": 3, "llm.max_concurrency": 2,
            "run.min_accepted": 0,  # about shards and attempts, not the dataset's size
        })
        result: dict[str, Any] = {}
        flow = threading.Thread(target=lambda: result.update(state=generate(overrides=overrides, return_state=True)))
        flow.start()
        try:
            # A dialogues attempt that has spent calls and is still running: kill its Ray worker.
            victim = _wait_for(lambda: next((u for u in _usage_files(root, "dialogues")
                                             if u["outcome"] == "running" and u["llm"]["calls"] >= 2), None), 600,
                               "a dialogues shard mid-way")
            os.kill(victim["pid"], signal.SIGKILL)
        finally:
            flow.join(900)
        summary = summary_of(result["state"])
        sent = http.get(f"{sim.root_url}/simulator/stats").json()["chat_requests"]
        assert summary["status"] == "completed"
        run_id = summary["run_id"]
        attempts = _attempts(root, run_id)
        killed = [a for a in attempts if a[4] == victim["attempt_id"]]
        # The killed attempt is counted with at least what it had reported when it was killed …
        assert killed and killed[0][2] == "interrupted" and killed[0][3] >= victim["llm"]["calls"]
        # … next to the attempt that completed the same shard.
        assert [a[2] for a in attempts if a[:2] == ("dialogues", victim["shard"])].count("completed") == 1
        recorded = sum(a[3] for a in attempts)
        assert sum(s["llm_calls"] for s in summary["stages"]) == recorded
        assert recorded <= sent  # nothing counted that was not sent

        # A re-run of the finished run sends nothing and counts nothing twice.
        again = summary_of(rerun(run_id=run_id, overrides=[f"storage.root={root}"], return_state=True))
        assert http.get(f"{sim.root_url}/simulator/stats").json()["chat_requests"] == sent
    assert again["status"] == "completed"
    assert sorted(_attempts(root, run_id)) == sorted(attempts)


@pytest.mark.e2e
def test_a_sigkilled_driver_leaves_no_ray_work_nor_server_and_rerun_finishes_the_run(
    prefect_api: str, ray_cluster: None, tmp_path: Path
) -> None:
    """Case 5a: after SIGKILL of the driver alone, its local Ray, its Prefect server and its
    simulator stop, and nothing more is committed; the run is finished by a re-run (against
    another Prefect API: the run is in its storage)."""
    from flows.execute import summary_of
    from flows.rerun import rerun

    root = tmp_path / "data"
    overrides = small_run_overrides(root, **{"llm.simulator.latency_ms": 300, "tools.max_tools": 4, "llm.max_concurrency": 1})
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "RAY_ADDRESS")}  # servers of its own
    driver = subprocess.Popen([TOOLFACTORY, "run", *sum((["--set", o] for o in overrides), [])], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for(lambda: any(u["outcome"] == "running" and u["llm"]["calls"] for u in _usage_files(root, "tasks")),
                  600, "a tasks shard mid-way")
        children = descendants({driver.pid})
        commands = [_command(pid) for pid in children if process_alive(pid)]
        for server, what in (("raylet", "a local Ray"), ("uvicorn", "a Prefect server"), ("toolfactory.simulator", "a simulator")):
            assert any(server in command for command in commands), f"the driver started no {what}: {commands}"
    finally:
        driver.kill()  # the driver alone, not its process group
        driver.wait()
    committed = _committed(root)
    try:
        _wait_for(lambda: not any(process_alive(pid) for pid in children), 30, "the driver's processes to stop")
    finally:
        for pid in children:  # never leave them behind, even when the assertion fails
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)
    time.sleep(1)
    assert _committed(root) == committed  # nothing committed after the driver died
    assert not any(p.name.startswith("part-") for p in (root / "runs").glob("*/dialogues/*"))

    [run_dir] = (root / "runs").iterdir()
    # The latency and the one request at a time only had to keep the driver busy until the kill.
    finished = summary_of(rerun(run_id=run_dir.name, overrides=[f"storage.root={root}", "llm.simulator.latency_ms=0", "llm.max_concurrency=32"],
                                return_state=True))
    assert finished["status"] == "completed"
    ids = [r for p in sorted(run_dir.glob("curate/part-*.parquet")) for r in duckdb.sql(
        f"SELECT id FROM read_parquet('{p}')").fetchall()]
    assert ids and len(ids) == len(set(ids))


@pytest.mark.e2e
def test_a_failed_tools_shard_no_longer_empties_the_dataset_and_rerun_completes_the_fan_in(
    prefect_api: str, ray_cluster: None, tmp_path: Path
) -> None:
    """Case 2: with `run.fan_in: proceed`, pool … curate run without the failed tools shard; the
    re-run adds what it brings as supplement shards, down to the dataset, and decides the selection
    again over every part, with no duplicate."""
    from flows.execute import summary_of
    from flows.generate import generate
    from flows.rerun import rerun

    root, run_id = tmp_path / "data", "fan-in-proceed"
    # A fault on one path of the storage: tools shard 1 cannot write its metrics, so it fails.
    obstacle = root / "runs" / run_id / "tools" / "_metrics" / "part-00001.json"
    obstacle.mkdir(parents=True)
    (obstacle / "in-the-way").write_text("")
    overrides = small_run_overrides(root, **{"run.run_id": run_id, "run.fan_in": "proceed", "orchestration.task_retries": 0,
                                               "tools.tools_per_shard": 4})
    first = summary_of(generate(overrides=overrides, return_state=True))
    stages = {s["stage"]: s for s in first["stages"]}
    assert first["status"] == "failed"
    assert [f["shard"] for f in stages["tools"]["failed_shards"]] == [1]
    assert stages["pool"]["missing_inputs"] == [f"runs/{run_id}/tools/part-00001.parquet"]
    assert stages["curate"]["items_out"] > 0  # a dataset despite the failed shard
    manifest = json.loads((root / "runs" / run_id / "manifest.json").read_text())
    assert [(p["stage"], p["shard"], p["missing"]) for p in manifest["partial"]] == [
        ("pool", 0, [f"runs/{run_id}/tools/part-00001.parquet"])]
    first_dataset = sorted((root / "runs" / run_id / "curate").glob("part-*.parquet"))

    (obstacle / "in-the-way").unlink()
    obstacle.rmdir()
    second = summary_of(rerun(run_id=run_id, overrides=[f"storage.root={root}"], return_state=True))
    stages = {s["stage"]: s for s in second["stages"]}
    assert second["status"] == "completed"
    assert all(not s["missing_inputs"] and not s["failed_shards"] for s in second["stages"])
    # select: one selection, over every measure part; curate: one shard per verify shard, the late
    # one among them (its tasks anchored on the late tools)
    assert (stages["pool"]["shards_total"], stages["select"]["shards_total"], stages["curate"]["shards_total"]) == (2, 1, 3)
    assert stages["tasks"]["shards_total"] == 3  # one more, anchored on the late tools
    run_dir = root / "runs" / run_id
    assert sorted(run_dir.glob("curate/part-*.parquet"))[:2] == first_dataset  # the night's parts, made again

    def ids(stage: str) -> list[str]:
        return [row[0] for p in sorted(run_dir.glob(f"{stage}/part-*.parquet"))
                for row in duckdb.sql(f"SELECT id FROM read_parquet('{p}')").fetchall()]

    dataset, tools = ids("curate"), ids("pool")
    assert len(dataset) == len(set(dataset)) and len(tools) == len(set(tools)) == 8
    assert sorted(p.name for p in (root / "pool" / "tools").glob("*.parquet")) == [f"{run_id}.1.parquet", f"{run_id}.parquet"]
    # The late tools made it to the end: the supplement part of the dataset has dialogues.
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{run_dir}/curate/part-00002.parquet')").fetchall()[0][0] > 0


def _curated(run_dir: Path) -> dict[str, str]:
    """A run's dataset: id → record (JSON text, its curation annotations included)."""
    return {row[0]: row[1] for p in sorted(run_dir.glob("curate/part-*.parquet"))
            for row in duckdb.sql(f"SELECT id, record FROM read_parquet('{p}')").fetchall()}


@pytest.mark.e2e
def test_a_night_selected_without_a_failed_shard_is_after_its_rerun_the_clean_runs_dataset_curation_included(
    prefect_api: str, ray_cluster: None, tmp_path: Path
) -> None:
    """Case 2b: with `run.fan_in: proceed`, select and curate run without a failed dialogues shard;
    once the re-run has committed it, the selection is made again over every measure part, and the
    dataset is the one a clean run of the same config and seed makes, record for record, with the
    same complexity levels, clusters and diversity subsets."""
    from flows.execute import summary_of
    from flows.generate import generate
    from flows.rerun import rerun

    def overrides(root: Path, run_id: str) -> list[str]:
        return small_run_overrides(root, **{"run.run_id": run_id, "run.seed": 7, "run.fan_in": "proceed",
                                            "orchestration.task_retries": 0, "tools.tools_per_shard": 4})

    root, run_id = tmp_path / "night", "selected-without"
    # A fault on one path of the storage: dialogues shard 1 cannot write its metrics, so it fails
    # (its LLM answers are in the cache); verify and measure shard 1 are blocked.
    obstacle = root / "runs" / run_id / "dialogues" / "_metrics" / "part-00001.json"
    obstacle.mkdir(parents=True)
    (obstacle / "in-the-way").write_text("")
    first = summary_of(generate(overrides=overrides(root, run_id), return_state=True))
    stages = {s["stage"]: s for s in first["stages"]}
    assert first["status"] == "failed"
    assert [f["shard"] for f in stages["dialogues"]["failed_shards"]] == [1]
    assert stages["select"]["missing_inputs"] == [f"runs/{run_id}/measure/part-00001.parquet"]
    night = _curated(root / "runs" / run_id)
    assert night  # a dataset despite the failed shard

    (obstacle / "in-the-way").unlink()
    obstacle.rmdir()
    second = summary_of(rerun(run_id=run_id, overrides=[f"storage.root={root}"], return_state=True))
    assert second["status"] == "completed"
    stages = {s["stage"]: s for s in second["stages"]}
    assert (stages["select"]["shards_total"], stages["curate"]["shards_total"]) == (1, 2)
    clean = summary_of(generate(overrides=overrides(tmp_path / "clean", "clean-night"), return_state=True))
    assert clean["status"] == "completed"

    rerun_dataset, clean_dataset = _curated(root / "runs" / run_id), _curated(tmp_path / "clean" / "runs" / "clean-night")
    assert night.keys() < rerun_dataset.keys()
    assert rerun_dataset == clean_dataset

