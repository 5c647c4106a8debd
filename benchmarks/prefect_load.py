"""The Prefect server under a night's task runs: does it keep up, and does it slow as it fills?

    python -m benchmarks.prefect_load [--task-runs 3100] [--stages 9] [--concurrency 32] [--out PATH]

The plan in benchmarks/README.md has about 3,100 shard task runs a night (515 shards in each of 6
stages, plus the fan-in stages). This starts a temporary Prefect server the way a run does
(:func:`flows.runtime.prefect_api`: SQLite, here in a fresh ``PREFECT_HOME``; with ``--database-url``,
on the Postgres database a production server uses, see docker-compose.yml) and runs one flow with
a sub-flow per stage, each with its share of ``--task-runs`` tasks named like shards, on a thread
pool of ``--concurrency``. A task only sleeps 20 ms: what is measured is the server's side of a task
run (its creation and state changes, its logs and events), without Ray or an LLM. Every stage runs
in turn, so the first and the last stage run against an empty and a full database.

Reported: wall, task runs/s, the task runs its database holds as completed once the client's
events are delivered, the server's CPU per task run (until it is idle again) and peak RSS (from
``/proc``), the size of its database, and the task runs/s of the first and of the last stage, with
their ratio (below 1: the server slows down as it fills).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json
from benchmarks.quickstart import cpu_seconds_proc, descendants_proc

TASK_SLEEP_S = 0.02


def _cpu_and_peak(pids: set[int]) -> tuple[float, int]:
    """CPU seconds (user + system) and the largest peak RSS (VmHWM, bytes) of live `pids`."""
    cpu, peak = 0.0, 0
    for pid in pids:
        try:
            hwm = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmHWM:"))
        except (OSError, StopIteration):
            continue
        cpu += cpu_seconds_proc(pid) or 0.0
        peak = max(peak, int(hwm.split()[1]) * 1024)
    return cpu, peak


def _idle(pids: set[int], timeout_s: float = 120.0) -> tuple[float, int]:
    """CPU and peak RSS of `pids` once their CPU has stopped growing for a second."""
    last, deadline = _cpu_and_peak(pids), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = _cpu_and_peak(pids)
        if now[0] - last[0] < 0.05:
            return now
        last = now
    return last


COMPLETED = "SELECT count(*) FROM task_run WHERE state_type = 'COMPLETED' AND name LIKE 'stage-%/part-%'"


def _database_figures(database_url: str | None) -> tuple[int, int]:
    """The completed shard task runs the server's database holds, and its size in bytes."""
    if database_url is None:  # the default: SQLite in PREFECT_HOME
        path = Path(os.environ["PREFECT_HOME"]) / "prefect.db"
        with sqlite3.connect(path) as db:
            return int(db.execute(COMPLETED).fetchone()[0]), path.stat().st_size
    import asyncio

    import asyncpg

    async def query() -> tuple[int, int]:
        connection = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            return (int(await connection.fetchval(COMPLETED)),
                    int(await connection.fetchval("SELECT pg_database_size(current_database())")))
        finally:
            await connection.close()

    return asyncio.run(query())


def measure(task_runs: int, stages: int, concurrency: int, database_url: str | None) -> dict[str, Any]:
    from prefect import flow, task
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.task_runners import ThreadPoolTaskRunner

    from flows.runtime import prefect_api

    per_stage = max(1, task_runs // stages)

    @task(name="shard", task_run_name="{stage}/part-{index:05d}", persist_result=False)
    def shard(stage: str, index: int) -> int:
        time.sleep(TASK_SLEEP_S)
        return index

    @flow(name="stage")
    def stage_flow(stage: str) -> float:
        started = time.perf_counter()
        futures = [shard.submit(stage, index) for index in range(per_stage)]
        assert sorted(future.result() for future in futures) == list(range(per_stage))
        return time.perf_counter() - started

    @flow(name="generate")
    def run() -> list[float]:
        return [stage_flow.with_options(flow_run_name=f"load/stage-{k}", task_runner=ThreadPoolTaskRunner(max_workers=concurrency))(f"stage-{k}")
                for k in range(stages)]

    with prefect_api() as url:
        server = descendants_proc({os.getpid()}) - {os.getpid()}
        cpu_before, _ = _cpu_and_peak(server)
        started = time.perf_counter()
        seconds = run()
        wall = time.perf_counter() - started
        # The task runs' states reach the server as events: deliver them, and let it record them.
        EventsWorker.drain_all(timeout=120)
        APILogWorker.drain_all(timeout=120)
        cpu_after, peak = _idle(server)
    recorded, size = _database_figures(database_url)
    first, last = per_stage / seconds[0], per_stage / seconds[-1]
    return {
        "api": url, "database": "postgresql" if database_url else "sqlite", "task_runs": per_stage * stages, "stages": stages, "concurrency": concurrency,
        "wall_s": round(wall, 1), "task_runs_per_s": round(per_stage * stages / wall, 1),
        "server_cpu_ms_per_task_run": round(1000 * (cpu_after - cpu_before) / (per_stage * stages), 1),
        "completed_in_database": recorded,
        "server_peak_rss_mb": round(peak / 2**20), "database_mb": round(size / 2**20, 1),
        "first_stage_task_runs_per_s": round(first, 1), "last_stage_task_runs_per_s": round(last, 1),
        "last_over_first": round(last / first, 2),
    }


def report(results: dict[str, Any]) -> str:
    r = results["result"]
    head = ["task runs", "completed in its DB", "stages", "concurrency", "wall s", "task runs/s", "server CPU ms / task run",
            "server peak RSS MB", "database MB", "first stage /s", "last stage /s", "last / first"]
    row = [r["task_runs"], r["completed_in_database"], r["stages"], r["concurrency"], r["wall_s"], r["task_runs_per_s"],
           r["server_cpu_ms_per_task_run"],
           r["server_peak_rss_mb"], r["database_mb"], r["first_stage_task_runs_per_s"], r["last_stage_task_runs_per_s"],
           r["last_over_first"]]
    return "\n".join([f"prefect_load: a Prefect server on {r['database']}, {results['machine']['nproc']} CPUs, "
                      f"load {results['loadavg_start']}", "", table(head, [row])])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.prefect_load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--task-runs", type=int, default=3100)
    parser.add_argument("--stages", type=int, default=9)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--database-url", help="the server's database, e.g. postgresql+asyncpg://prefect@host:5432/prefect "
                                                "(an empty one: the database of a production server; default: SQLite, as a run's "
                                                "temporary server)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "prefect_load.json"))
    args = parser.parse_args(argv)
    if args.database_url:
        os.environ["PREFECT_API_DATABASE_CONNECTION_URL"] = args.database_url
    os.environ.pop("PREFECT_API_URL", None)  # a temporary server of its own, with its own database
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")  # the runs' logs still go to the API
    with tempfile.TemporaryDirectory(prefix="toolfactory-bench-prefect-") as home:
        os.environ["PREFECT_HOME"] = home
        loadavg = list(os.getloadavg())
        result = measure(args.task_runs, args.stages, args.concurrency, args.database_url)
    results = {"machine": machine_info(), "loadavg_start": [round(x, 2) for x in loadavg], "result": result}
    print(report(results))
    print(f"\nwrote {write_json(args.out, results)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
