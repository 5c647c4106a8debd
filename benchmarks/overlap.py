"""Stages that overlap: the quickstart run's wall time against its longest chain of shards.

    python -m benchmarks.overlap [--before PATH] [--rounds N] [--shard-cpus 1,0.25] [--set section.field=value …] [--out PATH]

Runs ``toolfactory run --config configs/quickstart.yaml`` (the offline simulator) into a fresh
storage root, with this checkout's code ("after") and, with ``--before``, with the code of another
checkout of the project (its own ``.venv``, e.g. the commit before stages overlapped): "before".
The rounds alternate (before, after, before, …) since the machine is shared and noisy. With
``--shard-cpus``, this checkout runs once per value of ``orchestration.shard_cpus`` (the Ray CPUs a
shard reserves) in each round, labelled ``after@<value>``.

From each run's DuckDB ``shards`` table (started_at, finished_at, wall_s of every shard):

* ``span``: first shard start to last shard finish (the run's work, without the start-up of
  Prefect, Ray and the simulator and the export after it, which overlap does not touch);
* ``chain``: the longest chain of shards, the least the span can be with unlimited workers: the
  slowest shard of each stage that stands alone plus, for tasks → dialogues → verify, the largest
  sum over i of the wall times of shards i (:func:`toolfactory.run.fan_in.chains`);
* ``span/chain``: the target is <= 1.2;
* ``work/slots``: every shard's wall time summed over the shards Ray runs at once (its CPUs over
  ``shard_cpus``): the least the span can be on this many workers, so on a small machine ``span/chain`` cannot go below ``work/slots / chain``;
* the same three for the chain group alone (first tasks start to last verify finish);
* ``wall``: the whole command, as a user waits for it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json
from toolfactory.run.fan_in import chains
from toolfactory.stages import STAGE_NAMES

REPO = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 900
TARGET = 1.2


def run_once(label: str, checkout: Path, workdir: Path, shard_cpus: float | None = None,
             overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    """One quickstart run with the code of `checkout` (and `shard_cpus`, when given); its figures."""
    root = workdir / f"data-{label}"
    command = [str(checkout / ".venv" / "bin" / "toolfactory"), "run", "--config", str(REPO / "configs" / "quickstart.yaml"),
               "--set", f"storage.root={root}"]
    if shard_cpus is not None:
        command += ["--set", f"orchestration.shard_cpus={shard_cpus}"]
    for override in overrides:  # e.g. llm.simulator.latency_ms=1000: shards that wait, not compute
        command += ["--set", override]
    print(f"{label}: {' '.join(command)}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{label}: toolfactory run exited with {done.returncode}\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    match = re.search(r"^run (\S+): storage", done.stdout, re.MULTILINE)
    if match is None:
        raise SystemExit(f"{label}: no run id in the output\n{done.stdout[-2000:]}")
    return {"label": label, "checkout": str(checkout), "wall_s": round(wall, 2),
            **shard_figures(root / "stats.duckdb", match.group(1), shard_cpus or 1.0)}


def shard_figures(stats_path: Path, run_id: str, shard_cpus: float = 1.0) -> dict[str, Any]:
    with duckdb.connect(str(stats_path), read_only=True) as con:
        rows = con.execute(
            "SELECT stage, shard, epoch(started_at), epoch(finished_at), wall_s FROM shards "
            "WHERE run_id = ? AND status = 'completed'", [run_id]).fetchall()
    shards: dict[str, dict[int, tuple[float, float, float]]] = {}
    for stage, index, start, finish, wall in rows:
        shards.setdefault(stage, {})[index] = (start, finish, wall)
    groups = [group for group in chains(STAGE_NAMES) if any(stage in shards for stage in group)]
    chain = sum(_longest(group, shards) for group in groups)
    slots = _ray_slots() / shard_cpus
    figures = _window([s for stage in shards.values() for s in stage.values()], chain, slots)
    figures["shards"] = {stage: len(parts) for stage, parts in shards.items()}
    overlapping = next((group for group in groups if len(group) > 1), None)
    if overlapping is not None:
        parts = [s for stage in overlapping for s in shards.get(stage, {}).values()]
        figures["group"] = {"stages": list(overlapping), **_window(parts, _longest(overlapping, shards), slots)}
    return figures


def _longest(group: tuple[str, ...], shards: dict[str, dict[int, tuple[float, float, float]]]) -> float:
    """The longest chain of shard wall times through a group: shard i of each stage in turn."""
    indices = {index for stage in group for index in shards.get(stage, {})}
    return max((sum(shards.get(stage, {}).get(i, (0, 0, 0.0))[2] for stage in group) for i in indices), default=0.0)


def _window(parts: list[tuple[float, float, float]], chain: float, slots: float) -> dict[str, Any]:
    span = max(p[1] for p in parts) - min(p[0] for p in parts)
    work = sum(p[2] for p in parts)
    return {
        "span_s": round(span, 2),
        "chain_s": round(chain, 2),
        "span_per_chain": round(span / chain, 2) if chain else None,
        "work_s": round(work, 2),
        "work_per_slot_s": round(work / slots, 2),
        "bound_per_chain": round(max(chain, work / slots) / chain, 2) if chain else None,
    }


def _ray_slots() -> int:
    """The CPUs a local Ray of the quickstart config offers (orchestration.ray_num_cpus: all)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def report(results: dict[str, Any]) -> str:
    head = ["run", "wall s", "span s", "chain s", "span/chain", "work/slots s", "best span/chain",
            "chain-group span s", "its chain s", "its span/chain"]
    rows = [[r["label"], r["wall_s"], r["span_s"], r["chain_s"], r["span_per_chain"], r["work_per_slot_s"], r["bound_per_chain"],
             r.get("group", {}).get("span_s"), r.get("group", {}).get("chain_s"), r.get("group", {}).get("span_per_chain")]
            for r in results["runs"]]
    lines = [f"overlap benchmark: quickstart config, {results['machine']['nproc']} CPUs, load {results['loadavg_start']} "
             f"(target span/chain <= {TARGET})", "", table(head, rows), ""]
    for label, figures in results["medians"].items():
        lines.append(f"{label}: median wall {figures['wall_s']} s, span {figures['span_s']} s, span/chain {figures['span_per_chain']}")
    series = list(results["medians"])
    base = results["medians"][series[0]]
    for label in series[1:]:  # each series against the first, run side by side
        other = results["medians"][label]
        lines.append(f"{label}/{series[0]}: wall x{other['wall_s'] / base['wall_s']:.2f}, span x{other['span_s'] / base['span_s']:.2f}")
    lines.append("best span/chain: what the Ray CPUs allow at best (work/slots over chain, or 1)")
    return "\n".join(lines)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else round((ordered[mid - 1] + ordered[mid]) / 2, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.overlap", description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="a checkout of the code to compare with (with its own .venv)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each code (alternating)")
    parser.add_argument("--shard-cpus", default=None, help="comma-separated orchestration.shard_cpus values for this checkout")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="a config override for every run")
    parser.add_argument("--out", default=str(RESULTS_DIR / "overlap.json"), help="JSON results file")
    args = parser.parse_args(argv)

    load = [round(x, 2) for x in os.getloadavg()]
    workdir = Path(tempfile.mkdtemp(prefix="toolfactory-bench-overlap-"))
    cpus: list[float | None] = [float(v) for v in args.shard_cpus.split(",")] if args.shard_cpus else [None]
    codes: list[tuple[str, Path, float | None]] = [("before", args.before.resolve(), None)] if args.before else []
    codes += [("after" if value is None else f"after@{value:g}", REPO, value) for value in cpus]
    runs: list[dict[str, Any]] = []
    try:
        for round_ in range(args.rounds):
            for label, checkout, value in codes:
                runs.append({**run_once(f"{label}-{round_ + 1}", checkout, workdir, value, tuple(args.overrides)),
                             "series": label, "round": round_ + 1})
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    medians = {
        label: {key: _median([r[key] for r in runs if r["series"] == label]) for key in ("wall_s", "span_s", "span_per_chain")}
        for label, _, _ in codes
    }
    results = {"benchmark": "overlap", "machine": machine_info(), "loadavg_start": load, "runs": runs, "medians": medians}
    print(report(results))
    out = write_json(args.out, results)
    print(f"\nwrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
