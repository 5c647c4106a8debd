"""Published MCP servers nobody here wrote, as tool sources: `mcp-server-time` from PyPI over
stdio, `@modelcontextprotocol/server-memory` from npm over stdio, and
`@modelcontextprotocol/server-everything` from npm over streamable HTTP. The npm packages are
installed into build/mcp-servers by `make test` (`make mcp-servers`); without node or that folder
these tests skip, and fail under CI."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolfactory.executable.mcp import McpEnvironment, McpSourceSettings
from toolfactory.executable.session import executable_source
from toolfactory.definitions.validity import definition_problems


def time_server() -> McpEnvironment:
    return McpEnvironment(McpSourceSettings(
        name="time", command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"], deterministic=True,
    ))


def test_the_time_server_s_tools_import_with_their_schemas_and_annotations() -> None:
    [tool] = asyncio.run(time_server().list_tools())
    assert [f.name for f in tool.functions] == ["get_current_time", "convert_time"]
    assert executable_source(tool) == "time" and tool.source == "mcp"
    assert tool.function("convert_time").parameters["required"] == ["source_timezone", "time", "target_timezone"]  # type: ignore[union-attr]
    assert "time_difference" in tool.function("convert_time").returns["properties"]  # type: ignore[union-attr]
    assert tool.provenance["mcp"]["functions"]["convert_time"]["read_only"] is True
    assert definition_problems(tool) == []


def test_a_server_installed_with_the_factory_starts_by_name_when_its_bin_folder_is_not_on_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # `.venv/bin/toolfactory run` (as `make demo` runs the quickstart) does not put .venv/bin on PATH.
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert shutil.which("mcp-server-time") is None
    env = McpEnvironment(McpSourceSettings(name="time", command="mcp-server-time", args=["--local-timezone", "UTC"]))
    [tool] = asyncio.run(env.list_tools())
    assert [f.name for f in tool.functions] == ["get_current_time", "convert_time"]


def test_a_deterministic_time_call_gives_the_same_result_in_a_fresh_session() -> None:
    env = time_server()
    arguments = {"source_timezone": "Asia/Tokyo", "time": "09:30", "target_timezone": "America/New_York"}

    async def once() -> Any:
        async with env.session() as session:
            return await session.call("convert_time", arguments)

    first, replay = asyncio.run(once()), asyncio.run(once())
    assert not first.is_error and first.structured["time_difference"] == "-14.0h"
    assert (replay.content, replay.structured) == (first.content, first.structured)


def test_the_time_server_s_refusal_is_an_error_result() -> None:
    async def go() -> Any:
        async with time_server().session() as session:
            return await session.call("get_current_time", {"timezone": "Nowhere/Atlantis"})

    result = asyncio.run(go())
    assert result.is_error and "Nowhere/Atlantis" in result.content


def memory_server(npm_servers: Path) -> McpEnvironment:
    # The server keeps its graph in a file beside its code unless told otherwise: each session's
    # own folder keeps sessions apart.
    return McpEnvironment(McpSourceSettings(
        name="memory", command="node", args=[str(npm_servers / "server-memory" / "dist" / "index.js")],
        env={"MEMORY_FILE_PATH": "${TOOLFACTORY_WORKDIR}/memory.jsonl"}, state_tool="read_graph", state_files=True,
    ))


def test_the_memory_server_s_state_is_what_its_calls_left_and_each_session_starts_empty(npm_servers: Path) -> None:
    env = memory_server(npm_servers)
    entity = {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}

    async def go() -> tuple[Any, Any, Any]:
        async with env.session() as session:
            await session.call("create_entities", {"entities": [entity]})
            await session.call("add_observations", {"observations": [{"entityName": "Ada", "contents": ["born 1815"]}]})
            after = await session.state()
        async with env.session() as other:
            fresh = await other.state()
        async with env.session() as replay:
            await replay.call("create_entities", {"entities": [entity]})
            await replay.call("add_observations", {"observations": [{"entityName": "Ada", "contents": ["born 1815"]}]})
            replayed = await replay.state()
        return after, fresh, replayed

    after, fresh, replayed = asyncio.run(go())
    assert after["tool"]["entities"] == [{**entity, "observations": ["wrote the first program", "born 1815"]}]
    assert list(after["files"]) == ["memory.jsonl"]
    assert fresh == {"tool": {"entities": [], "relations": []}, "files": {}}
    assert replayed == after


def test_the_memory_server_lists_its_graph_tools(npm_servers: Path) -> None:
    [tool] = asyncio.run(memory_server(npm_servers).list_tools())
    assert {"create_entities", "read_graph", "search_nodes"} <= {f.name for f in tool.functions}
    assert definition_problems(tool) == []


@pytest.fixture(scope="module")
def everything_url(npm_servers: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """server-everything in its streamable HTTP mode, on a free port of the loopback. A port found
    free can be taken before the server binds it (the other worker's Ray and Prefect take ports
    all the time): a server that exits is started again on another port, up to three times."""
    log = tmp_path_factory.mktemp("everything") / "server.log"
    for _ in range(3):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        with log.open("ab") as out:
            server = subprocess.Popen(
                ["node", str(npm_servers / "server-everything" / "dist" / "index.js"), "streamableHttp"],
                env={**os.environ, "PORT": str(port)}, stdout=out, stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + 60
            while server.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                except OSError:
                    assert time.monotonic() < deadline, f"server-everything not listening after 60 s:\n{log.read_text()[-3000:]}"
                    time.sleep(0.1)
                    continue
                yield f"http://127.0.0.1:{port}/mcp"
                return
        finally:
            server.terminate()
            server.wait(10)
    pytest.fail(f"server-everything exited three times:\n{log.read_text()[-3000:]}")


def test_a_server_over_streamable_http_lists_and_runs_its_tools(everything_url: str) -> None:
    env = McpEnvironment(McpSourceSettings(name="everything", url=everything_url, deny=["trigger-long-running-operation"]))

    async def go() -> tuple[Any, Any, Any, Any]:
        [tool] = await env.list_tools()
        async with env.session() as session:
            return tool, await session.call("echo", {"message": "hi"}), await session.call("get-sum", {"a": 2, "b": 3}), await session.state()

    tool, echo, total, state = asyncio.run(go())
    names = {f.name for f in tool.functions}
    assert {"echo", "get-sum"} <= names and "trigger-long-running-operation" not in names
    assert tool.provenance["mcp"]["transport"] == "http"
    assert (echo.content, echo.is_error) == ("Echo: hi", False)
    assert total.content == "The sum of 2 and 3 is 5."
    assert state is None  # no state_tool: a server that is not ours has no state we can read


def test_an_http_server_that_cannot_be_reached_is_exec_start_failed() -> None:
    from toolfactory.executable.session import ExecutionFailed

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = McpEnvironment(McpSourceSettings(name="gone", url=f"http://127.0.0.1:{port}/mcp", start_timeout_seconds=10))
    with pytest.raises(ExecutionFailed) as caught:
        asyncio.run(env.list_tools())
    assert caught.value.reason == "exec_start_failed" and "gone" in caught.value.message
