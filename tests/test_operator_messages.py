"""What the command line tells its operator: errors on one line naming the file or option at
fault, a full disk in plain words, help that reads as written, and the advice and times of
`stats`. The command line runs through its own entry point (`toolfactory.cli.main`) in this
process, or in a subprocess where a fresh process is what is checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from toolfactory import cli
from toolfactory.models import Tool
from toolfactory.run.stats import StatsDB

TOOLFACTORY = str(Path(sys.executable).with_name("toolfactory"))
Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def toolfactory(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Run:
    """`toolfactory(*args)`: `toolfactory.cli.main` with these arguments, its exit code and output
    as a subprocess's would be (for commands that start no Prefect, Ray or simulator)."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["toolfactory", *args])
        try:
            cli.main()
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["toolfactory", *args], code, out, err)

    return run


def one_error(result: subprocess.CompletedProcess[str]) -> str:
    """The one `error:` line of a failed command (nothing else on stderr, no traceback)."""
    assert "Traceback" not in result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ")
    return line


# --- the config file ------------------------------------------------------------------------


def test_a_yaml_syntax_error_in_the_config_is_one_line_with_its_file_line_and_column(toolfactory: Run, tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("llm:\n  provider: [simulator\nrun:\n  seed: 1\n")
    result = toolfactory("stats", "--config", str(config))
    assert result.returncode == 2
    assert one_error(result) == (f"error: config file {config} is not valid YAML: line 3, column 4: expected ',' or ']', "
                                 "but got ':' (while parsing a flow sequence at line 2, column 13)")


def test_a_yaml_syntax_error_in_a_tool_source_file_is_one_line_naming_it(toolfactory: Run, tmp_path: Path) -> None:
    source = tmp_path / "tools.yaml"
    source.write_text("- name: weather\n  description: [unclosed\n")
    result = toolfactory("run", "--set", f"tools.files=[{{path: {source}, format: catalog}}]", "--set", f"storage.root={tmp_path}")
    assert result.returncode == 2
    message = one_error(result)
    assert message.startswith(f"error: tools.files: {source} is not valid YAML: line 3, column 1: ") and "unicode string" not in message


def test_a_binary_config_file_is_one_line_naming_it_and_exit_2(toolfactory: Run, tmp_path: Path) -> None:
    config = tmp_path / "python.yaml"
    config.write_bytes(Path(sys.executable).resolve().read_bytes()[:4096])  # an executable, not text
    result = toolfactory("check", "--config", str(config))
    assert result.returncode == 2
    message = one_error(result)
    assert message.startswith(f"error: config file {config} is not UTF-8 text") and "UnicodeDecodeError" not in message


def test_a_usage_error_is_one_line_naming_the_commands_help(toolfactory: Run) -> None:
    result = toolfactory("export")
    assert result.returncode == 2
    assert one_error(result) == "error: Missing argument 'RUN_ID' (see `toolfactory export --help`)"


# --- --out ----------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["export", "some-run", "--format", "openai"], ["retriever", "some-run", "--no-embeddings"],
                                     ["eval", "paths.jsonl", "--format", "openai"], ["verify", "data.jsonl", "--format", "openai"]])
def test_an_out_folder_that_cannot_be_written_is_blamed_on_out(toolfactory: Run, tmp_path: Path, command: list[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    storage = ["--set", f"storage.root={tmp_path / 'data'}"] if command[0] != "verify" else []
    for out, why in ((blocker, f"{blocker} is a file, not a folder"),
                     (blocker / "sub", f"cannot create the folder {blocker / 'sub'}: Not a directory"),
                     (Path("/proc/toolfactory-out"), "cannot create the folder /proc/toolfactory-out: No such file or directory")):
        result = toolfactory(*command, "--out", str(out), *storage)
        assert result.returncode == 2
        assert one_error(result) == f"error: --out: {why}"


# --- tools import of OpenAPI documents ------------------------------------------------------


OPERATIONS = {
    "/pets": {"get": {"operationId": "listPets", "summary": "List the pets of the store.",
                      "parameters": [{"$ref": "#/components/parameters/Nowhere"}], "responses": {"200": {"description": "ok"}}}},
    "/pets/{id}": {
        "get": {"operationId": "getPet", "summary": "Get one pet by its id.",
                "parameters": [{"$ref": "#/components/parameters/PetId"}], "responses": {"200": {"description": "ok"}}},
        "delete": {"operationId": "deletePet", "summary": "Delete one pet by its id.",
                   "parameters": [{"$ref": "#/components/parameters/PetId"}],
                   "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Reason"}}}},
                   "responses": {"200": {"description": "ok"}}},
    },
}
# PetId is there; Reason is, but it points to a schema that is not.
COMPONENTS = {"parameters": {"PetId": {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}},
              "schemas": {"Reason": {"type": "object", "properties": {"why": {"$ref": "#/components/schemas/Missing"}}}}}


def openapi(tmp_path: Path, paths: dict[str, Any]) -> Path:
    document = tmp_path / "pets.json"
    document.write_text(json.dumps({"openapi": "3.0.0", "info": {"title": "Pets", "version": "1", "description": "A pet store."},
                                    "servers": [{"url": "https://pets.example.com"}], "paths": paths, "components": COMPONENTS}))
    return document


def test_an_openapi_file_whose_only_operation_refers_to_nowhere_exits_2_naming_the_reference(toolfactory: Run, tmp_path: Path) -> None:
    document, catalog = openapi(tmp_path, {"/pets": OPERATIONS["/pets"]}), tmp_path / "catalog.json"
    result = toolfactory("tools", "import", str(document), "--format", "openapi", "--out", str(catalog))
    assert result.returncode == 2 and not catalog.exists()
    assert one_error(result) == (f"error: {document}: no tool imported: no operation left: "
                                 "GET /pets: unresolvable reference '#/components/parameters/Nowhere'")


def test_an_openapi_file_keeps_its_good_operations_and_reports_the_others(toolfactory: Run, tmp_path: Path) -> None:
    document, catalog = openapi(tmp_path, OPERATIONS), tmp_path / "catalog.json"
    result = toolfactory("tools", "import", str(document), "--format", "openapi", "--out", str(catalog))
    assert result.returncode == 0, result.stderr
    assert "1 tools (1 functions) imported, 0 rejected" in result.stdout
    left_out = ["GET /pets: unresolvable reference '#/components/parameters/Nowhere'",
                # Followed through the schema it names: Reason is there, what it refers to is not.
                "DELETE /pets/{id}: unresolvable reference '#/components/schemas/Missing'",
                "components/schemas/Reason: unresolvable reference '#/components/schemas/Missing'"]
    assert [f"  left out of Pets: {line}" for line in left_out] == [line for line in result.stdout.splitlines() if "left out" in line]
    [tool] = json.loads(catalog.read_text())["tools"]
    assert [f["name"] for f in tool["functions"]] == ["getPet"] and list(tool["openapi"]["paths"]) == ["/pets/{id}"]
    assert list(tool["openapi"]["paths"]["/pets/{id}"]) == ["get"] and tool["provenance"]["left_out"] == left_out


# --- a full disk ----------------------------------------------------------------------------


def _fill(folder: Path) -> None:
    with (folder / "filler").open("wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass


def test_a_full_disk_is_said_in_plain_words_naming_the_file(small_tmpfs: Any) -> None:
    from flows.full_disk import full_disk_state

    disk = small_tmpfs(size="4m")
    db = StatsDB(disk / "stats.duckdb")
    db.start_run("r1", "2026-01-01T00:00:00+00:00", str(disk), {}, {}, "2026-01-01T00:00:00+00:00")
    _fill(disk)
    with pytest.raises(Exception) as raised:
        db.record_message("r1", "x" * 2_000_000)
    assert "Could not write file" in str(raised.value)  # DuckDB's own words, in an error of its own
    state = full_disk_state(raised.value, "toolfactory rerun r1 --set storage.root=/data")
    # The database file or its write-ahead log, whichever DuckDB was writing.
    assert state.message.startswith(f"stopped: No space left on device (writing {disk / 'stats.duckdb'}")
    assert state.message.endswith("); free some, then finish the run with: toolfactory rerun r1 --set storage.root=/data")
    assert "IOException" not in state.message and "CHECKPOINT" not in state.message


def test_a_command_that_meets_a_full_disk_says_so_in_one_line(small_tmpfs: Any) -> None:
    disk = small_tmpfs(size="4m")
    StatsDB(disk / "stats.duckdb").start_run("r1", "2026-01-01T00:00:00+00:00", str(disk), {}, {}, "2026-01-01T00:00:00+00:00")
    _fill(disk)
    # A fresh process: it brings the stats cache up to date (a write), which the disk refuses.
    result = subprocess.run([TOOLFACTORY, "stats", "--set", f"storage.root={disk}", "--set", "stats.path=" + str(disk / "stats.duckdb")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    message = one_error(result)
    assert message.startswith(f"error: No space left on device (writing {disk / 'stats.duckdb'}")
    assert message.endswith("free some, then run the command again")
    assert "IOException" not in message and "CHECKPOINT" not in message


# --- help -----------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["run"], ["stats"], ["rerun"], ["export"], ["tools", "import"]])
def test_help_fits_80_columns_shows_flags_as_flags_and_lists_each_command_on_one_line(
        toolfactory: Run, monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = toolfactory(*command, "--help")
    assert result.returncode == 0 and result.stdout.startswith(f"Usage: toolfactory {' '.join(command)}".rstrip() + " ")
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "<bool>" not in result.stdout and "<list[str]>" not in result.stdout
    if not command:  # the list of commands: each its own whole line, none cut short
        listed = lines[lines.index("Commands:") + 1:]
        assert len(listed) == len(cli.app.registered_commands) + len(cli.app.registered_groups)
        assert all(not line.endswith("...") and line.startswith("  ") and not line.startswith("   ") for line in listed)
    else:
        assert "--set FIELD=VALUE" in result.stdout or command == ["tools", "import"]


def test_simulator_serve_help_names_the_command_that_runs_it() -> None:
    result = subprocess.run([TOOLFACTORY, "simulator", "serve", "--help"], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "COLUMNS": "80"})
    assert result.returncode == 0
    assert result.stdout.startswith("usage: toolfactory simulator serve ") and "python -m" not in result.stdout
    assert "--config FILE and --set llm.simulator.FIELD=VALUE" in " ".join(result.stdout.split())
    bad = subprocess.run([TOOLFACTORY, "simulator", "serve", "--rate-429", "5"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert one_error(bad) == ("error: toolfactory simulator serve: --rate-429: Input should be less than or equal to 1 (got 5.0) "
                              "(see toolfactory simulator serve --help)")


# --- stats ----------------------------------------------------------------------------------


def test_stats_of_a_run_executed_twice_gives_its_first_start_its_attempts_and_the_last_attempt(toolfactory: Run, tmp_path: Path) -> None:
    db = StatsDB(tmp_path / "stats.duckdb")
    db.start_run("r1", "2026-01-01T03:00:00+00:00", str(tmp_path), {}, {}, "2026-01-01T03:00:00+00:00")
    db.finish_run("r1", "failed", "2026-01-01T03:10:00+00:00")
    db.start_run("r1", "2026-01-01T03:00:00+00:00", str(tmp_path), {}, {}, "2026-01-02T09:00:00+00:00")  # the re-run, a day later
    db.finish_run("r1", "completed", "2026-01-02T09:02:00+00:00")
    result = toolfactory("stats", "r1", "--json", "--set", f"storage.root={tmp_path}")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["started_at"], summary["finished_at"]) == ("2026-01-01T03:00:00.000+00:00", "2026-01-02T09:02:00.000+00:00")
    assert summary["wall_s"] == 30 * 3600 + 120 and summary["attempts"] == 2
    assert summary["last_attempt"] == {"started_at": "2026-01-02T09:00:00.000+00:00", "wall_s": 120.0}
    text = toolfactory("stats", "r1", "--set", f"storage.root={tmp_path}")
    assert "executed 2 times: first started 2026-01-01T03:00:00.000+00:00, last started 2026-01-02T09:00:00.000+00:00 (120 s)" in text.stdout


def test_a_tool_that_names_no_domain_is_counted_under_one_clear_label() -> None:
    from toolfactory.stages.base import StageOutput
    from toolfactory.stages.pool.stage import profile

    out = StageOutput()
    for tool in (Tool(name="a", category="", domain_path=[]), Tool(name="b", category="Weather"),
                 Tool(name="c", category="", domain_path=["  "]), Tool(name="d", domain_path=["Travel", "Flights"])):
        tool.provenance["pool"] = "new"
        profile(out, tool)
    assert dict(out.profile["tools_by_domain"]) == {"(no domain)": 2, "Weather": 1, "Travel": 1}
