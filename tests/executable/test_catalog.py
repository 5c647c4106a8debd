"""The catalog of ready tool sources (docs/tools/catalog.md): each MCP preset and each of BFCL's
environments is started from its preset alone and vetted by the real `vet()`, confined and
offline. Each must start, list its tools, and have at least one that works here.

A source whose package is not installed (`make mcp-servers`, the `test` extra, bfcl-eval) skips
with the install command, and fails under CI."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import _ci
from toolfactory.errors import ConfigError
from toolfactory.executable.mcp import McpEnvironment, McpSourceSettings
from toolfactory.executable.mcp.presets import PRESETS, McpPreset, find_executable
from toolfactory.executable.python_env import PythonEnvironment
from toolfactory.executable.settings import BFCL_INSTALL, BFCL_PACKAGE, BFCL_PRESETS, PythonEnvironmentSettings
from toolfactory.executable.vetting import SourceCard, vet

REPO = Path(__file__).resolve().parents[2]
#: Wall time one source's vetting may take on a loaded machine.
VET_SECONDS = float(os.environ.get("TOOLFACTORY_CATALOG_VET_SECONDS", "150"))
#: Wall time an HTTP server of the catalog has to listen on its port.
SERVE_SECONDS = float(os.environ.get("TOOLFACTORY_CATALOG_SERVE_SECONDS", "60"))


def missing(reason: str) -> None:
    if _ci():
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _from_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    # A preset looks for npm servers in build/mcp-servers of the current directory.
    monkeypatch.chdir(REPO)


def vetted(environment: McpEnvironment | PythonEnvironment) -> SourceCard:
    card = asyncio.run(vet(environment, timeout_seconds=VET_SECONDS))
    assert card.failure is None, card.failure
    assert card.tools, f"{card.source} listed no tools"
    working = card.working()
    assert working, f"{card.source}: no tool works here: " + "; ".join(f"{t.name} {t.status}: {t.answer[:80]}" for t in card.tools)
    return card


STDIO = sorted(name for name, preset in PRESETS.items() if preset.transport == "stdio")
HTTP = sorted(name for name, preset in PRESETS.items() if preset.transport == "http")


@pytest.mark.parametrize("preset", STDIO)
def test_each_stdio_preset_starts_lists_and_has_tools_that_work_offline(preset: str) -> None:
    entry = PRESETS[preset]
    if find_executable(entry.executable) is None:
        missing(f"{entry.executable} is not installed: {entry.install}")
    vetted(McpEnvironment(McpSourceSettings(name=preset, preset=preset)))


@pytest.fixture
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The HTTP preset's server on a free port of the loopback, started as its preset says. A
    port found free can be taken before the server binds it: a server that exits is started
    again on another port, up to three times."""
    entry: McpPreset = PRESETS[request.param]
    log = tmp_path / "server.log"
    for _ in range(3):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        try:
            argv, env = entry.serve_argv(port, str(tmp_path / "files"))
        except LookupError as exc:
            missing(str(exc))
        with log.open("w") as out:
            server = subprocess.Popen(argv, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
        try:
            deadline = time.monotonic() + SERVE_SECONDS
            while server.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, f"{request.param} not listening after {SERVE_SECONDS:g} s:\n{log.read_text()[-3000:]}"
                    _pause(server)
            else:
                continue
            yield f"http://127.0.0.1:{port}/mcp"
            return
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
    pytest.fail(f"{request.param} exited three times:\n{log.read_text()[-3000:]}")


def _pause(server: subprocess.Popen[bytes]) -> None:
    """Wait a tenth of a second for the server to exit, as the pause between two tries to connect."""
    try:
        server.wait(0.1)
    except subprocess.TimeoutExpired:
        pass


@pytest.mark.parametrize("served", HTTP, indirect=True)
def test_each_http_preset_served_as_documented_has_tools_that_work(served: str, request: pytest.FixtureRequest) -> None:
    preset = request.node.callspec.params["served"]
    settings = McpSourceSettings(name=preset, preset=preset, url=served)
    assert settings.transport == "http" and settings.url == served
    vetted(McpEnvironment(settings))


@pytest.mark.parametrize("preset", sorted(BFCL_PRESETS))
def test_each_bfcl_environment_of_the_catalog_has_tools_that_work(preset: str) -> None:
    if importlib.util.find_spec(BFCL_PACKAGE) is None:
        missing(f"BFCL's environments need bfcl-eval: {BFCL_INSTALL}")
    vetted(PythonEnvironment(PythonEnvironmentSettings(name=preset.lower(), preset=preset)))


def test_a_preset_fills_in_what_the_entry_does_not_set_and_keeps_what_it_does() -> None:
    memory = McpSourceSettings(name="notes", preset="memory", state_files=False)
    assert memory.env == {"MEMORY_FILE_PATH": "${TOOLFACTORY_WORKDIR}/memory.jsonl"} and memory.state_tool == "read_graph"
    assert memory.state_files is False and memory.transport == "stdio"
    assert os.path.basename(memory.command or "") == "mcp-server-memory"
    assert McpSourceSettings(name="x", preset="everything-http").url == "http://127.0.0.1:3001/mcp"


def test_an_unknown_preset_is_a_config_error_naming_the_field_and_the_known_ones() -> None:
    with pytest.raises(ConfigError) as error:
        McpSourceSettings(name="notes", preset="memroy")
    assert "tools.mcp[notes].preset: unknown preset 'memroy'" in str(error.value)
    assert all(name in str(error.value) for name in PRESETS)


def test_a_preset_whose_program_is_absent_says_how_to_install_it_when_a_session_starts(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no build/mcp-servers here
    monkeypatch.setenv("PATH", str(tmp_path))
    settings = McpSourceSettings(name="notes", preset="memory")
    if find_executable("mcp-server-memory") is not None:
        pytest.skip("mcp-server-memory is installed beside the interpreter")
    with pytest.raises(ConfigError) as error:
        settings.resolved_args(str(tmp_path))
    assert "tools.mcp[notes].preset: memory needs mcp-server-memory" in str(error.value)
    assert PRESETS["memory"].install in str(error.value)


# --- the SQL database: mcp-server-sqlite on shop.db, made anew for every session ----------------

SHOP_TABLES = "[{'name': 'customers'}, {'name': 'products'}, {'name': 'orders'}]"
NEW_CUSTOMER = "INSERT INTO customers (name, city, email) VALUES ('Edsger Dijkstra', 'Austin', 'edsger@example.com')"


def sqlite_environment() -> McpEnvironment:
    entry = PRESETS["sqlite"]
    if find_executable(entry.executable) is None:
        missing(f"{entry.executable} is not installed (make mcp-servers): {entry.install}")
    return McpEnvironment(McpSourceSettings(name="shop", preset="sqlite"))


def test_the_sql_database_is_vetted_deterministic_reproducible_and_resettable() -> None:
    card = vetted(sqlite_environment())
    tools = {tool.name: tool for tool in card.tools}
    assert set(tools) == {"read_query", "write_query", "create_table", "list_tables", "describe_table", "append_insight"}
    assert tools["list_tables"].answer.startswith(SHOP_TABLES[:-1])  # the initial database's tables (then the probe's)
    assert all(tool.deterministic for tool in card.tools), [t.name for t in card.tools if not t.deterministic]
    assert tools["list_tables"].changes_state is False and tools["read_query"].changes_state is False
    assert card.state_reproducible is True, "two fresh sessions that made the same calls left different databases"
    assert card.warm is True, "a reset session did not start from the initial database"


def test_a_write_changes_the_databases_state_and_a_read_does_not() -> None:
    async def run() -> None:
        async with sqlite_environment().session() as session:
            initial = await session.state()
            assert list(initial["files"]) == ["shop.db"] and initial["files"]["shop.db"].startswith("sqlite:")
            read = await session.call("read_query", {"query": "SELECT name FROM customers WHERE city = 'London'"})
            assert read.content == "[{'name': 'Ada Lovelace'}]" and await session.state() == initial
            written = await session.call("write_query", {"query": NEW_CUSTOMER})
            assert written.content == "[{'affected_rows': 1}]" and await session.state() != initial

    asyncio.run(run())


def test_a_row_written_in_one_session_is_not_in_the_next_one_after_a_reset_or_a_fresh_start() -> None:
    environment = sqlite_environment()
    count = {"query": "SELECT count(*) AS n FROM customers"}

    async def run() -> None:
        async with environment.session() as session:
            initial = await session.state()
            await session.call("write_query", {"query": NEW_CUSTOMER})
            await session.call("create_table", {"query": "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)"})
            assert (await session.call("read_query", count)).content == "[{'n': 5}]"
            await session.reset()  # what the pool does between two dialogues on one process
            assert (await session.call("read_query", count)).content == "[{'n': 4}]"
            assert (await session.call("list_tables", {})).content == SHOP_TABLES
            assert await session.state() == initial
        async with environment.session() as fresh:
            assert (await fresh.call("read_query", count)).content == "[{'n': 4}]"
            assert await fresh.state() == initial

    asyncio.run(run())


def test_two_sessions_that_make_the_same_calls_end_in_the_same_state_by_content() -> None:
    environment = sqlite_environment()
    calls = [("create_table", {"query": "CREATE TABLE visits (customer_id INTEGER, day TEXT)"}),
             ("write_query", {"query": "INSERT INTO visits VALUES (1, '2024-04-01'), (3, '2024-04-02')"}),
             ("write_query", {"query": "UPDATE products SET stock = stock - 1 WHERE id = 2"}),
             ("write_query", {"query": "DELETE FROM orders WHERE id = 5"})]

    async def final_state() -> object:
        async with environment.session() as session:
            for name, arguments in calls:
                assert not (await session.call(name, arguments)).content.startswith(("Error", "Database error"))
            return await session.state()

    first, second = asyncio.run(final_state()), asyncio.run(final_state())
    assert first == second and first["files"]["shop.db"].startswith("sqlite:")  # type: ignore[index]


def test_the_make_target_installs_the_sql_database_with_the_presets_pins() -> None:
    entry = PRESETS["sqlite"]
    pins = f"{entry.package.split()[1]}=={entry.version} {' '.join(entry.venv_with)}"
    assert f"MCP_SQLITE  := {pins}" in (REPO / "Makefile").read_text()
    assert entry.install.endswith(f"bin/pip install {pins}") and "build/mcp-servers/py/mcp-server-sqlite" in entry.install
