"""The end-to-end quickstart, run as a user runs it, twice into one storage root.

    python -m benchmarks.quickstart [--out PATH] [--keep]

Run 1 is ``toolfactory run --set storage.root=<tmpdir>`` (the embedded quickstart defaults:
Prefect temporary server, local Ray, the offline simulator) into an empty root; run 2 is a new
run into the SAME root, so it re-uses the LLM cache run 1 filled. Each run's figures come from
``toolfactory stats RUN_ID --json``.

Memory: ``/usr/bin/time -v`` gives the peak RSS of the largest single process it waited for
(the driver, in practice); Ray workers, raylet/GCS, the Prefect server and the simulator are
separate processes, so the whole process tree is also sampled every 0.5 s (psutil if installed,
else /proc) and its peak summed RSS and PSS are reported. Summed RSS counts shared pages (Ray's
object store, shared libraries) once per process and so over-states; PSS splits them fairly.
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
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json

SAMPLE_INTERVAL_S = 0.5
RUN_TIMEOUT_S = 600


def toolfactory_script() -> str:
    script = Path(sys.executable).with_name("toolfactory")
    if script.exists():
        return str(script)
    found = shutil.which("toolfactory")
    if found is None:
        raise SystemExit("the `toolfactory` command is not installed next to this Python (run `make setup`)")
    return found


# --- process tree memory ----------------------------------------------------------------------


def _children_map_proc() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def descendants_proc(known: set[int]) -> set[int]:
    """The live processes of `known` and every process that descends from them, from /proc."""
    children = _children_map_proc()
    seen: set[int] = set()
    stack = [pid for pid in known if Path(f"/proc/{pid}").exists()]
    while stack:
        pid = stack.pop()
        if pid not in seen:
            seen.add(pid)
            stack.extend(children.get(pid, ()))
    return seen


def cpu_seconds_proc(pid: int) -> float | None:
    """User + system CPU seconds of one process so far, from /proc; None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    except (OSError, IndexError, ValueError):
        return None


def _memory_proc(pid: int) -> tuple[int, int] | None:
    """(rss, pss) in bytes of one process, from /proc; PSS 0 if smaps_rollup is unreadable."""
    try:
        rss_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    rss = rss_pages * os.sysconf("SC_PAGE_SIZE")
    pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError):
        pass
    return rss, pss


class TreeSampler(threading.Thread):
    """Sums the memory of `root` and all its descendants every `interval` seconds.

    A process once seen stays counted while alive even if it is re-parented (daemonised Ray
    helpers are), so the tree does not lose members that detach from it.
    """

    def __init__(self, root: int, interval: float = SAMPLE_INTERVAL_S) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.interval = interval
        self.stop_event = threading.Event()
        self.known: set[int] = {root}
        self.samples = 0
        self.peak_rss = 0
        self.peak_pss = 0
        self.peak_processes = 0
        self.peak_at_s = 0.0
        self.method = "proc"
        self._t0 = time.perf_counter()
        try:
            import psutil  # type: ignore[import-not-found]

            self._psutil: Any = psutil
            self.method = "psutil"
        except ImportError:
            self._psutil = None

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.sample()
            self.stop_event.wait(self.interval)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=5)

    def _tree(self) -> set[int]:
        if self._psutil is not None:
            pids = set()
            for pid in list(self.known):
                try:
                    proc = self._psutil.Process(pid)
                    pids.add(pid)
                    pids.update(c.pid for c in proc.children(recursive=True))
                except self._psutil.Error:
                    continue
            return pids
        return descendants_proc(self.known)

    def _memory(self, pid: int) -> tuple[int, int] | None:
        if self._psutil is None:
            return _memory_proc(pid)
        try:
            proc = self._psutil.Process(pid)
            try:
                full = proc.memory_full_info()
                return full.rss, getattr(full, "pss", 0)
            except self._psutil.AccessDenied:
                return proc.memory_info().rss, 0
        except self._psutil.Error:
            return None

    def sample(self) -> None:
        pids = self._tree()
        self.known = pids | {self.root}
        rss = pss = count = 0
        for pid in pids:
            memory = self._memory(pid)
            if memory is None:
                continue
            rss += memory[0]
            pss += memory[1]
            count += 1
        self.samples += 1
        if rss > self.peak_rss:
            self.peak_rss, self.peak_at_s = rss, time.perf_counter() - self._t0
        self.peak_pss = max(self.peak_pss, pss)
        self.peak_processes = max(self.peak_processes, count)


# --- one run ---------------------------------------------------------------------------------


def _parse_time_v(text: str) -> dict[str, Any]:
    fields = {
        "Maximum resident set size (kbytes)": "max_rss_kb",
        "Elapsed (wall clock) time (h:mm:ss or m:ss)": "elapsed",
        "User time (seconds)": "user_s",
        "System time (seconds)": "system_s",
        "Percent of CPU this job got": "cpu_percent",
    }
    out: dict[str, Any] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().rpartition(": ")
        if sep and key in fields:
            out[fields[key]] = value.strip()
    if "max_rss_kb" in out:
        out["max_rss_kb"] = int(out["max_rss_kb"])
    for key in ("user_s", "system_s"):
        if key in out:
            out[key] = float(out[key])
    return out


_PREFECT_LINE = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3}) \| \w+\s*\| (.*)$")
_RAY_STARTED = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\s+INFO .*Started a local Ray instance")


def phases(log: str, started: datetime, wall_s: float) -> list[dict[str, Any]]:
    """Where the wall time went, from the timestamps of the run's log (local clock)."""
    events: list[tuple[float, str]] = []

    def offset(clock: datetime) -> float:
        delta = (clock - started).total_seconds()
        return delta + 86400 if delta < -3600 else delta  # a run across midnight

    for line in log.splitlines():
        if m := _RAY_STARTED.match(line):
            events.append((offset(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")), "ray started"))
            continue
        m = _PREFECT_LINE.match(line)
        if not m:
            continue
        clock = datetime.combine(started.date(), datetime.strptime(m.group(1), "%H:%M:%S.%f").time())
        text = m.group(2)
        if "Starting temporary server" in text:
            events.append((offset(clock), "prefect server starting"))
        elif sub := re.match(r"Flow run '[^']*/(\w+)' - (Beginning|Finished)", text):
            events.append((offset(clock), f"stage {sub.group(1)} {sub.group(2).lower()}"))
        elif re.match(r"Flow run 'generate-[^']*' - Beginning flow run", text):
            events.append((offset(clock), "flow begins"))
        elif re.match(r"Flow run 'generate-[^']*' - Finished", text):
            events.append((offset(clock), "flow finished"))
        elif "Stopping temporary server" in text:
            events.append((offset(clock), "prefect server stopping"))
    events.sort()
    out, previous, name = [], 0.0, "process start"
    for at, event in events + [(wall_s, "process exit")]:
        out.append({"from": name, "to": event, "seconds": round(at - previous, 2)})
        previous, name = at, event
    return out


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-").lower()


def sampled_run(command: list[str], log_file: Path, workdir: Path, sampler_class: Any,
                timeout: float) -> tuple[int, float, Any]:
    """Run `command` (output to `log_file`) with a sampler thread watching its process tree;
    (exit code, -9 if killed at `timeout`; wall seconds; the stopped sampler)."""
    with open(log_file, "wb") as log:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
        sampler = sampler_class(process.pid)
        sampler.start()
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            returncode = -9
        wall = time.perf_counter() - started
        sampler.stop()
    return returncode, wall, sampler


def run_once(label: str, root: Path, workdir: Path) -> dict[str, Any]:
    tf = toolfactory_script()
    command = [tf, "run", "--set", f"storage.root={root}"]
    time_bin = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)
    time_file = workdir / f"time-{_slug(label)}.txt"
    if time_bin:
        command = [time_bin, "-v", "-o", str(time_file), *command]
    log_file = workdir / f"run-{_slug(label)}.log"
    print(f"{label}: {' '.join(command)}", file=sys.stderr, flush=True)
    started_clock = datetime.now()
    returncode, wall, sampler = sampled_run(command, log_file, workdir, TreeSampler, RUN_TIMEOUT_S)
    output = log_file.read_text(errors="replace")
    if returncode != 0:
        print(output[-4000:], file=sys.stderr)
        raise SystemExit(f"{label}: toolfactory run exited with {returncode} (log: {log_file})")
    match = re.search(r"^run (\S+): storage", output, re.MULTILINE)
    run_id = match.group(1) if match else None
    stats_cmd = [tf, "stats", *([run_id] if run_id else []), "--json", "--set", f"storage.root={root}"]
    stats = json.loads(subprocess.run(stats_cmd, check=True, capture_output=True, text=True, cwd=workdir).stdout)
    timing = _parse_time_v(time_file.read_text()) if time_bin and time_file.exists() else {}
    summary = summarise(label, wall, stats, timing, sampler)
    summary["phases"] = phases(output, started_clock, wall)
    return summary


def summarise(label: str, wall: float, stats: dict[str, Any], timing: dict[str, Any], sampler: TreeSampler) -> dict[str, Any]:
    stages = {s["stage"]: s for s in stats["stages"]}
    dialogues = stages.get("dialogues", {}).get("items_out", 0)
    accepted = stages.get("verify", {}).get("items_out", 0)
    llm_calls = sum(s.get("llm_calls", 0) for s in stats["stages"])
    cache_hits = sum(s.get("cache_hits", 0) for s in stats["stages"])
    return {
        "label": label,
        "run_id": stats["run_id"],
        "status": stats.get("status"),
        "wall_s": round(wall, 2),
        "dialogues": dialogues,
        "dialogues_per_s": round(dialogues / wall, 3),
        "accepted": accepted,
        "accepted_per_s": round(accepted / wall, 3),
        "llm_calls": llm_calls,
        "cache_hits": cache_hits,
        "llm_requests": llm_calls + cache_hits,
        "llm_calls_per_accepted": round(llm_calls / accepted, 2) if accepted else None,
        "llm_requests_per_accepted": round((llm_calls + cache_hits) / accepted, 2) if accepted else None,
        "stage_wall_s_sum": round(sum(s.get("wall_s", 0.0) for s in stats["stages"]), 2),
        "driver_peak_rss_mb": round(timing["max_rss_kb"] / 1024, 1) if "max_rss_kb" in timing else None,
        "driver_time_v": timing,
        "tree_peak_rss_mb": round(sampler.peak_rss / 2**20, 1),
        "tree_peak_pss_mb": round(sampler.peak_pss / 2**20, 1) if sampler.peak_pss else None,
        "tree_peak_processes": sampler.peak_processes,
        "tree_peak_at_s": round(sampler.peak_at_s, 1),
        "tree_samples": sampler.samples,
        "tree_method": sampler.method,
        "stages": [
            {k: s.get(k) for k in ("stage", "shards_total", "shards_failed", "items_in", "items_out", "rejected",
                                     "pass_rate", "llm_calls", "cache_hits", "wall_s")}
            for s in stats["stages"]
        ],
    }


def report(results: dict[str, Any]) -> str:
    runs = results["runs"]
    rows = [
        [r["label"], r["wall_s"], r["dialogues"], r["dialogues_per_s"], r["accepted"], r["llm_calls"], r["cache_hits"],
         r["llm_calls_per_accepted"], r["llm_requests_per_accepted"], r["driver_peak_rss_mb"], r["tree_peak_rss_mb"],
         r["tree_peak_pss_mb"], r["tree_peak_processes"]]
        for r in runs
    ]
    lines = [
        f"quickstart benchmark ({results['machine']['nproc']} CPUs, Python {results['machine']['python']})",
        "",
        table(
            ["run", "wall s", "dialogues", "dlg/s", "accepted", "llm calls", "cache hits", "calls/acc",
             "requests/acc", "driver RSS MB", "tree RSS MB", "tree PSS MB", "procs"],
            rows,
        ),
        "",
    ]
    for r in runs:
        lines.append(f"{r['label']} ({r['run_id']}, {r['status']}) per stage:")
        lines.append(
            table(
                ["stage", "shards", "in", "out", "rejected", "llm calls", "cache hits", "shard wall s (sum)"],
                [[s["stage"], s["shards_total"], s["items_in"], s["items_out"], s["rejected"], s["llm_calls"],
                  s["cache_hits"], s["wall_s"]] for s in r["stages"]],
            )
        )
        lines.append("")
    lines.append("where the wall time goes (from the run logs' timestamps), seconds:")
    names = [f"{p['from']} -> {p['to']}" for p in runs[0]["phases"]]
    phase_rows = []
    for i, name in enumerate(names):
        row: list[Any] = [name]
        for r in runs:
            same = r["phases"][i] if i < len(r["phases"]) and f"{r['phases'][i]['from']} -> {r['phases'][i]['to']}" == name else None
            row.append(same["seconds"] if same else None)
        phase_rows.append(row)
    lines.append(table(["phase", *[r["label"] for r in runs]], phase_rows))
    lines.append("")
    c = results["cache"]
    lines.append(
        f"cache re-use: run 2 got {c['cache_hits']} cache hits and made {c['llm_calls']} endpoint calls "
        f"({c['hit_rate']:.1%} of its LLM requests answered from the cache); wall {c['wall_cold_s']} s -> "
        f"{c['wall_warm_s']} s: speed-up x{c['speedup']}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.quickstart", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(RESULTS_DIR / "quickstart.json"), help="JSON results file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary storage root and logs")
    args = parser.parse_args(argv)

    load_start = os.getloadavg()
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="toolfactory-bench-quickstart-"))
    root = workdir / "data"
    try:
        runs = [run_once("run 1 (cold cache)", root, workdir), run_once("run 2 (same root)", root, workdir)]
    finally:
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    cold, warm = runs
    requests = warm["llm_calls"] + warm["cache_hits"]
    results = {
        "benchmark": "quickstart",
        "machine": machine_info(),
        "loadavg_start": [round(x, 2) for x in load_start],
        "command": "toolfactory run --set storage.root=<tmpdir> (twice, same root)",
        "runs": runs,
        "cache": {
            "cache_hits": warm["cache_hits"],
            "llm_calls": warm["llm_calls"],
            "hit_rate": round(warm["cache_hits"] / requests, 4) if requests else 0.0,
            "wall_cold_s": cold["wall_s"],
            "wall_warm_s": warm["wall_s"],
            "speedup": round(cold["wall_s"] / warm["wall_s"], 2),
            "same_accepted": cold["accepted"] == warm["accepted"],
        },
        "total_s": round(time.perf_counter() - started, 1),
    }
    print(report(results))
    out = write_json(args.out, results)
    print(f"\nresults written to {out} (total {results['total_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
