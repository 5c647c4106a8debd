"""Executable sources nobody here wrote, vetted on this machine: what works offline, and why the
rest does not.

Every source of the catalog (docs/tools/catalog.md: the MCP presets, over stdio and streamable
HTTP, and BFCL's eight Python environments), plus published servers that are not in it because
they need the network or a key (`mcp-server-fetch`, `@modelcontextprotocol/server-github`,
`@modelcontextprotocol/server-brave-search`) or do not start with this machine's node
(`@bytebase/dbhub`). Those are installed into a temporary folder (a venv of their own for PyPI,
`npm install --prefix` for npm); what could not be installed is said.

Each source is vetted as `toolfactory tools vet` does (confined, no network). Reported per
source: transport, tools listed, admitted, the tools of each vetting class, session start and
median call time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json
from toolfactory.executable.mcp import McpEnvironment, McpSourceSettings
from toolfactory.executable.mcp.presets import PRESETS, find_executable
from toolfactory.executable.python_env import PythonEnvironment
from toolfactory.executable.settings import BFCL_PRESETS, PythonEnvironmentSettings
from toolfactory.executable.vetting import SourceCard, vet

REPO = Path(__file__).resolve().parents[1]
CLASSES = ("works", "needs_network", "needs_credentials", "errors", "fails_session")


@dataclass(frozen=True)
class Extra:
    """A published server outside the catalog, installed for this benchmark only."""

    name: str
    registry: str  # "npm" or "pypi"
    package: str  # name==version (PyPI) or name@version (npm)
    program: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


EXTRAS = (
    Extra("fetch", "pypi", "mcp-server-fetch==2026.10.24", "mcp-server-fetch"),
    Extra("github", "npm", "@modelcontextprotocol/server-github@2025.4.8", "mcp-server-github"),
    Extra("brave-search", "npm", "@modelcontextprotocol/server-brave-search@0.6.2", "mcp-server-brave-search"),
    # The same with a key that is not one: it starts, and its calls find no network.
    Extra("brave-search-key", "npm", "@modelcontextprotocol/server-brave-search@0.6.2", "mcp-server-brave-search",
          env={"BRAVE_API_KEY": "not-a-real-key"}),
    Extra("dbhub-sqlite", "npm", "@bytebase/dbhub@1.4.0", "dbhub",
          ("--transport", "stdio", "--dsn", "sqlite:///${TOOLFACTORY_WORKDIR}/db.sqlite")),
)


def install_extras(folder: Path, timeout: float) -> tuple[dict[str, str], dict[str, str]]:
    """Each extra's program path, and why the others could not be installed."""
    found: dict[str, str] = {}
    failed: dict[str, str] = {}
    npm = [e for e in EXTRAS if e.registry == "npm"]
    try:
        subprocess.run(["npm", "install", "--prefix", str(folder / "npm"), "--no-audit", "--no-fund", "--omit=optional",
                        "--loglevel=error", *dict.fromkeys(e.package for e in npm)], check=True, capture_output=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        failed.update({e.name: f"npm install failed: {exc}" for e in npm})
    for extra in npm:
        program = folder / "npm" / "node_modules" / ".bin" / extra.program
        if extra.name not in failed:
            found[extra.name] = str(program) if program.exists() else ""
    uv = Path(sys.executable).parent / "uv"
    for extra in (e for e in EXTRAS if e.registry == "pypi"):
        venv = folder / extra.name
        try:
            subprocess.run([str(uv), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, capture_output=True, timeout=timeout)
            subprocess.run([str(uv), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), extra.package],
                           check=True, capture_output=True, timeout=timeout)
            found[extra.name] = str(venv / "bin" / extra.program)
        except (OSError, subprocess.SubprocessError) as exc:
            failed[extra.name] = f"could not install {extra.package}: {str(getattr(exc, 'stderr', b'') or exc)[-200:]}"
    for name, program in list(found.items()):
        if not program:
            failed[name] = "installed without its program"
            del found[name]
    return found, failed


@contextmanager
def served(preset: str, folder: Path, wait_seconds: float) -> Iterator[str]:
    """An HTTP preset's server on a free loopback port, as its preset serves it."""
    argv, env = PRESETS[preset].serve_argv(_free_port(), str(folder / preset))
    port = int(env.get("PORT") or argv[argv.index("--port") + 1])
    log = folder / f"{preset}.log"
    with log.open("w") as out:
        server = subprocess.Popen(argv, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT, cwd=folder)
    try:
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{preset} is not listening: {log.read_text()[-300:]}") from None
                try:
                    server.wait(0.1)
                except subprocess.TimeoutExpired:
                    pass
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def row(name: str, origin: str, transport: str, card: SourceCard | None, failure: str | None = None) -> dict[str, Any]:
    counts = Counter(tool.status for tool in card.tools) if card else Counter()
    return {
        "source": name, "origin": origin, "transport": transport,
        "listed": len(card.tools) if card else 0, "admitted": len(card.admitted()) if card else 0,
        **{status: counts.get(status, 0) for status in CLASSES},
        "refused": sum(tool.refused for tool in card.tools) if card else 0,
        "deterministic": sum(bool(tool.deterministic) for tool in card.tools) if card else 0,
        "changes_state": sum(bool(tool.changes_state) for tool in card.tools) if card else 0,
        "start_s": round(card.start_seconds, 2) if card and card.start_seconds is not None else None,
        "call_ms": round(card.call_seconds * 1000, 1) if card and card.call_seconds is not None else None,
        "failure": failure or (card.failure if card else None),
        # One deciding answer per class that is not `works`: why those tools were rejected.
        "answers": {tool.status: tool.answer[:140] for tool in reversed(card.tools) if tool.status != "works"} if card else {},
    }


async def vet_one(name: str, origin: str, environment: Any, transport: str, timeout: float) -> dict[str, Any]:
    card = await vet(environment, timeout_seconds=timeout)
    result = row(name, origin, transport, card)
    print(f"{name}: {result['admitted']} of {result['listed']} admitted"
          + (f" ({result['failure'][:160]})" if result["failure"] else ""), file=sys.stderr, flush=True)
    return result


async def main_async(timeout: float, install_timeout: float) -> dict[str, Any]:
    os.chdir(REPO)  # the presets find the npm servers in build/mcp-servers
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="executable-sources-") as tmp:
        folder = Path(tmp)
        for name, preset in PRESETS.items():
            origin = preset.package
            if find_executable(preset.executable) is None:
                rows.append(row(name, origin, preset.transport, None, f"not installed ({preset.install})"))
                continue
            if preset.transport == "http":
                try:
                    with served(name, folder, timeout) as url:
                        rows.append(await vet_one(name, origin, McpEnvironment(McpSourceSettings(name=name, preset=name, url=url)), "http", timeout))
                except RuntimeError as exc:
                    rows.append(row(name, origin, "http", None, str(exc)))
            else:
                rows.append(await vet_one(name, origin, McpEnvironment(McpSourceSettings(name=name, preset=name)), "stdio", timeout))
        for preset_name in BFCL_PRESETS:
            environment = PythonEnvironment(PythonEnvironmentSettings(name=preset_name.lower(), preset=preset_name))
            rows.append(await vet_one(preset_name, "PyPI bfcl-eval", environment, "python", timeout))
        found, failed = install_extras(folder, install_timeout)
        for extra in EXTRAS:
            origin = f"{'npm' if extra.registry == 'npm' else 'PyPI'} {extra.package}"
            if extra.name in failed:
                rows.append(row(extra.name, origin, "stdio", None, failed[extra.name]))
                continue
            settings = McpSourceSettings(name=extra.name, command=found[extra.name], args=list(extra.args), env=extra.env)
            rows.append(await vet_one(extra.name, origin, McpEnvironment(settings), "stdio", timeout))
    return {"machine": machine_info(), "loadavg": Path("/proc/loadavg").read_text().split()[:3], "sources": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.executable_sources", description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=300.0, help="wall time of one source's vetting (s)")
    parser.add_argument("--install-timeout", type=float, default=600.0, help="wall time of one install command (s)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "executable_sources.json"))
    args = parser.parse_args(argv)
    data = asyncio.run(main_async(args.timeout, args.install_timeout))
    keys = ["source", "transport", "listed", "admitted", *CLASSES, "refused", "start_s", "call_ms"]
    print(table(keys, [[r[k] if r[k] is not None else "-" for k in keys] for r in data["sources"]]))
    for r in data["sources"]:
        if r["failure"]:
            print(f"{r['source']}: {r['failure'][:300]}")
        for status, answer in sorted(r["answers"].items()):
            print(f"{r['source']} {status}: {answer}")
    print(f"load average {' '.join(data['loadavg'])}; wrote {write_json(args.out, data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
