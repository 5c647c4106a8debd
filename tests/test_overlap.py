"""Stages that overlap: a one-to-one stage's shard starts when its input shard commits, not when
the stage before it has finished; a failed shard blocks only the shards that read it."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import small_run_overrides
from toolfactory.run.fan_in import chains
from toolfactory.stages import STAGE_NAMES


def test_the_one_to_one_stages_form_one_chain_and_fan_in_stages_stand_alone() -> None:
    assert chains(STAGE_NAMES) == [("domains",), ("tools",), ("pool",), ("tasks", "dialogues", "verify", "measure"),
                                   ("select",), ("curate",)]
    assert chains(("tasks", "verify", "dialogues")) == [("tasks",), ("verify",), ("dialogues",)]  # only the stage followed


def _shards(root: Path, run_id: str, stage: str) -> dict[int, tuple[Any, ...]]:
    with duckdb.connect(str(root / "stats.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT shard, status, started_at, finished_at, error FROM shards WHERE run_id = ? AND stage = ?",
                           [run_id, stage]).fetchall()
    return {row[0]: row[1:] for row in rows}


def _run(overrides: list[str]) -> dict[str, Any]:
    from flows.execute import summary_of
    from flows.generate import generate

    return summary_of(generate(overrides=overrides, return_state=True))


# Four shards a stage, with some latency, and 0.6 of a CPU a shard: three run at once on the
# tests' two Ray CPUs.
FOUR_SHARDS = {"tools.max_tools": 12, "tools.tools_per_shard": 3, "llm.simulator.latency_ms": 20,
               "orchestration.shard_cpus": 0.6}


@pytest.mark.e2e
def test_a_verify_shard_starts_before_the_last_dialogues_shard_finishes(prefect_api: str, ray_cluster: None, tmp_path: Path) -> None:
    # The Ray worker running dialogues shard 1 is stopped (SIGSTOP) from its start until a verify
    # shard has committed: behind a stage barrier none could, and the wait below would time out.
    # (Shards of one size end within tens of milliseconds of each other: which ends last is a race.)
    root = tmp_path / "data"
    stopped: dict[str, Any] = {}

    def hold_dialogues_shard_1_until_a_verify_shard_commits() -> None:
        deadline = time.monotonic() + 120  # then let it go, whatever happened: the run must end
        while time.monotonic() < deadline and not stopped:
            for usage in root.glob("runs/*/dialogues/_usage/part-00001/*.json"):
                try:
                    pid = json.loads(usage.read_text())["pid"]
                except (OSError, ValueError):  # replaced while read
                    continue
                os.kill(pid, signal.SIGSTOP)
                stopped.update(pid=pid)
                break
            time.sleep(0.01)
        try:
            while time.monotonic() < deadline and not list(root.glob("runs/*/verify/part-*.parquet")):
                time.sleep(0.05)
            stopped["verify_committed"] = bool(list(root.glob("runs/*/verify/part-*.parquet")))
        finally:
            if "pid" in stopped:
                os.kill(stopped["pid"], signal.SIGCONT)

    holder = threading.Thread(target=hold_dialogues_shard_1_until_a_verify_shard_commits, daemon=True)
    holder.start()
    # One request at a time with some latency: dialogues shard 1 runs for seconds, and is caught running.
    summary = _run(small_run_overrides(root, **{**FOUR_SHARDS, "llm.max_concurrency": 1, "llm.simulator.latency_ms": 100}))
    holder.join()
    assert summary["status"] == "completed"
    assert stopped.get("verify_committed"), f"no verify shard committed while dialogues shard 1 was held: {stopped}"
    dialogues, verify = _shards(root, summary["run_id"], "dialogues"), _shards(root, summary["run_id"], "verify")
    assert len(dialogues) == len(verify) == 4
    for index, (_, started, _, _) in verify.items():
        assert started >= dialogues[index][2]  # after its own input committed
    # With a stage barrier, no verify shard could start before every dialogues shard finished.
    assert min(started for _, started, _, _ in verify.values()) < dialogues[1][2]


@pytest.mark.e2e
def test_a_failed_dialogues_shard_blocks_only_its_verify_shard_and_rerun_completes_it(
    prefect_api: str, ray_cluster: None, tmp_path: Path
) -> None:
    from flows.execute import summary_of
    from flows.rerun import rerun

    root, run_id = tmp_path / "data", "overlap-blocked"
    # A fault on one path of the storage: dialogues shard 1 cannot write its metrics, so it fails.
    obstacle = root / "runs" / run_id / "dialogues" / "_metrics" / "part-00001.json"
    obstacle.mkdir(parents=True)
    (obstacle / "in-the-way").write_text("")
    first = _run(small_run_overrides(root, **FOUR_SHARDS, **{"run.run_id": run_id, "orchestration.task_retries": 0}))
    assert first["status"] == "failed"
    dialogues, verify = _shards(root, run_id, "dialogues"), _shards(root, run_id, "verify")
    assert dialogues[1][0] == "failed" and all(dialogues[i][0] == "completed" for i in (0, 2, 3))
    assert verify[1][0] == "blocked" and "dialogues/part-00001.parquet" in verify[1][3]
    assert all(verify[i][0] == "completed" for i in (0, 2, 3))
    run_dir = root / "runs" / run_id
    committed = {p: p.stat().st_mtime_ns for p in run_dir.glob("verify/part-*.parquet")}
    assert len(committed) == 3

    (obstacle / "in-the-way").unlink()
    obstacle.rmdir()
    second = summary_of(rerun(run_id=run_id, overrides=[f"storage.root={root}"], return_state=True))
    assert second["status"] == "completed"
    assert all(p.stat().st_mtime_ns == mtime for p, mtime in committed.items())  # never run again
    for stage in ("dialogues", "verify", "curate"):
        ids = [row[0] for p in sorted(run_dir.glob(f"{stage}/part-*.parquet"))
               for row in duckdb.sql(f"SELECT id FROM read_parquet('{p}')").fetchall()]
        assert ids and len(ids) == len(set(ids)), stage
    assert {status for status, *_ in _shards(root, run_id, "verify").values()} == {"completed"}


def test_a_group_is_settled_once_its_shards_have_while_its_flows_still_end() -> None:
    """The next group starts when every shard of this one has settled; a flow's own end (its final
    state in Prefect, the heartbeat thread Prefect joins) does not hold it up."""
    import threading

    from flows.overlap import Group, StageWork, StageFlows, current_link

    ending = threading.Event()

    def flow(item: StageWork) -> str:
        link = current_link(item.stage)
        link.started.set()
        link.end()  # every shard has settled
        assert ending.wait(30)  # the flow is still ending
        return item.stage

    with StageFlows() as flows:
        running = flows.start([StageWork("tasks", []), StageWork("dialogues", [])], Group(lambda: None, None), flow)
        settled = threading.Thread(target=running.settled)
        settled.start()
        settled.join(10)
        assert not settled.is_alive()
        assert all(thread.is_alive() for thread in running.threads)
        ending.set()
    assert not any(thread.is_alive() for thread in running.threads)
    assert running.join() == ["tasks", "dialogues"]


def test_no_flow_of_a_group_submits_a_shard_before_every_flow_of_the_group_has_begun() -> None:
    """A flow begins (its sub-flow is created in Prefect) before any flow of its group submits a
    shard: on a server on SQLite, a sub-flow created while shard task runs are created is often
    refused as "database is locked", and its client waits about 2 s before it asks again."""
    import threading

    from flows.overlap import Group, StageWork, current_link, run_group

    begun: list[str] = []
    submitted_after: dict[str, list[str]] = {}
    lock = threading.Lock()

    def flow(item: StageWork) -> None:
        link = current_link(item.stage)
        with lock:
            begun.append(item.stage)
        link.started.set()
        assert link.all_started.wait(10)
        with lock:
            submitted_after[item.stage] = list(begun)  # the flows begun when this one submits
        link.end()

    stages = ["tasks", "dialogues", "verify", "measure"]
    running = run_group([StageWork(stage, []) for stage in stages], Group(lambda: None, None), flow)
    running.settled()
    running.join()
    assert submitted_after == {stage: stages for stage in stages}
    assert current_link("tools").all_started.is_set()  # a stage alone does not wait


def test_a_flow_that_fails_before_its_shards_settle_fails_the_group() -> None:
    from flows.overlap import Group, StageWork, run_group

    def flow(item: StageWork) -> None:
        raise RuntimeError(f"{item.stage}: the Prefect API is gone")

    running = run_group([StageWork("verify", [])], Group(lambda: None, None), flow)
    with pytest.raises(RuntimeError, match="verify: the Prefect API is gone"):
        running.settled()
