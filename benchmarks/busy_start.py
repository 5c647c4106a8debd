"""The quickstart beside a CPU load: how often it completes, and in what wall time.

    python -m benchmarks.busy_start [--loads 0,8,16] [--tries 10] [--source DIR] [--timeout 1800] [--out PATH]

For each load, `load` busy processes (`while True: pass`, normal priority) run beside the run:
on 2 cores, 8 of them keep a load average near 8 plus the run's own processes. Each try is
`toolfactory run --config configs/quickstart.yaml` into an empty root, with its own temporary
Prefect API, local Ray and simulator, as `make demo` runs it. A try succeeds when it exits 0; a
failure is counted with the first `error:` line it printed. Tries of different loads are
interleaved (0, 8, 16, 0, 8, 16, …), since the machine's own background changes over the hour.

`--source DIR` runs the code of another checkout (say, a `git worktree` of an older commit) with
this venv: its folder goes first on PYTHONPATH, so its `toolfactory`, `flows` and `tasks` are the
ones imported, by the driver and the processes it starts alike.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, machine_info, median, table, write_json

REPO = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 1800


def _env(source: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("TOOLFACTORY_", "PREFECT_API_URL", "RAY_ADDRESS", "PREFECT_SERVER_EPHEMERAL"))}
    if source != REPO:
        env["PYTHONPATH"] = str(source) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def one_try(source: Path, load: int, timeout_s: float) -> dict[str, Any]:
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
    try:
        with tempfile.TemporaryDirectory(prefix="tf-busy-") as folder:
            started = time.monotonic()
            try:
                done = subprocess.run(
                    [sys.executable, "-m", "toolfactory.cli", "run", "--config", str(source / "configs" / "quickstart.yaml"),
                     "--set", f"storage.root={folder}/data", "--set", f"stats.path={folder}/stats.duckdb"],
                    cwd=folder, env=_env(source), capture_output=True, text=True, timeout=timeout_s)
                code, err = done.returncode, done.stderr
            except subprocess.TimeoutExpired:
                code, err = -1, f"error: no end after {timeout_s:g} s (stopped by the benchmark)"
            wall = time.monotonic() - started
            load_avg = os.getloadavg()[0]
    finally:
        for process in busy:
            process.kill()
            process.wait()
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    why = errors[0][:160] if errors else ("" if code == 0 else err.strip().splitlines()[-1][:160] if err.strip() else "")
    return {"load": load, "exit": code, "wall_s": round(wall, 1), "load_avg_1m": round(load_avg, 1), "error": why}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loads", default="0,8,16")
    parser.add_argument("--tries", type=int, default=10)
    parser.add_argument("--source", type=Path, default=REPO)
    parser.add_argument("--timeout", type=float, default=RUN_TIMEOUT_S, help="a try still running then is stopped and counted as failed")
    parser.add_argument("--out", default=str(RESULTS_DIR / "busy_start.json"))
    args = parser.parse_args()
    loads = [int(value) for value in args.loads.split(",")]
    source = args.source.resolve()
    tries: list[dict[str, Any]] = []
    for round_ in range(args.tries):
        for load in loads:
            result = one_try(source, load, args.timeout)
            tries.append(result)
            print(f"round {round_ + 1}, load {load}: exit {result['exit']} in {result['wall_s']} s "
                  f"(load average {result['load_avg_1m']}) {result['error']}", flush=True)
    rows = []
    for load in loads:
        mine = [t for t in tries if t["load"] == load]
        ok = [t["wall_s"] for t in mine if t["exit"] == 0]
        rows.append([load, f"{len(ok)}/{len(mine)}", median(ok) if ok else "-", max(ok) if ok else "-",
                     "; ".join(sorted({t["error"][:80] for t in mine if t["exit"] != 0})) or "-"])
    print(table(["busy processes", "completed", "median wall (s)", "max wall (s)", "failures"], rows))
    write_json(args.out, {"machine": machine_info(), "source": str(source), "tries": tries})


if __name__ == "__main__":
    main()
