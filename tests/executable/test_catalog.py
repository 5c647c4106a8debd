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
