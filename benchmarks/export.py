"""Throughput and memory of the export formats, streamed shard by shard from a run's verify shards.

    python -m benchmarks.export [--small N] [--large N] [--shard-size S] [--large-formats F,F]
                                [--unique U] [--seed S] [--no-pin] [--out PATH]

1. Builds a workload once, in a temporary local store: U valid dialogues from the verifier's
   corpus (:func:`benchmarks.corpus.valid_dialogues`, over ten renamed copies of
   the seed catalog, with ``source_tools`` and models recorded as the dialogues stage records
   them), repeated with fresh ids into two runs of N records each (``--small``, ``--large``),
   written as verify shards of S records.
2. Exports each run in each format in a fresh process (spawned, pinned to one CPU unless
   ``--no-pin``): the time of :func:`toolfactory.export.export_run` (``time.perf_counter``) gives
   records/s (records read per second; skipped records cost a read and a conversion too), and
   ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at the end the peak RSS, also shown as growth
   over the peak before the export began (the interpreter, pyarrow and pydantic left out).
   The large run is exported in ``--large-formats`` only (default: openai, toolbench, hf — one
   format of each writer kind: a JSONL stream, one file per record plus a JSON list, Parquet
   row groups) to keep a run near three minutes; the others have the same streaming loop.
3. Memory is flat in the number of records when the peak at the large run is about the peak at
   the small one: the ratio is reported per format. ``toolalpaca`` is the exception by design
   (one entry per tool, held until the export closes).

Writes ``benchmarks/results/export.json``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Sequence

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json


def _pin() -> int | None:
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def measure(root: str, run_id: str, fmt: str, out: str, pin: bool) -> dict[str, Any]:
    """One export in this (fresh) process: time, counts and peak RSS."""
    from toolfactory.config import StorageConfig
    from toolfactory.export import export_run
    from toolfactory.storage import ObjectStore

    cpu = _pin() if pin else None
    store = ObjectStore.open(StorageConfig(root=root))
    before = _rss_mb()
    start = time.perf_counter()
    summary = export_run(store, run_id, fmt, out)
    seconds = time.perf_counter() - start
    peak = _rss_mb()
    return {"format": fmt, "run": run_id, "records": summary["records"], "exported": summary["exported"],
            "skipped": summary["skipped"], "seconds": round(seconds, 3), "records_per_s": round(summary["records"] / seconds, 1),
            "peak_rss_mb": round(peak, 1), "rss_before_mb": round(before, 1), "rss_growth_mb": round(peak - before, 1), "cpu": cpu}


def _in_fresh_process(*args: Any) -> dict[str, Any]:
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(measure, *args).result()


def dialogues(count: int, seed: int, copies: int = 10) -> list[Any]:
    """`count` valid dialogues over `copies` renamed copies of the seed catalog, with their
    source tools and models recorded (as the dialogues stage records them)."""
    from toolfactory.catalog import load_seed_catalog
    from toolfactory.models import Tool, ToolRef
    from benchmarks.corpus import valid_dialogues

    pool = [Tool(name=f"{t.name}{k}", description=t.description, category=f"{t.category}-{k}",
                 functions=[f.model_copy(update={"name": f"{f.name}_{k}"}) for f in t.functions])
            for k in range(copies) for t in load_seed_catalog() if t.functions]
    owner = {f.name: t for t in pool for f in t.functions}
    out = []
    for d in valid_dialogues(count, seed, tools=pool):
        tools = {owner[f.name].id: owner[f.name] for f in d.tools if f.name in owner}
        refs = [ToolRef(id=t.id, name=t.name, category=t.category, source=t.source) for t in tools.values()]
        out.append(d.model_copy(update={"source_tools": refs, "models": {"assistant": "bench-assistant", "user": "bench-user"}}))
    return out


def build_workload(root: Path, runs: dict[str, int], unique: int, shard_size: int, seed: int) -> dict[str, Any]:
    """Write each run of `runs` (id → records) as verify shards; what was built."""
    from toolfactory.config import StorageConfig
    from toolfactory.storage.shards import write_rows
    from toolfactory.storage import ObjectStore

    start = time.perf_counter()
    texts = [(d.id, d.to_json()) for d in dialogues(unique, seed)]
    built_s = time.perf_counter() - start
    store = ObjectStore.open(StorageConfig(root=str(root)))
    start = time.perf_counter()
    for run_id, count in runs.items():
        for shard, first in enumerate(range(0, count, shard_size)):
            rows = []
            for k in range(first, min(first + shard_size, count)):
                old, text = texts[k % len(texts)]
                new = f"{run_id}-{k:07d}"
                rows.append((new, text.replace(f'"id":"{old}"', f'"id":"{new}"', 1)))
            write_rows(store, f"runs/{run_id}/verify/part-{shard:05d}.parquet", rows)
    return {"unique_dialogues": unique, "mean_record_bytes": round(sum(len(t) for _, t in texts) / len(texts)),
            "corpus_build_s": round(built_s, 2), "shards_write_s": round(time.perf_counter() - start, 2),
            "shard_size": shard_size, "runs": runs}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from toolfactory.export import FORMATS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--shard-size", type=int, default=1000)
    parser.add_argument("--large-formats", default="openai,toolbench,hf")
    parser.add_argument("--unique", type=int, default=2000, help="distinct dialogues, repeated with new ids")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument("--out", default=str(RESULTS_DIR / "export.json"))
    args = parser.parse_args(argv)
    large_formats = [f for f in args.large_formats.split(",") if f]

    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="toolfactory-export-bench-"))
    try:
        small, large = f"bench-{args.small}", f"bench-{args.large}"
        workload = build_workload(tmp / "store", {small: args.small, large: args.large}, args.unique, args.shard_size, args.seed)
        print(f"workload: {args.small} and {args.large} records in shards of {args.shard_size} "
              f"({workload['mean_record_bytes']} bytes a record), written in {workload['shards_write_s']} s")
        results = []
        plan = [(small, fmt) for fmt in FORMATS] + [(large, fmt) for fmt in large_formats]
        for run_id, fmt in plan:
            out = tmp / "out" / f"{run_id}-{fmt}"
            result = _in_fresh_process(str(tmp / "store"), run_id, fmt, str(out), not args.no_pin)
            shutil.rmtree(out, ignore_errors=True)
            results.append(result)
            print(f"  {fmt:<10} {result['records']:>7} records  {result['records_per_s']:>8.0f}/s  "
                  f"peak RSS {result['peak_rss_mb']:.0f} MB (+{result['rss_growth_mb']:.0f})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    by = {(r["run"], r["format"]): r for r in results}
    flatness = {}
    for fmt in large_formats:
        a, b = by[(small, fmt)], by[(large, fmt)]
        flatness[fmt] = {"peak_rss_ratio": round(b["peak_rss_mb"] / a["peak_rss_mb"], 3),
                         "rss_growth_mb": [a["rss_growth_mb"], b["rss_growth_mb"]]}
    print()
    print(table(["format", "records", "exported", "records/s", "peak RSS MB", "growth MB"],
                [[r["format"], r["records"], r["exported"], r["records_per_s"], r["peak_rss_mb"], r["rss_growth_mb"]] for r in results]))
    print()
    print(table(["format", f"peak RSS {args.large} / {args.small}", "growth MB small", "growth MB large"],
                [[fmt, f["peak_rss_ratio"], *f["rss_growth_mb"]] for fmt, f in flatness.items()]))
    total_s = time.perf_counter() - started
    print(f"\nwhole benchmark: {total_s:.0f} s")
    data = {
        "benchmark": "export",
        "machine": machine_info(),
        "params": {"small": args.small, "large": args.large, "shard_size": args.shard_size, "large_formats": large_formats,
                   "unique": args.unique, "seed": args.seed, "pinned": not args.no_pin},
        "workload": workload,
        "results": results,
        "memory_flatness": flatness,
        "total_s": round(total_s, 1),
    }
    path = write_json(args.out, data)
    print(f"wrote {path}")
    return data


if __name__ == "__main__":
    main()
