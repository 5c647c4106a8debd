"""An MCP server as an executable tool source (:class:`~toolfactory.executable.session.Environment`).

Over stdio every session is a fresh server process, confined, started in a temporary working
folder of its own and stopped with everything it started when the session closes. Over
streamable HTTP the server is someone else's: a session is a fresh MCP session, the server's
state is not reset between sessions, and ``state()`` is only what ``state_tool`` answers.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from toolfactory.errors import ConfigError
from toolfactory.executable.mcp.convert import cap, render_content, tool_of
from toolfactory.executable.mcp.settings import McpSourceSettings
from toolfactory.executable.mcp.transport import LISTING_BYTES, StdioLink, stdio_server
from toolfactory.executable.state_files import files_of
from toolfactory.executable.session import (
    EXEC_CRASHED,
    EXEC_START_FAILED,
    EXEC_TIMEOUT,
    CallResult,
    ExecutionFailed,
    empty_folder,
    mark_executable,
)
from toolfactory.models import Tool

#: A server may write this many times a call's output cap for one call (JSON escaping, a
#: structured copy of the content, notifications), and at least FLOOD_FLOOR bytes, before it
#: counts as a flood: a result somewhat over the cap is cut, a stream far over it is a failure.
FLOOD_FACTOR = 16
FLOOD_FLOOR = 1024 * 1024
MAX_PAGES = 1000
#: The longest silence of an HTTP server's event stream (the SDK's default, 5 minutes).
SSE_READ_TIMEOUT_SECONDS = 300.0
_BROKEN = (MCPError, ValidationError, RuntimeError, ValueError, anyio.BrokenResourceError, anyio.ClosedResourceError, httpx2.HTTPError)


class McpSession:
    """One fresh server (stdio) or MCP session (HTTP), open for the calls of one dialogue."""

    def __init__(self, settings: McpSourceSettings, client: ClientSession, link: StdioLink | None, workdir: Path) -> None:
        self.settings = settings
        self.client = client
        self.link = link
        self.workdir = workdir
        self.broken: ExecutionFailed | None = None

    async def call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        result = await self._run(name, arguments)
        if isinstance(result, MCPError):
            # A JSON-RPC error (unknown tool, invalid arguments): the call ran and was refused.
            text, truncated = cap(result.message, self.settings.output_cap_bytes)
            return CallResult(content=text, is_error=True, truncated=truncated)
        text, truncated = cap(render_content(result.content), self.settings.output_cap_bytes)
        return CallResult(content=text, is_error=bool(result.is_error) or self.settings.answers_error(result.structured_content),
                          truncated=truncated, structured=result.structured_content)

    async def state(self) -> Any:
        state: dict[str, Any] = {}
        if self.settings.state_tool is not None:
            result = await self._run(self.settings.state_tool, {})
            if isinstance(result, MCPError):
                state["tool"] = {"error": result.message}
            elif result.is_error:
                state["tool"] = {"error": render_content(result.content)}
            else:
                state["tool"] = result.structured_content if result.structured_content is not None else render_content(result.content)
        if self.settings.state_files:
            state["files"] = files_of(self.workdir)
        return state or None

    def version(self) -> str:
        """The server's own name and version, as it said in its `initialize` answer ("" if none)."""
        init = self.client.initialize_result
        server = init.server_info if init is not None else None
        return f"{server.name} {server.version}" if server is not None and server.version else ""

    async def reset(self) -> None:
        """A fresh environment on this server process: its working folder emptied, and a ping
        that it still answers (a process that died or hangs idle fails here, not in a dialogue).
        What the server keeps in memory survives: vetting checks that two sessions stay apart
        before a run reuses a process. Over HTTP there is no process of ours to reuse."""
        if self.link is None:
            raise ExecutionFailed(EXEC_CRASHED, f"MCP source {self.settings.name}: an HTTP session is not reused")
        if self.broken is not None:
            raise self.broken
        empty_folder(self.workdir)
        _prepare(self.settings, self.workdir)
        timeout = self.settings.start_timeout_seconds
        try:
            with anyio.fail_after(timeout):
                await self.client.send_ping()
        except TimeoutError:
            self.broken = ExecutionFailed(EXEC_TIMEOUT, f"MCP source {self.settings.name}: no answer to a ping within {timeout:g} s")
        except (*_BROKEN, MCPError) as exc:
            self.broken = self._link_failure() or ExecutionFailed(EXEC_CRASHED, f"MCP source {self.settings.name}: "
                                                                               f"a ping failed: {_first_line(exc)}")
        else:
            return
        await self.link.stop()
        raise self.broken

    async def _run(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult | MCPError:
        """Call the tool; the result verbatim (not validated against the tool's output schema:
        the dialogue keeps what the server said), or the JSON-RPC error it answered."""
        if self.broken is not None:
            raise self.broken
        if self.link is not None:
            self.link.expect(max(FLOOD_FACTOR * self.settings.output_cap_bytes, FLOOD_FLOOR))
        request = mcp_types.CallToolRequest(params=mcp_types.CallToolRequestParams(name=name, arguments=arguments))
        timeout = self.settings.call_timeout_seconds
        try:
            with anyio.fail_after(timeout):
                return await self.client.send_request(request, mcp_types.CallToolResult)
        except TimeoutError:
            self.broken = ExecutionFailed(EXEC_TIMEOUT, f"MCP source {self.settings.name}: {name} did not answer within {timeout:g} s")
        except MCPError as exc:
            if self._link_failure() is None and exc.code not in (mcp_types.CONNECTION_CLOSED, mcp_types.REQUEST_TIMEOUT):
                return exc
            self.broken = self._link_failure() or ExecutionFailed(EXEC_CRASHED, f"MCP source {self.settings.name}: connection lost during {name}")
        except _BROKEN as exc:
            self.broken = self._link_failure() or ExecutionFailed(
                EXEC_CRASHED, f"MCP source {self.settings.name}: {name} broke the protocol: {_first_line(exc)}"
            )
        if self.link is not None:
            await self.link.stop()  # a session that failed is over: nothing of it keeps running
        raise self.broken

    def _link_failure(self) -> ExecutionFailed | None:
        if self.link is None or self.link.failure is None:
            return None
        return ExecutionFailed(self.link.failure.reason, f"MCP source {self.settings.name}: {self.link.failure.message}")


class McpEnvironment:
    """The MCP server configured by `settings`, as an executable tool source."""

    def __init__(self, settings: McpSourceSettings) -> None:
        self.settings = settings
        self.name = settings.name
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    def __reduce__(self) -> tuple[type[McpEnvironment], tuple[McpSourceSettings]]:
        # Its semaphore belongs to one event loop: a copy (another worker) starts without it.
        return (McpEnvironment, (self.settings,))

    async def list_tools(self) -> list[Tool]:
        """The server's tools (allow and deny applied) as one canonical tool, in a list."""
        # Starting, initializing and listing share one deadline.
        deadline = anyio.current_time() + self.settings.start_timeout_seconds
        async with self._session(deadline) as session:
            client = session.client
            listed: list[mcp_types.Tool] = []
            cursor: str | None = None
            try:
                with anyio.fail_at(deadline):
                    for _ in range(MAX_PAGES):
                        if session.link is not None:
                            session.link.expect(LISTING_BYTES)
                        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
                        page = await client.list_tools(params=params)
                        listed += page.tools
                        cursor = page.next_cursor
                        if not cursor:
                            break
                    else:
                        raise RuntimeError(f"more than {MAX_PAGES} pages of tools")
            except TimeoutError:
                raise self._start_failed(session.link, f"did not list its tools within {self.settings.start_timeout_seconds:g} s") from None
            except _BROKEN as exc:
                raise self._start_failed(session.link, f"could not list its tools: {_first_line(exc)}") from None
            init = client.initialize_result
            server = init.server_info if init is not None else None
            instructions = init.instructions if init is not None else None
        names = [tool.name for tool in listed]
        unknown = sorted(set(self.settings.allow or []) - set(names))
        if unknown:
            raise ExecutionFailed(EXEC_START_FAILED, f"MCP source {self.name}: allow names tools the server does not list: {', '.join(unknown)}")
        kept = [tool for tool in listed if self.settings.admits(tool.name)]
        if not kept:
            return []
        return [mark_executable(tool_of(self.name, kept, server, instructions, self.settings.transport), "mcp", self.name)]

    def session(self) -> AbstractAsyncContextManager[McpSession]:
        """A fresh server (stdio) or MCP session (HTTP), initialized; stopped on exit. Over HTTP,
        a connection that fails mid-session cancels the call and is raised when the session
        closes (the SDK's transport fails in a task of its own)."""
        return self._session(None)

    @asynccontextmanager
    async def _session(self, deadline: float | None) -> AsyncIterator[McpSession]:
        async with self._slot():
            link: StdioLink | None = None
            workdir = Path(tempfile.mkdtemp(prefix=f"toolfactory-mcp-{self.name}-"))
            from_body: list[BaseException] = []
            started = False
            try:
                _prepare(self.settings, workdir)
                async with AsyncExitStack() as stack:
                    client, link = await self._connect(stack, workdir, deadline)
                    started = True
                    try:
                        yield McpSession(self.settings, client, link, workdir)
                    except BaseException as exc:
                        from_body.append(exc)
                        raise
            except BaseExceptionGroup as group:
                # The SDK's and the transport's task groups wrap what crosses them: the caller
                # sees its own exception, or why the environment failed.
                raise self._failure_of(group, from_body, started, link) from None
            finally:
                shutil.rmtree(workdir, ignore_errors=True)

    async def _connect(self, stack: AsyncExitStack, workdir: Path, deadline: float | None) -> tuple[ClientSession, StdioLink | None]:
        link: StdioLink | None = None
        timeout = self.settings.start_timeout_seconds
        deadline = anyio.current_time() + timeout if deadline is None else deadline
        try:
            # Entering the contexts starts nothing that can hang (the process is spawned, an HTTP
            # connection is opened lazily): only the handshake is timed. A timeout scope must not
            # span the contexts, whose task groups outlive it.
            if self.settings.transport == "stdio":
                link = await stack.enter_async_context(stdio_server(self.settings, str(workdir)))
                streams: tuple[Any, Any] = (link.read_stream, link.write_stream)
            else:
                # Every wait is bounded, the closing DELETE included: connecting by the start
                # timeout, a read by the SDK's own default for event streams.
                http = await stack.enter_async_context(httpx2.AsyncClient(
                    headers=self.settings.resolved_headers(), timeout=httpx2.Timeout(timeout, read=SSE_READ_TIMEOUT_SECONDS),
                ))
                streams = await stack.enter_async_context(streamable_http_client(self.settings.url or "", http_client=http))
            client = await stack.enter_async_context(ClientSession(*streams))
            with anyio.fail_at(deadline):
                await client.initialize()
        except ConfigError as exc:
            raise ExecutionFailed(EXEC_START_FAILED, str(exc)) from None
        except TimeoutError:
            raise self._start_failed(link, f"did not answer `initialize` within {timeout:g} s") from None
        except (*_BROKEN, OSError) as exc:
            raise self._start_failed(link, f"could not start: {_first_line(exc)}") from None
        return client, link

    def _failure_of(
        self, group: BaseExceptionGroup[Any], from_body: list[BaseException], started: bool, link: StdioLink | None
    ) -> BaseException:
        leaves = _leaves(group)
        for exc in leaves:
            if isinstance(exc, ExecutionFailed) or any(exc is mine for mine in from_body):
                return exc
        if link is not None and link.failure is not None:
            return ExecutionFailed(link.failure.reason, f"MCP source {self.name}: {link.failure.message}")
        first = leaves[0] if leaves else group
        if not started:
            return self._start_failed(link, f"could not start: {_first_line(first)}")
        return ExecutionFailed(EXEC_CRASHED, f"MCP source {self.name}: the connection failed: {_first_line(first)}")

    def _start_failed(self, link: StdioLink | None, what: str) -> ExecutionFailed:
        where = f"MCP source {self.name} ({self.settings.command or self.settings.url})"
        if link is not None and link.failure is not None:
            return ExecutionFailed(EXEC_START_FAILED, f"{where}: {link.failure.message}")
        said = link.stderr() if link is not None else ""
        return ExecutionFailed(EXEC_START_FAILED, f"{where} {what}" + (f" (stderr: {said})" if said else ""))

    @asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """At most `max_sessions` sessions of this source at once (per event loop)."""
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(self.settings.max_sessions))
        async with self._slots[1]:
            yield


def _prepare(settings: McpSourceSettings, workdir: Path) -> None:
    """What the preset's sessions start with (an initial database), put in the working folder."""
    preset = settings.preset_entry()
    if preset is not None and settings.transport == "stdio":
        preset.prepare(workdir)


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    leaves: list[BaseException] = []
    todo: list[BaseException] = [group]
    while todo:
        exc = todo.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            todo.extend(exc.exceptions)
        else:
            leaves.append(exc)
    return leaves


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
