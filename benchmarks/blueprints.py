"""Blueprints kept and dropped: whole runs with `tasks.blueprints` on over BFCL's environments.

    python -m benchmarks.blueprints [--sources files,math,messages,twitter,tickets,trading,travel,vehicle,memory]
        [--per-source 6] [--seeds 0] [--obedience 1.0] [--variants as_before,default] [--out PATH]

One run holds every source as its tools (BFCL's eight multi-turn environments from the installed
bfcl-eval, and `@modelcontextprotocol/server-memory` from npm, whose state is its `read_graph`);
each source anchors `--per-source` blueprints. The run goes to the end (dialogues, verification,
the dataset), so the figures say what a kept blueprint is worth too. Each variant is one run per
seed, the same in all but the variant's settings:

* `as_before`: no repair and no blueprint over two sources (`tasks.blueprints.repairs: 0`,
  `spanning: 0`);
* `default`: the defaults (one repair, a quarter of the blueprints over two sources).

Read from the run's stats (its DuckDB file, through the run's summary): blueprints written (kept
and rejected by the tasks stage), kept, dropped by reason; and from the stored records, the same
per source (a blueprint over two sources is counted under both, joined by `+`), the blueprints
kept after a repair and how many of the kept are distinct (the same prompt asked again may get
the same blueprint), the dialogues made from blueprints and accepted into the dataset; and what
became of each dialogue played for a kept blueprint: passed the verifier (its replay reached the
blueprint's state and no rule failed), or rejected by the dialogues stage or the verifier, with
its reasons. The
simulator follows the prompts (`llm.simulator.obedience` 1.0, as in `benchmarks.executable_runs`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json
from benchmarks.executable_runs import prefect_and_ray, run
from benchmarks.mcp_sources import NPM
from toolfactory.stages import DATASET_STAGE

#: Source name -> BFCL preset (the files source starts from a small home folder).
BFCL = {"files": "GorillaFileSystem", "math": "MathAPI", "messages": "MessageAPI", "twitter": "TwitterAPI",
        "tickets": "TicketAPI", "trading": "TradingBot", "travel": "TravelAPI", "vehicle": "VehicleControlAPI"}
SOURCES = (*BFCL, "memory")
FILES = {"root": {"alex": {"type": "directory", "contents": {
    "notes.txt": {"type": "file", "content": "meeting at noon"},
    "budget-2026.csv": {"type": "file", "content": "rent,1200\nfood,400"},
    "reports": {"type": "directory", "contents": {"q1.txt": {"type": "file", "content": "revenue up"}}},
}}}}
VARIANTS: dict[str, dict[str, Any]] = {
    "as_before": {"tasks.blueprints.repairs": 0, "tasks.blueprints.spanning": 0.0},
    "default": {},
}


def source_entry(name: str) -> tuple[str, dict[str, Any]]:
    """(the `tools` field, the entry) of one source."""
    if name in BFCL:
        entry: dict[str, Any] = {"name": name, "preset": BFCL[name]}
        if name == "files":
            entry["initial_state"] = FILES
        return "environments", entry
    if name == "memory":
        return "mcp", {"name": "memory", "command": "node", "args": [str(NPM / "server-memory" / "dist" / "index.js")],
                       "env": {"MEMORY_FILE_PATH": "${TOOLFACTORY_WORKDIR}/memory.jsonl"}, "state_tool": "read_graph"}
    raise SystemExit(f"--sources: unknown source {name!r} (known: {', '.join(SOURCES)})")


def overrides(root: Path, seed: int, per_source: int, tools: dict[str, list[dict[str, Any]]], obedience: float,
              variant: dict[str, Any]) -> list[str]:
    values: dict[str, Any] = {
        "run.seed": seed,
        "llm.simulator.obedience": obedience,
        "storage.root": str(root),
        "tools.builtin_catalog": False,
        "tools.builtin_introductions": False,
        "tools.synthesis.count": 0,
        "tasks.instructions_per_tool": per_source,
        "tasks.recipes": "{toolalpaca: 0.5, toolace: 0.5}",
        "tasks.blueprints.enabled": "true",
        "llm.simulator.latency_ms": 0,
        "llm.simulator.latency_jitter_ms": 0,
        "run.min_accepted": 0,
        "orchestration.task_retry_delay_s": 0,
        **{f"tools.{key}": json.dumps(value) for key, value in tools.items()},
        **{key: json.dumps(value) if not isinstance(value, str) else value for key, value in variant.items()},
    }
    return [f"{key}={value}" for key, value in values.items()]


def _rows(root: Path, stage: str, rejected: bool = False) -> list[dict[str, Any]]:
    """The records a stage kept (or, with `rejected`, its rejections: id, reasons, detail, record)."""
    found = []
    for path in sorted(root.glob(f"runs/*/{stage}/{'rejected/' if rejected else ''}*.parquet")):
        for row in pq.read_table(path).to_pylist():
            if rejected:
                found.append({**row, "record": json.loads(row["record"] or "{}")})
            elif row.get("record"):
                found.append(json.loads(row["record"]))
    return found


def _sources_of(tools: list[dict[str, Any]]) -> str:
    names = [str(((t.get("provenance") or {}).get("executable") or {}).get("source") or t.get("name")) for t in tools]
    return "+".join(sorted(dict.fromkeys(names)))


def blueprint_dialogues(root: Path, kept_tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """What became of the dialogues played for kept blueprints: passed verify, or the reasons
    (joined by `+`) the dialogues stage or the verifier rejected each with."""
    ids = {task["id"] for task in kept_tasks}
    rejected: Counter[str] = Counter()
    for stage in ("dialogues", "verify"):
        for row in _rows(root, stage, rejected=True):
            inner = row["record"]
            task_id = inner.get("task_id") or (inner.get("task") or {}).get("id")
            if task_id in ids:
                rejected[f"{stage}: {'+'.join(map(str, row['reasons']))}"] += 1
    passed = sum(1 for d in _rows(root, "verify") if d.get("task_id") in ids)
    return {"made": passed + sum(rejected.values()), "passed_verify": passed, "rejected": dict(rejected.most_common())}


def measure(summary: dict[str, Any], root: Path) -> dict[str, Any]:
    stages = {s["stage"]: s for s in summary.get("stages", [])}
    tasks_stage = stages.get("tasks", {})
    dropped = dict(tasks_stage.get("rejections", {}))
    profile = tasks_stage.get("profile", {})
    kept = int((profile.get("blueprints") or {}).get("kept", 0))
    # Per source, from the stored records: a kept task's tools, a rejection's tool ids mapped by the pool.
    pool = {t["id"]: t for t in _rows(root, "pool") if "id" in t}
    per_source: dict[str, Counter[str]] = {}
    for row in _rows(root, "tasks", rejected=True):
        inner = row["record"]
        names = inner.get("sources") or [_sources_of([pool.get(str(inner.get("tool")), {"name": str(inner.get("tool"))})])]
        per_source.setdefault("+".join(sorted(names)), Counter())[str(row["reasons"][0])] += 1
    kept_tasks = [t for t in _rows(root, "tasks") if t.get("blueprint")]
    for task in kept_tasks:
        per_source.setdefault(_sources_of(task.get("tools") or []), Counter())["kept"] += 1
    dialogues = stages.get("dialogues", {}).get("profile", {})
    return {
        "status": summary.get("status"),
        "written": kept + sum(dropped.values()),
        "kept": kept,
        "kept_share": round(kept / (kept + sum(dropped.values())), 3) if kept + sum(dropped.values()) else None,
        "dropped": dropped,
        "repaired": sum(1 for t in kept_tasks if (t["blueprint"].get("repairs") or 0) > 0),
        "distinct": len({json.dumps(t["blueprint"]["turns"], sort_keys=True) for t in kept_tasks}),
        "two_sources": sum(1 for t in kept_tasks if len(t.get("tools") or []) > 1),
        "per_source": {name: dict(counts) for name, counts in sorted(per_source.items())},
        "blueprint_dialogues": sum((dialogues.get("blueprint_dialogues") or {}).values()),
        "dialogues_of_kept": blueprint_dialogues(root, kept_tasks),
        "accepted": stages.get(DATASET_STAGE, {}).get("items_out", 0),
        "rejections": {s: dict(list(v.get("rejections", {}).items())[:5]) for s, v in stages.items()
                       if v.get("rejections") and s != "tasks"},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.blueprints", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", default=",".join(SOURCES), help="comma-separated, of: " + ", ".join(SOURCES))
    parser.add_argument("--per-source", type=int, default=6, help="blueprints anchored by each source")
    parser.add_argument("--seeds", default="0", help="run.seed of each run of a variant")
    parser.add_argument("--obedience", type=float, default=1.0, help="llm.simulator.obedience of every run")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, of: " + ", ".join(VARIANTS))
    parser.add_argument("--keep", default=None, help="keep each run's storage root under this folder")
    parser.add_argument("--out", default=str(RESULTS_DIR / "blueprints.json"))
    args = parser.parse_args(argv)
    names = [n for n in args.sources.split(",") if n]
    if "memory" in names and not (NPM / "server-memory").is_dir():
        sys.exit(f"the npm MCP servers are not installed in {NPM.parents[1]}: run `make mcp-servers`")
    tools: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        field, entry = source_entry(name)
        tools.setdefault(field, []).append(entry)
    os.environ.setdefault("OPENAI_API_KEY", "sk-simulator")  # the simulator takes any key
    rows: list[dict[str, Any]] = []
    data: dict[str, Any] = {"load_before": [round(x, 2) for x in os.getloadavg()], "sources": names,
                            "per_source": args.per_source, "obedience": args.obedience, "runs": rows}
    with ExitStack() as stack:
        tmp = args.keep or stack.enter_context(tempfile.TemporaryDirectory(prefix="tf-blueprints-"))
        stack.enter_context(prefect_and_ray())
        for variant in (v for v in args.variants.split(",") if v):
            if variant not in VARIANTS:
                raise SystemExit(f"--variants: unknown variant {variant!r} (known: {', '.join(VARIANTS)})")
            for seed in (int(s) for s in args.seeds.split(",") if s):
                root = Path(tmp) / f"{variant}-seed{seed}"
                began = time.perf_counter()
                summary = run(overrides(root, seed, args.per_source, tools, args.obedience, VARIANTS[variant]))
                rows.append({"variant": variant, "seed": seed, "wall_s": round(time.perf_counter() - began, 1),
                             **measure(summary, root)})
                row = rows[-1]
                print(f"{variant} seed {seed}: {row['status']}, {row['kept']}/{row['written']} kept, dropped {row['dropped']}",
                      flush=True)
                write_json(args.out, {**data, "machine": machine_info()})
    keys = ["variant", "seed", "status", "written", "kept", "distinct", "kept_share", "repaired", "two_sources",
            "blueprint_dialogues", "passed_verify", "accepted", "wall_s"]
    print(table(keys, [[row["dialogues_of_kept"]["passed_verify"] if k == "passed_verify" else row[k] for k in keys]
                       for row in rows]))
    for row in rows:
        print(f"\n{row['variant']} seed {row['seed']}: dropped by reason {row['dropped']}")
        made = row["dialogues_of_kept"]
        print(f"dialogues of kept blueprints: {made['passed_verify']} of {made['made']} passed the verifier; "
              f"the rest {made['rejected']}")
        print(table(["source", "kept", "dropped"], [
            [name, counts.get("kept", 0), ", ".join(f"{r} {n}" for r, n in counts.items() if r != "kept")]
            for name, counts in row["per_source"].items()]))
    data["machine"] = machine_info()
    write_json(args.out, data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
