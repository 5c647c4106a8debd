"""A large run on this machine: the figures a cluster for a night is planned from.

    python -m benchmarks.scale [--synthesis 300] [--instructions-per-tool 43] [--latencies 0,1000] [--set section.field=value …] [--out PATH]

For each simulator latency (jitter 0), one ``toolfactory run`` of the embedded defaults with a
larger pool and more instructions per tool: ``tools.synthesis.count`` new APIs beside the 36
catalog tools and 8 documented introductions, and ``tasks.instructions_per_tool``. The defaults
(300 and 43) make about 10,000 tasks. It runs into a fresh storage root, as a user runs it
(Prefect temporary server, local Ray). Every process of the run's tree is sampled from ``/proc``
every second:

* **CPU** per kind of process (the driver, Ray's shard workers, Ray's own daemons, the Prefect
  server, the simulator), from each process's last-seen user + system time; divided by the
  dataset's records it is the CPU a kept dialogue costs, which sizes the workers of a cluster.
  The simulator's share is the endpoint's, not ours, and is listed apart.
* **peak RSS per process** (the largest process of each kind), which sizes a worker's memory.

From the run's DuckDB: LLM calls (endpoint) and cache hits, per stage and per recipe per kept
dialogue, tokens, the span of the shards and its longest chain (:mod:`benchmarks.overlap`);
sizes on disk of the DuckDB file, the run's folder, the LLM cache and the pool.

The simulator's tokens are counted by its own rule (words), not a real tokenizer, and its
answers are not real training data: the token figures size an endpoint only roughly.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json
from benchmarks.overlap import shard_figures
from benchmarks.quickstart import cpu_seconds_proc, descendants_proc, sampled_run, toolfactory_script

SAMPLE_INTERVAL_S = 1.0
RUN_TIMEOUT_S = 4 * 3600
PAGE = os.sysconf("SC_PAGE_SIZE")

# (kind, substring of the command line), first match wins; anything else is "other".
KINDS = (
    ("simulator", "toolfactory.simulator"),
    ("prefect server", "prefect"),
    ("ray shard worker", "ray::"),  # a worker's title once it runs (setproctitle)
    ("ray shard worker", "default_worker.py"),
    ("ray daemons", "ray/"),
    ("ray daemons", "raylet"),
    ("ray daemons", "gcs_server"),
)


def _kind(cmdline: str, pid: int, root: int) -> str:
    if pid == root:
        return "driver"
    for kind, needle in KINDS:
        if needle in cmdline:
            return kind
    return "other"


class ProcessSampler(threading.Thread):
    """Per-process CPU and RSS of `root` and every process that descends from it."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.stop_event = threading.Event()
        self.known: set[int] = {root}
        self.kinds: dict[int, str] = {}
        self.cpu_s: dict[int, float] = {}
        self.peak_rss: dict[int, int] = {}
        self.peak_tree_rss = 0

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.sample()
            self.stop_event.wait(SAMPLE_INTERVAL_S)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=10)

    def sample(self) -> None:
        pids = descendants_proc(self.known)
        self.known = pids | {self.root}
        total = 0
        for pid in pids:
            try:
                rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
                if pid not in self.kinds:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    self.kinds[pid] = _kind(cmdline, pid, self.root)
            except (OSError, IndexError, ValueError):
                continue
            cpu = cpu_seconds_proc(pid)
            if cpu is None:
                continue
            self.cpu_s[pid] = cpu
            self.peak_rss[pid] = max(self.peak_rss.get(pid, 0), rss)
            total += rss
        self.peak_tree_rss = max(self.peak_tree_rss, total)

    def by_kind(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for pid, kind in self.kinds.items():
            entry = out.setdefault(kind, {"processes": 0, "cpu_s": 0.0, "peak_rss_mb_largest": 0.0})
            entry["processes"] += 1
            entry["cpu_s"] = round(entry["cpu_s"] + self.cpu_s.get(pid, 0.0), 1)
            entry["peak_rss_mb_largest"] = max(entry["peak_rss_mb_largest"], round(self.peak_rss.get(pid, 0) / 2**20, 1))
        return out


def _size_mb(path: Path) -> float:
    if path.is_file():
        return round(path.stat().st_size / 2**20, 2)
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 2) if path.exists() else 0.0


def run_once(latency_ms: float, synthesis: int, instructions_per_tool: int, workdir: Path,
             overrides: tuple[str, ...]) -> dict[str, Any]:
    root = workdir / f"data-{int(latency_ms)}ms"
    command = [toolfactory_script(), "run", "--set", f"storage.root={root}",
               "--set", f"tools.synthesis.count={synthesis}", "--set", f"tasks.instructions_per_tool={instructions_per_tool}",
               "--set", f"llm.simulator.latency_ms={latency_ms}", "--set", "llm.simulator.latency_jitter_ms=0"]
    for override in overrides:
        command += ["--set", override]
    label = f"{latency_ms:g} ms"
    log_file = workdir / f"run-{int(latency_ms)}ms.log"
    print(f"{label}: {' '.join(command)}", file=sys.stderr, flush=True)
    returncode, wall, sampler = sampled_run(command, log_file, workdir, ProcessSampler, RUN_TIMEOUT_S)
    output = log_file.read_text(errors="replace")
    match = re.search(r"^run (\S+): storage", output, re.MULTILINE)
    if returncode != 0 or match is None:
        print(output[-4000:], file=sys.stderr)
        raise SystemExit(f"{label}: toolfactory run exited with {returncode} (log: {log_file})")
    run_id = match.group(1)
    stats = json.loads(subprocess.run(
        [toolfactory_script(), "stats", run_id, "--json", "--set", f"storage.root={root}"],
        check=True, capture_output=True, text=True, cwd=workdir).stdout)
    return summarise(label, latency_ms, wall, stats, sampler, root, run_id)


def summarise(label: str, latency_ms: float, wall: float, stats: dict[str, Any], sampler: ProcessSampler,
              root: Path, run_id: str) -> dict[str, Any]:
    stages = {s["stage"]: s for s in stats["stages"]}
    kept = stats["per_accepted"]["accepted"]
    calls = sum(s["llm_calls"] for s in stats["stages"])
    tokens = sum(s["prompt_tokens"] + s["completion_tokens"] for s in stats["stages"])
    kinds = sampler.by_kind()
    ours = sum(k["cpu_s"] for name, k in kinds.items() if name != "simulator")
    shards = shard_figures(root / "stats.duckdb", run_id)
    return {
        "label": label,
        "latency_ms": latency_ms,
        "run_id": run_id,
        "status": stats["status"],
        "wall_s": round(wall, 1),
        "span_s": shards["span_s"],
        "span_per_chain": shards["span_per_chain"],
        "bound_per_chain": shards["bound_per_chain"],
        "tasks": stages.get("tasks", {}).get("items_out", 0),
        "dialogues": stages.get("dialogues", {}).get("items_out", 0),
        "verified": stages.get("verify", {}).get("items_out", 0),
        "kept": kept,
        "llm_calls": calls,
        "cache_hits": sum(s["cache_hits"] for s in stats["stages"]),
        "tokens": tokens,
        "prompt_tokens": sum(s["prompt_tokens"] for s in stats["stages"]),
        "llm_calls_per_s_span": round(calls / shards["span_s"], 1) if shards["span_s"] else None,
        "per_accepted": stats["per_accepted"],
        "cpu_s_ours": round(ours, 1),
        "cpu_ms_per_kept": round(1000 * ours / kept, 1) if kept else None,
        "cpu_ms_per_call": round(1000 * ours / calls, 2) if calls else None,
        "processes": kinds,
        "peak_tree_rss_mb": round(sampler.peak_tree_rss / 2**20, 1),
        "sizes_mb": {
            "duckdb": _size_mb(root / "stats.duckdb"),
            "run": _size_mb(root / "runs" / run_id),
            "llm_cache": _size_mb(root / "llm-cache"),
            "pool": _size_mb(root / "pool"),
        },
        "stages": [{k: s.get(k) for k in ("stage", "shards_total", "items_in", "items_out", "llm_calls", "cache_hits", "wall_s")}
                   for s in stats["stages"]],
    }


def report(results: dict[str, Any]) -> str:
    runs = results["runs"]
    head = ["latency", "wall s", "span s", "span/chain", "best", "tasks", "dialogues", "verified", "kept", "llm calls",
            "calls/kept", "calls/s", "CPU s (ours)", "CPU ms/kept", "CPU ms/call", "tree RSS MB"]
    rows = [[r["label"], r["wall_s"], r["span_s"], r["span_per_chain"], r["bound_per_chain"], r["tasks"], r["dialogues"],
             r["verified"], r["kept"], r["llm_calls"], r["per_accepted"]["llm_calls"], r["llm_calls_per_s_span"],
             r["cpu_s_ours"], r["cpu_ms_per_kept"], r["cpu_ms_per_call"], r["peak_tree_rss_mb"]] for r in runs]
    lines = [f"scale benchmark ({results['machine']['nproc']} CPUs, load at start {results['loadavg_start']})", "",
             table(head, rows), ""]
    for r in runs:
        lines.append(f"{r['label']}: processes (count, CPU s, largest peak RSS MB)")
        lines.append(table(["kind", "processes", "CPU s", "peak RSS MB"],
                           [[k, v["processes"], v["cpu_s"], v["peak_rss_mb_largest"]] for k, v in sorted(r["processes"].items())]))
        lines.append(table(["stage", "shards", "in", "out", "llm calls", "per kept", "shard wall s (sum)"],
                           [[s["stage"], s["shards_total"], s["items_in"], s["items_out"], s["llm_calls"],
                             r["per_accepted"]["by_stage"].get(s["stage"], {}).get("llm_calls"), s["wall_s"]]
                            for s in r["stages"]]))
        lines.append("per recipe: " + ", ".join(f"{name} {v['accepted']} kept, {v['llm_calls_per_accepted']} calls each"
                                                 for name, v in r["per_accepted"]["by_recipe"].items()))
        lines.append("sizes MB: " + ", ".join(f"{k} {v}" for k, v in r["sizes_mb"].items()))
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--synthesis", type=int, default=300, help="tools.synthesis.count: new APIs in the pool")
    parser.add_argument("--instructions-per-tool", type=int, default=43)
    parser.add_argument("--latencies", default="0,1000", help="simulator latencies in ms, one run each")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE")
    parser.add_argument("--out", default=str(RESULTS_DIR / "scale.json"))
    parser.add_argument("--keep", action="store_true", help="keep the storage roots and logs")
    args = parser.parse_args(argv)

    load_start = [round(x, 2) for x in os.getloadavg()]
    workdir = Path(tempfile.mkdtemp(prefix="toolfactory-bench-scale-"))
    runs = []
    try:
        for latency in (float(x) for x in args.latencies.split(",")):
            runs.append(run_once(latency, args.synthesis, args.instructions_per_tool, workdir, tuple(args.overrides)))
    finally:
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    results = {"benchmark": "scale", "machine": machine_info(), "loadavg_start": load_start,
               "synthesis": args.synthesis, "instructions_per_tool": args.instructions_per_tool, "overrides": args.overrides, "runs": runs}
    print(report(results))
    print(f"wrote {write_json(args.out, results)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
