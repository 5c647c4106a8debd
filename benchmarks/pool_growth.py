"""The tool pool grown over three simulated nights: its size and its parameter-type balance.

    python -m benchmarks.pool_growth [--nights 3] [--synthesize 24] [--out PATH]

Each night is `toolfactory run` into the same storage root with `run.seed=null` (a seed per run,
as the nightly deployment sets it), the shipped catalog and introductions, and
`tools.synthesis.count` new APIs. After each night the pool in `<root>/pool` is read back: tools
added that night and in total (by source), context-tree nodes, the share of each parameter type
(synthesized APIs, and the whole pool) next to `tools.synthesis.parameter_types`, nesting depth,
and the largest MinHash similarity between two pool tools (below the dedup threshold when the pool
holds no near-duplicates). The later stages run with one instruction per tool and no judges, so
the time is mostly the tools stages'.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from toolfactory.config import load_config
from toolfactory.models import Tool
from toolfactory.run.pool import TOOLS, TREE, pool_files
from toolfactory.storage.shards import read_records
from toolfactory.stages.pool.dedup import signature
from toolfactory.stages.tools.fields import nesting_depth, parameter_types
from toolfactory.storage import ObjectStore

TOOLFACTORY = str(Path(sys.executable).with_name("toolfactory"))


def shares(counts: Counter[str]) -> dict[str, float]:
    total = sum(counts.values()) or 1
    return {kind: round(n / total, 3) for kind, n in sorted(counts.items())}


def pool_state(root: Path) -> dict[str, Any]:
    store = ObjectStore.open(load_config(None, [f"storage.root={root}"], environ={}).storage)
    tools = [Tool.model_validate(r) for path in pool_files(store, TOOLS) for r in read_records(store, path)]
    nodes = [r for path in pool_files(store, TREE) for r in read_records(store, path)]
    types: dict[str, Counter[str]] = {"synthesized": Counter(), "pool": Counter()}
    depth: Counter[str] = Counter()
    for tool in tools:
        for fn in tool.functions:
            counted = parameter_types(fn.parameters)
            types["pool"].update(counted)
            if tool.source == "synthesized":
                types["synthesized"].update(counted)
            depth[str(nesting_depth(fn.parameters))] += 1
    signatures = [signature(t) for t in tools]
    closest = max((a.jaccard(b) for a, b in itertools.combinations(signatures, 2)), default=0.0)
    return {
        "pool_tools": len(tools),
        "by_source": dict(Counter(t.source for t in tools)),
        "tree_nodes": len(nodes),
        "tree_by_depth": dict(Counter(str(len(n["path"])) for n in nodes)),
        "parameter_type_shares": {name: shares(c) for name, c in types.items()},
        "nesting_depth": dict(sorted(depth.items())),
        "max_pair_similarity": round(closest, 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pool_growth", description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=3)
    parser.add_argument("--synthesize", type=int, default=24)
    parser.add_argument("--out", default="benchmarks/results/pool_growth.json")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="toolfactory-bench-pool-"))
    config = load_config(None, [], environ={})
    sets = [
        f"storage.root={root}", "run.seed=null", f"tools.synthesis.count={args.synthesize}",
        "tasks.instructions_per_tool=1", "tasks.recipes={toolalpaca: 1}", "verify.judges=[]",
        "llm.simulator.latency_ms=0", "llm.simulator.latency_jitter_ms=0",
    ]
    nights = []
    for night in range(1, args.nights + 1):
        started = time.perf_counter()
        result = subprocess.run([TOOLFACTORY, "run", *(x for s in sets for x in ("--set", s))], capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"night {night} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        run_id = next(line.split()[1].rstrip(":") for line in result.stdout.splitlines() if line.startswith("run ") and "completed" in line)
        stats = json.loads(subprocess.run([TOOLFACTORY, "stats", run_id, "--json", "--set", f"storage.root={root}"],
                                          capture_output=True, text=True, check=True).stdout)
        pool_stage = next(s for s in stats["stages"] if s["stage"] == "pool")
        state = pool_state(root)
        nights.append({"night": night, "run_id": run_id, "wall_s": round(time.perf_counter() - started, 1),
                       "run_pool": pool_stage["profile"].get("pool", {}), "rejections": pool_stage["rejections"], **state})
        print(f"night {night}: pool {state['pool_tools']} tools {state['by_source']}, tree {state['tree_nodes']} nodes, "
              f"this run {pool_stage['profile'].get('pool', {})}, closest pair {state['max_pair_similarity']}")
    targets = dict(config.tools.synthesis.parameter_types)
    total = sum(targets.values())
    report = {"benchmark": "pool_growth", "nights": nights, "synthesize_per_night": args.synthesize,
              "type_targets": {k: round(v / total, 3) for k, v in sorted(targets.items())},
              "near_duplicate_threshold": config.tools.pool.near_duplicate_threshold}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    last = nights[-1]["parameter_type_shares"]
    print(f"{'type':<8} {'target':>7} {'synthesized':>12} {'pool':>7}")
    for kind in sorted(report["type_targets"]):
        print(f"{kind:<8} {report['type_targets'][kind]:>7} {last['synthesized'].get(kind, 0):>12} {last['pool'].get(kind, 0):>7}")
    print(f"results written to {args.out} (storage kept in {root})")


if __name__ == "__main__":
    main()
