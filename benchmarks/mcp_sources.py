"""Published MCP servers as tool sources: import, session cost, and whether a replay reproduces.

For each server nobody here wrote (`mcp-server-time` from PyPI over stdio, `server-memory` from
npm over stdio, `server-everything` from npm over streamable HTTP), the tools are imported, then
a fixed script of calls runs in `--sessions` fresh sessions, each followed by a replay of the same
calls in another fresh session. Reported per server: tools imported, the median time to open a
session and of a call, and the share of executed results (and final states) the replay
reproduces. Then the test suite's hostile server (sleeps, floods, exits mid-call, forks): the
reason code of each case, its time to fail, and the processes it left.

The npm servers are read from build/mcp-servers (`make mcp-servers`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, machine_info, median, table, write_json
from toolfactory.executable.confine import ProcessLimits
from toolfactory.executable.mcp import McpEnvironment, McpSourceSettings
from toolfactory.executable.session import ExecutionFailed

REPO = Path(__file__).resolve().parents[1]
NPM = REPO / "build" / "mcp-servers" / "node_modules" / "@modelcontextprotocol"
HOSTILE = REPO / "tests" / "executable" / "hostile_mcp_server.py"
ADA = {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}
BABBAGE = {"name": "Babbage", "entityType": "person", "observations": ["designed the engine"]}
SCRIPTS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "time": [
        ("convert_time", {"source_timezone": "Asia/Tokyo", "time": "09:30", "target_timezone": "America/New_York"}),
        ("convert_time", {"source_timezone": "Europe/Paris", "time": "23:15", "target_timezone": "Australia/Sydney"}),
        ("convert_time", {"source_timezone": "Nowhere/Atlantis", "time": "10:00", "target_timezone": "UTC"}),
        ("get_current_time", {"timezone": "UTC"}),  # not deterministic: the clock moves
    ],
    "memory": [
        ("create_entities", {"entities": [ADA, BABBAGE]}),
        ("create_relations", {"relations": [{"from": "Ada", "to": "Babbage", "relationType": "worked with"}]}),
        ("add_observations", {"observations": [{"entityName": "Ada", "contents": ["born 1815"]}]}),
        ("search_nodes", {"query": "engine"}),
        ("open_nodes", {"names": ["Ada"]}),
        ("delete_observations", {"deletions": [{"entityName": "Babbage", "observations": ["designed the engine"]}]}),
    ],
    "everything": [
        ("echo", {"message": "hello"}),
        ("get-sum", {"a": 40, "b": 2}),
        ("get-tiny-image", {}),
    ],
}
HOSTILE_CASES = {"sleep": "exec_timeout", "flood": "exec_output_flood", "garbage": "exec_output_flood",
                 "exit": "exec_server_crashed", "fork": "exec_process_limit"}


@contextmanager
def everything_over_http() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(["node", str(NPM / "server-everything" / "dist" / "index.js"), "streamableHttp"],
                              env={**os.environ, "PORT": str(port)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.wait(10)


async def run_script(env: McpEnvironment, script: list[tuple[str, dict[str, Any]]]) -> tuple[float, list[float], list[Any], Any]:
    opened = time.perf_counter()
    async with env.session() as session:
        start = time.perf_counter() - opened
        latencies, results = [], []
        for name, arguments in script:
            began = time.perf_counter()
            result = await session.call(name, arguments)
            latencies.append(time.perf_counter() - began)
            results.append((result.content, result.is_error))
        state = await session.state()
    return start, latencies, results, state


async def measure(name: str, env: McpEnvironment, sessions: int) -> dict[str, Any]:
    began = time.perf_counter()
    tools = await env.list_tools()
    listed = time.perf_counter() - began
    starts, latencies, same, total, same_state, errors = [], [], 0, 0, 0, 0
    for _ in range(sessions):
        first = await run_script(env, SCRIPTS[name])
        replay = await run_script(env, SCRIPTS[name])
        for run in (first, replay):
            starts.append(run[0])
            latencies += run[1]
        total += len(first[2])
        same += sum(a == b for a, b in zip(first[2], replay[2]))
        errors += sum(is_error for _, is_error in first[2])
        same_state += first[3] == replay[3]
    return {
        "server": name, "transport": env.settings.transport, "tools": sum(len(t.functions) for t in tools),
        "list_s": listed, "session_start_s": median(starts), "call_s": median(latencies),
        "calls": total, "error_results": errors, "replay_same": same / total, "state_same": same_state / sessions,
    }


async def hostile_case(tool: str) -> dict[str, Any]:
    env = McpEnvironment(McpSourceSettings(name="hostile", command=sys.executable, args=[str(HOSTILE), "ok"], call_timeout_seconds=2.0,
                                           output_cap_bytes=1024, limits=ProcessLimits(max_processes=4)))
    reason = "none"
    async with env.session() as session:
        began = time.perf_counter()
        try:
            await session.call(tool, {})
        except ExecutionFailed as exc:
            reason = exc.reason
        failed_in = time.perf_counter() - began
    await asyncio.sleep(0.5)
    return {"case": tool, "reason": reason, "expected": HOSTILE_CASES[tool], "fails_in_s": failed_in, "left": len(hostile_processes())}


def hostile_processes() -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if str(HOSTILE).encode() in Path(entry.path, "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


async def main_async(sessions: int) -> dict[str, Any]:
    if not (NPM / "server-memory").is_dir():
        sys.exit(f"the npm MCP servers are not installed in {NPM.parents[1]}: run `make mcp-servers`")
    rows = [await measure("time", McpEnvironment(McpSourceSettings(
        name="time", command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"])), sessions)]
    rows.append(await measure("memory", McpEnvironment(McpSourceSettings(
        name="memory", command="node", args=[str(NPM / "server-memory" / "dist" / "index.js")],
        env={"MEMORY_FILE_PATH": "${TOOLFACTORY_WORKDIR}/memory.jsonl"}, state_tool="read_graph", state_files=True)), sessions))
    with everything_over_http() as url:
        rows.append(await measure("everything", McpEnvironment(McpSourceSettings(name="everything", url=url)), sessions))
    hostile = [await hostile_case(tool) for tool in HOSTILE_CASES]
    return {"machine": machine_info(), "sessions": sessions, "servers": rows, "hostile": hostile}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mcp_sources", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=3, help="script runs (each replayed) per server")
    parser.add_argument("--out", default=str(RESULTS_DIR / "mcp_sources.json"))
    args = parser.parse_args(argv)
    data = asyncio.run(main_async(args.sessions))
    keys = ["server", "transport", "tools", "list_s", "session_start_s", "call_s", "calls", "error_results", "replay_same", "state_same"]
    print(table(keys, [[row[k] for k in keys] for row in data["servers"]]))
    print()
    keys = ["case", "reason", "expected", "fails_in_s", "left"]
    print(table(keys, [[row[k] for k in keys] for row in data["hostile"]]))
    print(f"wrote {write_json(args.out, data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
