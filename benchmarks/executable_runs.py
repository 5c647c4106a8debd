"""Whole runs over executable tool sources, against the same tools played by an LLM.

    python -m benchmarks.executable_runs [--sources files,time,memory,everything] [--modes executed,nightly,cold,played]
        [--instructions 12] [--obedience 1.0] [--out PATH]

Each source is imported as the run's only tools, and two runs are made with the same
configuration (the quickstart's recipes, judges and simulator faults, with no simulated latency).
The simulator follows the request-writing prompts (`llm.simulator.obedience`, 1.0 here, 0 in the
quickstart): a request then states the values its functions need, as a model asked for "concrete
values" writes them. With 0 it writes a few of the prompt's words instead, and over BFCL's file
system, whose 18 functions share one preamble in their descriptions, the three samples of each
assistant decision then pick different functions and invent different file names: ToolACE's
self-consistency rejects nearly every dialogue (`dialogue_inconsistent_decision`) in both modes,
and the run says nothing about execution.
The *nightly* run is the executed run again on a fresh root that holds the executed run's
vetting cards (the next night of a factory on one storage root, whose sources' versions and
settings did not change): it starts no vetting session. In the *executed* run the tools come from the source and every call goes to a fresh copy of the
real tool: a warm process reset for it where vetting found the reset keeps sessions apart (see
docs/tools/vetting.md); the *cold* run is the same with `warm_sessions: false`, a process started
for every session of a dialogue and of the verifier's replay. In the *played* run the same tools, written to a catalog file without their executable
marker, are answered by the tool-executor LLM (the simulator). The sources:

* `files`: BFCL's GorillaFileSystem, a Python environment (`pip install --no-deps bfcl-eval`);
* `time`: `mcp-server-time` from PyPI, over stdio;
* `memory`: `@modelcontextprotocol/server-memory` from npm, over stdio (`make mcp-servers`);
* `everything`: `@modelcontextprotocol/server-everything` from npm, over streamable HTTP (started here).

Reported per source and mode: functions imported, whether the run completed, tasks, dialogues
made and accepted (the dataset), the share of tasks accepted, LLM calls and tokens per accepted
dialogue (every stage, judges included), the tool role's LLM calls (0 when every call ran), and
how many accepted dialogues executed real calls; process starts (every stage's: listing and
vetting, exploration and blueprints, dialogues and replays) per executed dialogue, and the CPU time of the benchmark's whole process tree (driver, Prefect, Ray
and its workers, the sources' processes: `/proc` times of the living and what they reaped) per
executed dialogue (per accepted dialogue for the played run). All runs share one Prefect server and one local
Ray, as the test suite's runs do; each run has its own storage root, so no LLM cache is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json
from benchmarks.mcp_sources import NPM, everything_over_http
from toolfactory.config import ToolsConfig
from toolfactory.executable.confine import descendants
from toolfactory.executable.counts import DIALOGUES_BY_SOURCE, EXECUTED, SESSIONS_STARTED
from toolfactory.executable.registry import environments
from toolfactory.executable.vetting import CARDS
from toolfactory.stages import DATASET_STAGE

SOURCES = ("files", "time", "memory", "everything")
#: BFCL's file system starts from a small home folder, as in its own multi-turn tasks.
FILES = {"root": {"alex": {"type": "directory", "contents": {
    "notes.txt": {"type": "file", "content": "meeting at noon"},
    "reports": {"type": "directory", "contents": {"q1.txt": {"type": "file", "content": "revenue up"}}},
}}}}


def source_entry(name: str, url: str | None) -> tuple[str, dict[str, Any]]:
    """(the `tools` field, the entry) of one source."""
    if name == "files":
        return "environments", {"name": "files", "preset": "GorillaFileSystem", "initial_state": FILES}
    if name == "time":
        return "mcp", {"name": "time", "command": "mcp-server-time", "args": ["--local-timezone", "UTC"],
                       "deterministic": ["convert_time"]}
    if name == "memory":
        return "mcp", {"name": "memory", "command": "node", "args": [str(NPM / "server-memory" / "dist" / "index.js")],
                       "env": {"MEMORY_FILE_PATH": "${TOOLFACTORY_WORKDIR}/memory.jsonl"}, "state_tool": "read_graph"}
    if name == "everything":
        assert url is not None
        return "mcp", {"name": "everything", "url": url}
    raise SystemExit(f"--sources: unknown source {name!r} (known: {', '.join(SOURCES)})")


def played_catalog(field: str, entry: dict[str, Any], path: Path) -> int:
    """Write the source's tools as a catalog file an LLM plays (no executable marker); the
    number of functions imported."""
    tools = ToolsConfig.model_validate({"builtin_catalog": False, "builtin_introductions": False, field: [entry]})
    (environment,) = environments(tools).values()
    listed = asyncio.run(environment.list_tools())
    plain = []
    for tool in listed:
        provenance = {k: v for k, v in tool.provenance.items() if k != "executable"}
        plain.append(tool.model_copy(update={"provenance": provenance}).model_dump(mode="json", exclude_none=True))
    path.write_text(json.dumps({"version": 1, "tools": plain}, ensure_ascii=False))
    return sum(len(tool.functions) for tool in listed)


def overrides(root: Path, instructions: int, tools: dict[str, Any], obedience: float = 1.0,
              executable_instructions: int | None = None) -> list[str]:
    values: dict[str, Any] = {
        "tasks.instructions_per_executable_tool": executable_instructions if executable_instructions else "null",
        "llm.simulator.obedience": obedience,
        "storage.root": str(root),
        "tools.builtin_catalog": False,
        "tools.builtin_introductions": False,
        "tools.synthesis.count": 0,
        "tasks.instructions_per_tool": instructions,
        "llm.simulator.latency_ms": 0,
        "llm.simulator.latency_jitter_ms": 0,
        "run.min_accepted": 0,  # a source whose dialogues are all rejected is a figure, not a failure
        "orchestration.task_retry_delay_s": 0,
        **{f"tools.{key}": json.dumps(value) for key, value in tools.items()},
    }
    return [f"{key}={value}" for key, value in values.items()]


def tree_cpu_seconds() -> float:
    """User and system CPU of this process and its living descendants, and of what they reaped."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in [os.getpid(), *descendants(os.getpid())]:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    return total / tick


def figures(summary: dict[str, Any], source: str) -> dict[str, Any]:
    stages = {s["stage"]: s for s in summary.get("stages", [])}
    cost = summary.get("per_accepted") or {}
    tasks = stages.get("tasks", {}).get("items_out", 0)
    accepted = int(cost.get("accepted") or 0)
    tool_role = (summary.get("cost_by_role") or {}).get("tool") or {}
    return {
        "status": summary.get("status"),
        "tasks": tasks,
        "dialogues": stages.get("dialogues", {}).get("items_out", 0),
        "accepted": accepted,
        "accepted_share": round(accepted / tasks, 3) if tasks else None,
        "llm_calls_per_accepted": cost.get("llm_calls"),
        "tokens_per_accepted": cost.get("tokens"),
        "tool_role_tokens": int(tool_role.get("prompt_tokens", 0)) + int(tool_role.get("completion_tokens", 0)),
        "executed_dialogues": stages.get("dialogues", {}).get("profile", {}).get(DIALOGUES_BY_SOURCE, {}).get(source, 0),
        "executed_any": stages.get("dialogues", {}).get("profile", {}).get(EXECUTED, {}).get("any", 0),
        # Every process the run started for the source: its listing and vetting, exploration and
        # blueprints, the dialogues and the verifier's replays.
        "process_starts": sum(s.get("profile", {}).get(SESSIONS_STARTED, {}).get(source, 0) for s in stages.values()),
        "executed_accepted": stages.get(DATASET_STAGE, {}).get("profile", {}).get(DIALOGUES_BY_SOURCE, {}).get(source, 0),
        "rejections": {s: dict(list(v.get("rejections", {}).items())[:3]) for s, v in stages.items() if v.get("rejections")},
    }


@contextmanager
def prefect_and_ray() -> Iterator[None]:
    """One Prefect server and one local Ray for all the runs (as the test suite's fixtures)."""
    import ray
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                 namespace="toolfactory-bench", runtime_env={"env_vars": {"PREFECT_API_URL": str(PREFECT_API_URL.value())}})
        try:
            yield
        finally:
            ray.shutdown()


def run(argv: list[str]) -> dict[str, Any]:
    from flows.execute import summary_of
    from flows.generate import generate

    began = time.perf_counter()
    summary = summary_of(generate(config_path=None, overrides=argv, return_state=True))
    return {**summary, "wall_s": round(time.perf_counter() - began, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.executable_runs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", default=",".join(SOURCES), help="comma-separated, of: " + ", ".join(SOURCES))
    parser.add_argument("--instructions", type=int, default=12, help="tasks.instructions_per_tool of every run")
    parser.add_argument("--executable-instructions", type=int, default=None,
                        help="tasks.instructions_per_executable_tool of the runs over the real source (up to 200; "
                             "the played run keeps --instructions, at most 50): how process starts grow with a run's size")
    parser.add_argument("--obedience", type=float, default=1.0, help="llm.simulator.obedience of every run (see above)")
    parser.add_argument("--modes", default="", help="comma-separated, of: executed, nightly, cold, played (default: all)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "executable_runs.json"))
    args = parser.parse_args(argv)
    names = [n for n in args.sources.split(",") if n]
    if {"memory", "everything"} & set(names) and not (NPM / "server-memory").is_dir():
        sys.exit(f"the npm MCP servers are not installed in {NPM.parents[1]}: run `make mcp-servers`")
    os.environ.setdefault("OPENAI_API_KEY", "sk-simulator")  # the simulator takes any key
    rows: list[dict[str, Any]] = []
    load_before = [round(x, 2) for x in os.getloadavg()]
    data: dict[str, Any] = {"load_before": load_before, "instructions_per_tool": args.instructions,
                            "obedience": args.obedience, "runs": rows}
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="tf-exec-runs-") as tmp:
        url = stack.enter_context(everything_over_http()) if "everything" in names else None
        stack.enter_context(prefect_and_ray())
        for name in names:
            field, entry = source_entry(name, url)
            catalog = Path(tmp) / f"{name}-played.json"
            functions = played_catalog(field, entry, catalog)
            modes = [("executed", {field: [entry]}), ("nightly", {field: [entry]}),
                     ("cold", {field: [{**entry, "warm_sessions": False}]}),
                     ("played", {"files": [{"path": str(catalog), "format": "catalog"}]})]
            if args.modes:
                modes = [m for m in modes if m[0] in args.modes.split(",")]
            for mode, tools in modes:
                root = Path(tmp) / f"{name}-{mode}"
                if mode == "nightly":
                    # The next night on the same storage root: the executed run's vetting cards are
                    # there (its LLM cache is not: a night asks other questions).
                    cards = Path(tmp) / f"{name}-executed" / CARDS
                    if cards.is_dir():
                        shutil.copytree(cards, root / CARDS)
                cpu = tree_cpu_seconds()
                summary = run(overrides(root, args.instructions, tools, args.obedience,
                                        args.executable_instructions if mode != "played" else None))
                row = {"source": name, "mode": mode, "functions": functions, "wall_s": summary["wall_s"],
                       "cpu_s": round(tree_cpu_seconds() - cpu, 1), **figures(summary, name)}
                per = row["executed_dialogues"] if mode != "played" else row["accepted"]
                row["starts_per_executed"] = round(row["process_starts"] / per, 3) if per and mode != "played" else None
                row["cpu_per_dialogue_s"] = round(row["cpu_s"] / per, 3) if per else None
                rows.append(row)
                print(f"{name} {mode}: {summary.get('status')} in {summary['wall_s']} s", flush=True)
                # Written after every run: a long benchmark stopped half-way keeps what it measured.
                write_json(args.out, {**data, "machine": machine_info()})
    keys = ["source", "mode", "functions", "status", "tasks", "dialogues", "accepted", "accepted_share",
            "llm_calls_per_accepted", "tool_role_tokens", "executed_dialogues", "executed_accepted", "process_starts",
            "starts_per_executed", "cpu_s", "cpu_per_dialogue_s", "wall_s"]
    print(table(keys, [[row[k] for k in keys] for row in rows]))
    data["machine"] = machine_info()
    print(f"load average before {data['load_before']}, after {data['machine'].get('loadavg')}")
    print(f"wrote {write_json(args.out, data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
