"""Published MCP servers known to run offline, by preset name (``tools.mcp: [{name: notes,
preset: memory}]``).

A preset holds what a user would otherwise have to find in each server's README: the program
to start, its arguments, where it keeps its data (in the session's own folder, so that sessions
stay apart), and which state setting shows what a call changed. The settings class
(:mod:`toolfactory.executable.mcp.settings`) fills an entry's unset fields from its preset.

A preset may give each session's folder something to start with (:class:`InitialDatabase`): it
is made when the session starts and again when a warm session is reset, so that every dialogue
starts from the same files.

A server over streamable HTTP is not started by the factory: its preset gives the default
endpoint, and :meth:`McpPreset.serve_argv` the command line that serves it there.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

#: Where `make mcp-servers` installs the npm servers (relative to the current directory).
NPM_BIN = Path("build") / "mcp-servers" / "node_modules" / ".bin"
#: Where `make mcp-servers` puts a PyPI server that needs releases of its own (the 1.x MCP SDK):
#: a venv per server, named after its program, as uvx or pipx would.
PY_VENVS = Path("build") / "mcp-servers" / "py"
#: The SQL scripts of the presets' initial databases.
SEEDS = Path(__file__).parent / "seeds"
WORKDIR_REF = "${TOOLFACTORY_WORKDIR}"

# mcp-server-git serves one repository: the session's folder is made one (with an empty first
# commit, so that log, show and branch have something to read) before the server starts. "$0"
# is the server's program, passed after the script.
_GIT_REPOSITORY = ('git init -q -b main && git commit -q --allow-empty -m "Initial commit" '
                   '&& exec "$0" --repository .')
_GIT_IDENTITY = {"GIT_AUTHOR_NAME": "toolfactory", "GIT_AUTHOR_EMAIL": "toolfactory@localhost",
                 "GIT_COMMITTER_NAME": "toolfactory", "GIT_COMMITTER_EMAIL": "toolfactory@localhost"}


@dataclass(frozen=True)
class InitialDatabase:
    """An SQLite database that each session's folder starts with, made from an SQL script
    shipped with the factory (a script rather than a database file: it can be read and
    reviewed, and it makes the same content every time)."""

    file: str
    """Its name in the session's folder."""
    script: str
    """The script's name in :data:`SEEDS`."""

    def make(self, folder: Path) -> None:
        with closing(sqlite3.connect(folder / self.file)) as conn:
            conn.executescript((SEEDS / self.script).read_text(encoding="utf-8"))


@dataclass(frozen=True)
class McpPreset:
    """One published server, and how the factory runs it."""

    summary: str
    """What the server is, in a line."""
    package: str
    """Registry and package name, as `npm @scope/name` or `PyPI name`."""
    version: str
    """The release tested here."""
    executable: str
    """The program the package installs (found at session start: PATH, then `build/mcp-servers`)."""
    args: tuple[str, ...] = ()
    """Its arguments over stdio; `${TOOLFACTORY_WORKDIR}` is the session's folder."""
    env: dict[str, str] = field(default_factory=dict)
    launcher: tuple[str, ...] = ()
    """A command that runs before the server and is given its program as last argument (`sh -c`
    preparing the session's folder); empty: the program is started directly."""
    state_tool: str | None = None
    state_files: bool = False
    deny: tuple[str, ...] = ()
    """Tools left out: they wait for a person or for the client's own model."""
    transport: Literal["stdio", "http"] = "stdio"
    port: int | None = None
    """Over HTTP: the default port of the endpoint `http://127.0.0.1:<port>/mcp`."""
    serve: tuple[str, ...] = ()
    """Over HTTP: the program's arguments that serve it; `{port}` and `{folder}` are filled in."""
    serve_env: dict[str, str] = field(default_factory=dict)
    venv_with: tuple[str, ...] = ()
    """Releases the server needs that the factory's own venv cannot hold (`mcp==1.30.0` for a
    server built on the 1.x SDK): it is installed with them into a venv of its own."""
    initial_database: InitialDatabase | None = None
    """What each session's folder starts with (see :meth:`prepare`)."""

    @property
    def install(self) -> str:
        """The command that installs the server for a user."""
        registry, name = self.package.split(" ", 1)
        if registry == "npm":
            return f"npm install --prefix build/mcp-servers {name}@{self.version}"
        if self.venv_with:
            venv = (PY_VENVS / self.executable).as_posix()
            return f"python -m venv {venv} && {venv}/bin/pip install {name}=={self.version} {' '.join(self.venv_with)}"
        return f"pip install {name}=={self.version}"

    def prepare(self, folder: Path) -> None:
        """Put what a session starts with into its (empty) working folder: when the session
        starts, and again after a reset has emptied it."""
        if self.initial_database is not None and self.transport == "stdio":
            self.initial_database.make(folder)

    @property
    def url(self) -> str | None:
        return f"http://127.0.0.1:{self.port}/mcp" if self.transport == "http" else None

    def fields(self, executable: str) -> dict[str, object]:
        """The settings this preset gives an entry, with `executable` as the program's path."""
        if self.transport == "http":
            return {"url": self.url, "state_tool": self.state_tool, "deny": list(self.deny)}
        argv = [*self.launcher, executable, *self.args]
        return {"command": argv[0], "args": argv[1:], "env": dict(self.env), "state_tool": self.state_tool,
                "state_files": self.state_files, "deny": list(self.deny)}

    def serve_argv(self, port: int, folder: str) -> tuple[list[str], dict[str, str]]:
        """Over HTTP: the command line and extra environment that serve the endpoint on `port`,
        keeping its files in `folder`. Raises LookupError when the program is not installed."""
        program = find_executable(self.executable)
        if program is None:
            raise LookupError(f"{self.executable} is not installed ({self.install})")
        fill = {"port": str(port), "folder": folder}
        return ([program, *(a.format(**fill) for a in self.serve)],
                {k: v.format(**fill) for k, v in self.serve_env.items()})


def find_executable(name: str) -> str | None:
    """`name` when it is on PATH; else its path in `build/mcp-servers` of the current directory
    (`make mcp-servers`: `node_modules/.bin` for npm, `py/<name>/bin` for a PyPI server in a venv
    of its own), or beside the factory's own interpreter (a PyPI server installed with the
    factory into a venv that is not on PATH); None when absent."""
    if shutil.which(name):
        return name
    for folder in (Path.cwd() / NPM_BIN, Path.cwd() / PY_VENVS / name / "bin", Path(sys.executable).parent):
        found = shutil.which(name, path=str(folder))
        if found:
            return os.path.abspath(found)
    return None


PRESETS: dict[str, McpPreset] = {
    "filesystem": McpPreset(
        "Read, write, move, search and list files, confined to the session's folder.",
        "npm @modelcontextprotocol/server-filesystem", "2026.8.31", "mcp-server-filesystem",
        args=(WORKDIR_REF,), state_files=True),
    "memory": McpPreset(
        "A knowledge graph of entities, relations and observations, kept in a JSON-lines file.",
        "npm @modelcontextprotocol/server-memory", "2026.8.31", "mcp-server-memory",
        env={"MEMORY_FILE_PATH": f"{WORKDIR_REF}/memory.jsonl"}, state_tool="read_graph", state_files=True),
    "sequential-thinking": McpPreset(
        "A scratchpad for step-by-step reasoning: numbered thoughts, revisions and branches.",
        "npm @modelcontextprotocol/server-sequential-thinking", "2026.8.31", "mcp-server-sequential-thinking"),
    "calculator": McpPreset(
        "Arithmetic and math expressions, statistics, dates, unit conversion, encodings, hashes.",
        "npm @coo-quack/calc-mcp", "2.1.1", "calc-mcp"),
    "everything": McpPreset(
        "The MCP reference server that exercises the protocol: echo, sums, resources, prompts.",
        "npm @modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything",
        args=("stdio",), deny=("trigger-long-running-operation",)),
    "everything-http": McpPreset(
        "server-everything in its streamable HTTP mode.",
        "npm @modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything",
        transport="http", port=3001, serve=("streamableHttp",), serve_env={"PORT": "{port}"},
        deny=("trigger-long-running-operation",)),
    "time": McpPreset(
        "The current time in a time zone, and conversions between zones.",
        "PyPI mcp-server-time", "2026.10.19", "mcp-server-time", args=("--local-timezone", "UTC")),
    "git": McpPreset(
        "Status, diffs, staging, commits, branches and log of a repository (the session's folder).",
        "PyPI mcp-server-git", "2026.10.19", "mcp-server-git",
        launcher=("sh", "-c", _GIT_REPOSITORY), env=_GIT_IDENTITY),
    "spreadsheet": McpPreset(
        "Excel workbooks (.xlsx) in the session's folder: sheets, cells, formulas, tables, CSV.",
        "PyPI excel-mcp-server", "2.2.2", "excel-mcp-server",
        args=("stdio", "--allow-dir", WORKDIR_REF), state_files=True),
    "spreadsheet-http": McpPreset(
        "excel-mcp-server in its streamable HTTP mode, its workbooks in one folder.",
        "PyPI excel-mcp-server", "2.2.2", "excel-mcp-server",
        transport="http", port=8017, serve=("streamable-http", "--port", "{port}", "--allow-dir", "{folder}")),
    # Built on the 1.x MCP SDK: installed with it into a venv of its own. It answers a refused or
    # failing query as text (`Error: …`, `Database error: …`), not as an MCP error.
    "sqlite": McpPreset(
        "An SQLite database (shop.db in the session's folder, with customers, products and orders): "
        "SELECT, INSERT/UPDATE/DELETE, CREATE TABLE, list and describe tables.",
        "PyPI mcp-server-sqlite", "2025.4.25", "mcp-server-sqlite",
        args=("--db-path", f"{WORKDIR_REF}/shop.db"), state_files=True, venv_with=("mcp==1.30.0",),
        initial_database=InitialDatabase("shop.db", "shop.sql")),
}
