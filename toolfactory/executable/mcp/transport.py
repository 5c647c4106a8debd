"""A confined MCP server over stdio, with its output bounded.

The SDK's own stdio client reads a line of any length into memory and skips lines that are not
JSON-RPC without a limit, so a server that floods its stdout could exhaust the worker. This
transport starts the server through :func:`~toolfactory.executable.confine.confined` and bridges
its pipes to the streams :class:`mcp.ClientSession` reads and writes, counting every byte:

* past the current *budget* (set before each request: a call's is a multiple of the source's
  output cap) the server is stopped and the session fails with ``exec_output_flood``;
* a line that is not JSON-RPC is skipped (as the SDKs do: some servers print a banner), its bytes
  counted against the budget;
* the end of its stdout fails the session with ``exec_server_crashed`` (or
  ``exec_process_limit`` when the launcher killed it for forking past its limit);
* stopping closes its stdin, then signals the launcher, which kills every process it started.

Its stderr is read into a short tail for error messages, with the source's secrets blanked out.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

import anyio
import anyio.abc
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from toolfactory.executable.confine import EXIT_PROCESS_LIMIT, confined, signal_launcher
from toolfactory.executable.mcp.settings import WORKDIR, McpSourceSettings
from toolfactory.executable.session import (
    EXEC_CRASHED,
    EXEC_OUTPUT_FLOOD,
    EXEC_PROCESS_LIMIT,
    EXEC_START_FAILED,
    ExecutionFailed,
)

#: Variables of the factory's environment a server inherits (as the SDK's stdio client does),
#: plus PYTHONPATH, which the launcher itself may need to import the factory.
INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TZ", "PYTHONPATH")
STDERR_TAIL_BYTES = 2048
#: Output budget while starting and listing (a listing of many tools with long schemas is large).
LISTING_BYTES = 16 * 1024 * 1024
READ_CHUNK = 65536
#: Time a server gets to exit on its own once its stdin is closed, then the launcher gets to
#: kill everything after SIGTERM; a launcher that is still alive after both is killed outright.
EXIT_GRACE_SECONDS = 0.5
TERMINATE_SECONDS = 5.0
#: Time from the end of stdout to the launcher's exit status (which tells a crash from a kill).
STATUS_WAIT_SECONDS = 2.0


@dataclass
class Failure:
    reason: str
    message: str  # what happened, without the source's name


@dataclass
class StdioLink:
    """The running server: the streams for the SDK, and why it failed if it did."""

    source: str
    process: anyio.abc.Process
    read_stream: MemoryObjectReceiveStream[SessionMessage | Exception]
    write_stream: MemoryObjectSendStream[SessionMessage]
    secrets: list[str]
    budget: int
    used: int = 0
    failure: Failure | None = None
    closing: bool = False
    stderr_tail: bytes = b""
    _stopped: anyio.Event = field(default_factory=anyio.Event)

    def expect(self, budget: int) -> None:
        """Start counting the server's output for one request, up to `budget` bytes."""
        self.budget, self.used = budget, 0

    def fail(self, reason: str, message: str) -> None:
        if self.failure is None and not self.closing:
            self.failure = Failure(reason, message)

    def stderr(self) -> str:
        """The last lines the server wrote on stderr, secrets blanked, on one line."""
        text = self.stderr_tail.decode(errors="replace")
        for secret in self.secrets:
            text = text.replace(secret, "***")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return " | ".join(lines[-3:])[-400:]

    async def stop(self) -> None:
        """Stop the server and everything it started; bounded in time, safe to call twice."""
        self.closing = True
        with anyio.CancelScope(shield=True):
            if self.process.returncode is None:
                with suppress(Exception):
                    await self.process.stdin.aclose()  # type: ignore[union-attr]
                if not await _exited(self.process, EXIT_GRACE_SECONDS):
                    # The launcher kills every descendant on SIGTERM, then exits.
                    signal_launcher(self.process, signal.SIGTERM)
                    if not await _exited(self.process, TERMINATE_SECONDS):
                        signal_launcher(self.process, signal.SIGKILL)
                        await _exited(self.process, TERMINATE_SECONDS)
            self._stopped.set()


async def _exited(process: anyio.abc.Process, seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        while process.returncode is None:
            await anyio.sleep(0.01)
    return process.returncode is not None


def server_env(settings: McpSourceSettings, workdir: str) -> dict[str, str]:
    env = {key: os.environ[key] for key in INHERITED_ENV if key in os.environ}
    env[WORKDIR] = workdir
    env.update(settings.resolved_env(workdir))
    return env


def server_command(command: str) -> str:
    """`command`, or, when it is a bare name not found on PATH, the program of that name installed
    beside the factory's own interpreter (a server installed with the factory, `mcp-server-time`,
    when its environment's `bin` folder is not on PATH: `.venv/bin/toolfactory run`) or by
    `make mcp-servers` (an npm server of the catalog). Looked up where the session starts: a
    worker's folders need not be the driver's."""
    from toolfactory.executable.mcp.presets import find_executable

    if os.sep in command:
        return command
    return find_executable(command) or command


@asynccontextmanager
async def stdio_server(settings: McpSourceSettings, workdir: str) -> AsyncIterator[StdioLink]:
    """Start the server of `settings` (stdio) with `workdir` as its session folder; stop it on exit."""
    assert settings.command is not None
    argv = confined([server_command(settings.command), *settings.resolved_args(workdir)], settings.limits)
    env = server_env(settings, workdir)
    try:
        process = await anyio.open_process(
            argv, env=env, cwd=settings.resolved_cwd(workdir), start_new_session=True,
        )
    except OSError as exc:
        raise ExecutionFailed(EXEC_START_FAILED, f"MCP source {settings.name}: cannot start the launcher: {exc}") from None
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    link = StdioLink(settings.name, process, read_stream, write_stream, settings.secret_values(), budget=LISTING_BYTES)

    async def read_stdout() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        async with read_writer:
            while True:
                try:
                    chunk = await process.stdout.receive(READ_CHUNK)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    break
                link.used += len(chunk)
                buffer += chunk
                if link.budget and link.used > link.budget:
                    link.fail(EXEC_OUTPUT_FLOOD, f"the server wrote more than {link.budget} bytes for one request")
                    await link.stop()
                    return
                if b"\n" not in chunk:
                    continue
                *lines, rest = bytes(buffer).split(b"\n")
                buffer = bytearray(rest)
                for line in lines:
                    message = _message(line)
                    if message is None:
                        continue  # not JSON-RPC: skipped, its bytes counted above
                    try:
                        await read_writer.send(SessionMessage(message))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return
            # The end of stdout: say why before the session sees the connection close.
            if not link.closing:
                await _exited(process, STATUS_WAIT_SECONDS)
                status = process.returncode
                if status == EXIT_PROCESS_LIMIT:
                    link.fail(EXEC_PROCESS_LIMIT, f"the server started more than {settings.limits.max_processes} processes")
                else:
                    said = link.stderr()
                    what = "closed its output" if status is None else f"exited (status {status})"
                    link.fail(EXEC_CRASHED, f"the server {what}" + (f": {said}" if said else ""))

    async def write_stdin() -> None:
        assert process.stdin is not None
        async with write_reader:
            async for message in write_reader:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    await process.stdin.send(data.encode())
                except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    return

    async def read_stderr() -> None:
        assert process.stderr is not None
        with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            while True:
                link.stderr_tail = (link.stderr_tail + await process.stderr.receive(READ_CHUNK))[-STDERR_TAIL_BYTES:]

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_stdout)
            tasks.start_soon(write_stdin)
            tasks.start_soon(read_stderr)
            try:
                yield link
            finally:
                await link.stop()
                tasks.cancel_scope.cancel()
    finally:
        await link.stop()
        with anyio.CancelScope(shield=True), anyio.move_on_after(TERMINATE_SECONDS):
            await process.aclose()


def _message(line: bytes) -> mcp_types.JSONRPCMessage | None:
    line = line.strip()
    if not line.startswith(b"{"):
        return None  # not a JSON object: skipped without a parse (a flood of them stays cheap)
    try:
        return mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        return None
