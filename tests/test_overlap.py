"""Stages that overlap: a one-to-one stage's shard starts when its input shard commits, not when
the stage before it has finished; a failed shard blocks only the shards that read it."""

from __future__ import annotations

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


# Four shards a stage, with some latency, and 0.6 of a CPU a shard: the tests' two Ray CPUs run
# three shards at once, so the fourth shard of each stage starts as the first of the three end,
# together with the first verify shard. That verify shard starts before the last dialogues shard
# ends, by about that shard's length (measured: 0.34 s, where the two start within 0.03 s of
# each other); behind a stage barrier it would wait for that end. (With a slot for every shard,
# the shards of a stage end together, and whether a verify shard starts before the last one ends
# is a race.)
FOUR_SHARDS = {"tools.max_tools": 12, "tools.tools_per_shard": 3, "llm.simulator.latency_ms": 20,
               "orchestration.shard_cpus": 0.6}


@pytest.mark.e2e
def test_a_verify_shard_starts_before_the_last_dialogues_shard_finishes(prefect_api: str, ray_cluster: None, tmp_path: Path) -> None:
    root = tmp_path / "data"
    summary = _run(small_run_overrides(root, **FOUR_SHARDS))
    assert summary["status"] == "completed"
    dialogues, verify = _shards(root, summary["run_id"], "dialogues"), _shards(root, summary["run_id"], "verify")
    assert len(dialogues) == len(verify) == 4
    for index, (_, started, _, _) in verify.items():
        assert started >= dialogues[index][2]  # after its own input committed
    # With a stage barrier, no verify shard could start before every dialogues shard finished.
    assert min(started for _, started, _, _ in verify.values()) < max(finished for _, _, finished, _ in dialogues.values())


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


def test_a_flow_that_fails_before_its_shards_settle_fails_the_group() -> None:
    from flows.overlap import Group, StageWork, run_group

    def flow(item: StageWork) -> None:
        raise RuntimeError(f"{item.stage}: the Prefect API is gone")

    running = run_group([StageWork("verify", [])], Group(lambda: None, None), flow)
    with pytest.raises(RuntimeError, match="verify: the Prefect API is gone"):
        running.settled()
