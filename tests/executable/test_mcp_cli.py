"""`toolfactory tools import --format mcp`: one server's tools, checked as the tools stage checks them.
In process (typer's runner): a start of the command line costs seconds, the servers are real."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner, Result

from toolfactory.cli import app

SERVER = str(Path(__file__).with_name("hostile_mcp_server.py"))


def toolfactory(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def tools_import(*args: str) -> Result:
    return toolfactory("tools", "import", "--format", "mcp", *args)


def test_a_server_from_a_file_entry_is_imported_and_written_as_a_catalog(tmp_path: Path) -> None:
    entry = tmp_path / "hostile.yaml"
    entry.write_text(f"name: hostile\ncommand: {sys.executable}\nargs: [{SERVER}, ok]\ndeny: [bad_schema]\n")
    out = tmp_path / "catalog.json"
    result = tools_import(str(entry), "--out", str(out))
    assert result.exit_code == 0, result.stderr
    assert "MCP source hostile: 1 tools (10 functions) imported, 0 rejected" in result.stdout
    [tool] = json.loads(out.read_text())["tools"]
    assert tool["provenance"]["executable"] == {"kind": "mcp", "source": "hostile"}


def test_a_tool_with_an_invalid_schema_is_a_reason_coded_rejection(tmp_path: Path) -> None:
    result = tools_import("--command", f"{sys.executable} {SERVER} ok", "--name", "hostile")
    assert result.exit_code == 0, result.stderr
    assert "MCP source hostile: 0 tools (0 functions) imported, 1 rejected" in result.stdout
    assert "tool_invalid_schema: hostile.bad_schema.parameters" in result.stdout


def test_a_server_that_does_not_start_is_one_line_and_exit_1() -> None:
    result = tools_import("--command", "no-such-mcp-server-here --flag")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: exec_start_failed: MCP source no-such-mcp-server-here (no-such-mcp-server-here)")


def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path) -> None:
    both = tools_import("--command", "x", "--url", "http://localhost/mcp")
    assert both.exit_code == 2 and "exactly one of --command and --url" in both.stderr
    entry = tmp_path / "bad.yaml"
    entry.write_text("name: s\ncommand: x\ntimeout: 3\n")
    bad = tools_import(str(entry))
    assert bad.exit_code == 2 and bad.stderr.strip() == f"error: {entry}: timeout: Extra inputs are not permitted"
    mixed = toolfactory("tools", "import", str(entry), "--format", "openai", "--command", "x")
    assert mixed.exit_code == 2 and "are for --format mcp" in mixed.stderr


def test_a_generic_script_is_named_for_its_package(tmp_path: Path) -> None:
    # `node …/server-memory/dist/index.js` is the package server-memory, not "index".
    package = tmp_path / "node_modules" / "@scope" / "server-notes"
    (package / "dist").mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": "@scope/server-notes", "version": "1.0.0"}))
    script = package / "dist" / "index.js"
    script.write_text("")
    result = tools_import("--command", f"node {script}")
    assert "MCP source server-notes" in result.stdout + result.stderr, result.stdout + result.stderr
    bare = tmp_path / "tools" / "weather" / "src" / "__main__.py"
    bare.parent.mkdir(parents=True)
    bare.write_text("")
    result = tools_import("--command", f"{sys.executable} {bare}")
    assert "MCP source weather" in result.stdout + result.stderr, result.stdout + result.stderr
