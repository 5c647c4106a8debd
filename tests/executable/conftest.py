"""The simulator the executable-tool tests talk to: over HTTP, with no latency and no faults, so
what a test sees comes from the tools that ran; and the npm MCP servers (`make mcp-servers`)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import http
from toolfactory.simulator import SimulatorSettings, start_simulator

QUIET = {"latency_ms": 0, "latency_jitter_ms": 0, "rate_malformed_json": 0, "rate_hallucinated_function": 0,
         "rate_missing_required": 0, "rate_wrong_type": 0, "rate_parallel_calls": 0, "rate_follow_up_call": 0,
         "rate_clarify": 0, "rate_decline": 0}


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings(**QUIET)) as simulator:
        http.post(f"{simulator.root_url}/simulator/settings", json=QUIET).raise_for_status()
        yield simulator


REPO = Path(__file__).resolve().parents[2]
NPM_SERVERS = REPO / "build" / "mcp-servers" / "node_modules" / "@modelcontextprotocol"


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="module")
def npm_servers() -> Path:
    """The folder of the npm MCP servers; skipped (failed under CI) without node or the install."""
    if shutil.which("node") is None:
        reason = "needs node (the npm MCP servers run on it)"
    elif not (NPM_SERVERS / "server-memory" / "dist" / "index.js").is_file() or not (NPM_SERVERS / "server-everything" / "dist" / "index.js").is_file():
        reason = f"needs the npm MCP servers in {NPM_SERVERS.parents[1]}: run `make mcp-servers`"
    else:
        return NPM_SERVERS
    if _ci():
        pytest.fail(reason)
    pytest.skip(reason)
