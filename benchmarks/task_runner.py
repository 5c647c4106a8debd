"""Prefect's cost of a task run in a Ray worker: prefect-ray's task runner against the stage flow's.

    python -m benchmarks.task_runner [--tasks 40] [--rounds 3] [--out PATH]

Starts a temporary Prefect server the way a run does (:func:`flows.runtime.prefect_api`) and a local
Ray with two CPUs, then runs one flow of ``--tasks`` tasks that return at once, with prefect-ray's
``RayTaskRunner`` ("prefect-ray") and with :class:`flows.task_runner.KeptContextRayTaskRunner`
("kept context"), alternating, ``--rounds`` times each after one warm-up flow each (the machine is
shared and noisy). A task does no work of its own: what is measured is what Prefect does around it.

Reported per task: the Ray workers' CPU (every process Ray names ``ray::…``), the Prefect server's
CPU (until it is idle again), and the flow's wall time; medians over the rounds, and their ratios.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks._common import RESULTS_DIR, machine_info, median, table, write_json
from benchmarks.quickstart import cpu_seconds_proc, descendants_proc


def ray_workers_cpu() -> float:
    """CPU seconds so far of this machine's Ray worker processes."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if command.startswith(b"ray::") or b"default_worker.py" in command:
            total += cpu_seconds_proc(int(entry.name)) or 0.0
    return total


def _settled(cpu: Callable[[], float], timeout_s: float = 30.0) -> float:
    """`cpu()` once it has stopped growing for half a second."""
    last, deadline = cpu(), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = cpu()
        if now - last < 0.02:
            return now
        last = now
    return last


def measure(tasks: int, rounds: int) -> dict[str, Any]:
    import ray
    from prefect import flow, task
    from prefect_ray import RayTaskRunner

    from flows.runtime import prefect_api
    from flows.task_runner import KeptContextRayTaskRunner

    @task(name="nothing", persist_result=False)
    def nothing(index: int) -> int:
        return index

    def flow_with(runner: Any) -> Callable[[int], int]:
        @flow(name="tasks", task_runner=runner)
        def tasks_flow(count: int) -> int:
            return sum(future.result() for future in [nothing.submit(i) for i in range(count)])
        return tasks_flow

    flows = {"prefect-ray": flow_with(RayTaskRunner()), "kept context": flow_with(KeptContextRayTaskRunner())}
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in flows}
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    with prefect_api() as url:
        server = descendants_proc({os.getpid()}) - {os.getpid()}

        def server_cpu() -> float:
            return sum(cpu_seconds_proc(pid) or 0.0 for pid in server)

        # As flows.runtime.ray_session starts a local Ray: its workers inherit the driver's API.
        os.environ["PREFECT_API_URL"] = url
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            for run in flows.values():
                run(4)  # workers started and their imports done
            for _ in range(rounds):
                for name, run in flows.items():
                    workers, server_before = _settled(ray_workers_cpu), _settled(server_cpu)
                    started = time.perf_counter()
                    assert run(tasks) == sum(range(tasks))
                    wall = time.perf_counter() - started
                    figures[name].append({
                        "workers_ms": 1000 * (_settled(ray_workers_cpu) - workers) / tasks,
                        "server_ms": 1000 * (_settled(server_cpu) - server_before) / tasks,
                        "wall_ms": 1000 * wall / tasks,
                    })
        finally:
            ray.shutdown()
    medians = {name: {key: median([r[key] for r in runs]) for key in runs[0]} for name, runs in figures.items()}
    return {"tasks": tasks, "rounds": rounds, "runs": figures, "medians": medians,
            "ratios": {key: medians["kept context"][key] / medians["prefect-ray"][key] for key in medians["prefect-ray"]}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "task_runner.json")
    args = parser.parse_args(argv)
    result = measure(args.tasks, args.rounds)
    rows = [[name, f"{m['workers_ms']:.1f}", f"{m['server_ms']:.1f}", f"{m['wall_ms']:.1f}"]
            for name, m in result["medians"].items()]
    rows.append(["kept / prefect-ray", *(f"{result['ratios'][k]:.2f}" for k in ("workers_ms", "server_ms", "wall_ms"))])
    print(table(["task runner", "Ray workers CPU ms/task", "server CPU ms/task", "wall ms/task"], rows))
    write_json(args.out, {"machine": machine_info(), **result})
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
