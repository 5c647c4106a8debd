"""Tasks written from what executable tools answered: whole runs with exploration off and on.

    python -m benchmarks.grounded_tasks [--sources files,travel,messages,time] [--instructions 6] [--seeds 0,1] [--obedience 1.0] [--keep DIR] [--out PATH]

One run holds every source as its tools (each anchors `--instructions` tasks by the recipe its
seed draws for it; toolllm sets mix them), and is made twice per seed, the same in all but
`tasks.explore`. The sources:

* `files`: BFCL's GorillaFileSystem, from a home folder with two files and a folder;
* `travel`: BFCL's TravelAPI, from its own empty start (airports, credit cards, budget);
* `messages`: BFCL's MessageAPI, from its own start (four users, three messages);
* `time`: `mcp-server-time` from PyPI, over stdio.

Measured from the dialogues each run made (kept and rejected alike): the calls that ran, the
share of them whose answer is an error naming a value that does not exist there (a file or folder
not found, an unknown user or id, an invalid time zone: :func:`missing_value`), the share that
is an error of any kind, and the share of tasks accepted into the dataset. The simulator follows
the prompts (`llm.simulator.obedience` 1.0, as in `benchmarks.executable_runs`): a request then
names the values the prompt lists, and the assistant takes the values the request names.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json
from benchmarks.executable_runs import prefect_and_ray, run
from toolfactory.stages import DATASET_STAGE

SOURCES = ("files", "travel", "messages", "time")
FILES = {"root": {"alex": {"type": "directory", "contents": {
    "notes.txt": {"type": "file", "content": "meeting at noon"},
    "budget-2026.csv": {"type": "file", "content": "rent,1200\nfood,400"},
    "reports": {"type": "directory", "contents": {"q1.txt": {"type": "file", "content": "revenue up"}}},
}}}}

# An answer that says the value it was given names nothing there: BFCL's file system
# ("No such file or directory"), its travel and message APIs ("not found", "Invalid booking
# ID", "Receiver ID not found"), Python's lookups (KeyError), mcp-server-time ("No time zone
# found with key …", "Invalid timezone").
_MISSING = re.compile(
    r"no such (file|directory|folder)|not found|does ?n[o']t exist|not exist|no .{0,30} found|unknown"
    r"|invalid (time ?zone|.{0,20}\bid\b|airport|booking|card|user)|no time zone|KeyError|not in the"
    r"|no (available )?route|not a (file|directory)", re.IGNORECASE)
# ... but a call to a function that is not offered names no value of the environment.
_NOT_A_VALUE = re.compile(r"unknown (function|tool)", re.IGNORECASE)
# An answer that is an error at all: the source's `{"error": …}`, an exception's text, a 400.
_ERROR = re.compile(r'^\s*(\{\s*"error"|\{\s*"status_code"\s*:\s*4|Error\b|[A-Z]\w*(Error|Exception)\s*:)', re.IGNORECASE)


def source_entry(name: str) -> tuple[str, dict[str, Any]]:
    """(the `tools` field, the entry) of one source."""
    if name == "files":
        return "environments", {"name": "files", "preset": "GorillaFileSystem", "initial_state": FILES}
    if name == "travel":
        return "environments", {"name": "travel", "preset": "TravelAPI"}
    if name == "messages":
        return "environments", {"name": "messages", "preset": "MessageAPI"}
    if name == "time":
        return "mcp", {"name": "time", "command": "mcp-server-time", "args": ["--local-timezone", "UTC"],
                       "deterministic": ["convert_time"]}
    raise SystemExit(f"--sources: unknown source {name!r} (known: {', '.join(SOURCES)})")


def is_error(content: str) -> bool:
    return bool(_ERROR.search(content or ""))


def missing_value(content: str) -> bool:
    """Whether a tool's answer is an error naming a value that does not exist."""
    return is_error(content) and bool(_MISSING.search(content)) and not _NOT_A_VALUE.search(content)


def overrides(root: Path, seed: int, instructions: int, tools: dict[str, list[dict[str, Any]]], explore: bool,
              obedience: float) -> list[str]:
    values: dict[str, Any] = {
        "run.seed": seed,
        "llm.simulator.obedience": obedience,
        "storage.root": str(root),
        "tools.builtin_catalog": False,
        "tools.builtin_introductions": False,
        "tools.synthesis.count": 0,
        "tasks.instructions_per_tool": instructions,
        "tasks.explore": json.dumps(explore),
        "llm.simulator.latency_ms": 0,
        "llm.simulator.latency_jitter_ms": 0,
        "run.min_accepted": 0,
        "orchestration.task_retry_delay_s": 0,
        **{f"tools.{key}": json.dumps(value) for key, value in tools.items()},
    }
    return [f"{key}={value}" for key, value in values.items()]


def _dialogues(value: Any) -> list[dict[str, Any]]:
    """The dialogues a stored record holds (a kept dialogue, or the one a rejection keeps)."""
    if isinstance(value, dict):
        if isinstance(value.get("messages"), list):
            return [value]
        return _dialogues(value.get("record"))
    return []


def tool_answers(root: Path) -> list[tuple[str, str]]:
    """(function, answer) of every tool message of the dialogues stage's records, kept or not."""
    found: list[tuple[str, str]] = []
    for path in sorted(root.glob("runs/*/dialogues/**/*.parquet")):
        for row in pq.read_table(path).to_pylist():
            for dialogue in _dialogues(json.loads(row["record"])):
                for message in dialogue["messages"]:
                    if message.get("role") == "tool":
                        found.append((str(message.get("name")), str(message.get("content") or "")))
    return found


def measure(summary: dict[str, Any], root: Path, explore: bool) -> dict[str, Any]:
    stages = {s["stage"]: s for s in summary.get("stages", [])}
    answers = tool_answers(root)
    errors = sum(is_error(content) for _, content in answers)
    missing = [f"{name}: {content[:90]}" for name, content in answers if missing_value(content)]
    tasks = stages.get("tasks", {}).get("items_out", 0)
    accepted = stages.get(DATASET_STAGE, {}).get("items_out", 0)
    profile = stages.get("tasks", {}).get("profile", {})
    return {
        "explore": explore,
        "status": summary.get("status"),
        "tasks": tasks,
        "recipes": profile.get("recipes", {}),
        "exploration": profile.get("exploration", {}),
        "facts": profile.get("exploration_facts", {}),
        "dialogues": stages.get("dialogues", {}).get("items_out", 0),
        "accepted": accepted,
        "accepted_share": round(accepted / tasks, 3) if tasks else None,
        "calls": len(answers),
        "errors": errors,
        "missing_value_errors": len(missing),
        "missing_value_share": round(len(missing) / len(answers), 3) if answers else None,
        "error_share": round(errors / len(answers), 3) if answers else None,
        "missing_examples": missing[:6],
        "rejections": {s: dict(list(v.get("rejections", {}).items())[:4]) for s, v in stages.items() if v.get("rejections")},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.grounded_tasks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", default=",".join(SOURCES), help="comma-separated, of: " + ", ".join(SOURCES))
    parser.add_argument("--instructions", type=int, default=6, help="tasks.instructions_per_tool of every run")
    parser.add_argument("--seeds", default="0,1", help="run.seed of each pair of runs")
    parser.add_argument("--obedience", type=float, default=1.0, help="llm.simulator.obedience of every run")
    parser.add_argument("--keep", default=None, help="keep each run's storage root under this folder (to read its dialogues)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "grounded_tasks.json"))
    args = parser.parse_args(argv)
    tools: dict[str, list[dict[str, Any]]] = {}
    for name in (n for n in args.sources.split(",") if n):
        field, entry = source_entry(name)
        tools.setdefault(field, []).append(entry)
    os.environ.setdefault("OPENAI_API_KEY", "sk-simulator")  # the simulator takes any key
    rows: list[dict[str, Any]] = []
    data: dict[str, Any] = {"load_before": [round(x, 2) for x in os.getloadavg()], "sources": args.sources,
                            "instructions_per_tool": args.instructions, "obedience": args.obedience, "runs": rows}
    with ExitStack() as stack:
        tmp = args.keep or stack.enter_context(tempfile.TemporaryDirectory(prefix="tf-grounded-"))
        stack.enter_context(prefect_and_ray())
        for seed in (int(s) for s in args.seeds.split(",") if s):
            for explore in (False, True):
                root = Path(tmp) / f"seed{seed}-{'on' if explore else 'off'}"
                began = time.perf_counter()
                summary = run(overrides(root, seed, args.instructions, tools, explore, args.obedience))
                rows.append({"seed": seed, "wall_s": round(time.perf_counter() - began, 1), **measure(summary, root, explore)})
                print(f"seed {seed} explore {explore}: {summary.get('status')}, {rows[-1]['calls']} calls, "
                      f"{rows[-1]['missing_value_errors']} naming nothing, {rows[-1]['accepted']}/{rows[-1]['tasks']} accepted",
                      flush=True)
                write_json(args.out, {**data, "machine": machine_info()})
    totals = []
    for explore in (False, True):
        mine = [r for r in rows if r["explore"] == explore]
        calls, missing = sum(r["calls"] for r in mine), sum(r["missing_value_errors"] for r in mine)
        errors = sum(r["errors"] for r in mine)
        tasks, accepted = sum(r["tasks"] for r in mine), sum(r["accepted"] for r in mine)
        totals.append({"explore": explore, "tasks": tasks, "calls": calls, "missing_value_errors": missing,
                       "missing_value_share": round(missing / calls, 3) if calls else None,
                       "error_share": round(errors / calls, 3) if calls else None, "accepted": accepted,
                       "accepted_share": round(accepted / tasks, 3) if tasks else None})
    data["totals"] = totals
    keys = ["seed", "explore", "status", "tasks", "calls", "errors", "missing_value_errors", "missing_value_share",
            "error_share", "accepted", "accepted_share", "wall_s"]
    print(table(keys, [[row[k] for k in keys] for row in rows]))
    keys = ["explore", "tasks", "calls", "missing_value_errors", "missing_value_share", "error_share", "accepted", "accepted_share"]
    print(table(keys, [[row[k] for k in keys] for row in totals]))
    data["machine"] = machine_info()
    print(f"load average before {data['load_before']}, after {data['machine'].get('loadavg')}")
    print(f"wrote {write_json(args.out, data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
