"""Python environments as a tool source: a stateful class whose public methods are the functions.

BFCL's multi-turn categories (file system, messaging, posting, tickets, trading, travel booking,
vehicle control, math) run calls on such classes and judge a model by the state it leaves; this
module makes any such class a source of executable tools. ``class_path`` names the class,
``initial_state`` its starting state (see :func:`toolfactory.executable.runner.instantiate`), and
``function_docs`` its documentation in BFCL's multi-turn format; without docs each public method
is documented from its signature and docstring.

The instance never runs in the factory's process: every :meth:`PythonEnvironment.session` starts
a runner process (:mod:`.runner`) through the confining launcher, in a temporary folder of its
own, and closes it with the session, so two dialogues never share state. A call that does not
answer in ``call_timeout_seconds`` kills it (``exec_timeout``); one that exits or answers with
garbage is ``exec_server_crashed``; output far beyond ``output_cap_bytes`` is
``exec_output_flood``; more processes than allowed, ``exec_process_limit``.

``preset: GorillaFileSystem`` (or any of :data:`BFCL_PRESETS`) fills in the class path and the
function docs of BFCL's own environment from the installed ``bfcl-eval`` package.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any


from toolfactory.executable.confine import EXIT_PROCESS_LIMIT, confined, signal_launcher
from toolfactory.executable.session import (
    EXEC_CRASHED,
    EXEC_OUTPUT_FLOOD,
    EXEC_PROCESS_LIMIT,
    EXEC_START_FAILED,
    EXEC_TIMEOUT,
    CallResult,
    ExecutionFailed,
    empty_folder,
    mark_executable,
)
from toolfactory.executable.settings import PythonEnvironmentSettings
from toolfactory.models import Function, Tool

KIND = "python"
#: A process that writes more than this many times its output cap is flooding.
FLOOD_FACTOR = 16
STDERR_TAIL = 2000
STOP_SECONDS = 5.0
#: Time from the end of the runner's output to the launcher's exit status.
STATUS_WAIT_SECONDS = 2.0
#: Run as a script (see :func:`~toolfactory.executable.confine.confined`): it imports no toolfactory module.
RUNNER = str(Path(__file__).with_name("runner.py").resolve())


def read_function_docs(path: str) -> list[dict[str, Any]]:
    """The docs of a JSON list or a JSON-lines file (BFCL ships JSON lines named ``.json``)."""
    text = Path(path).expanduser().read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
    return list(data if isinstance(data, list) else [data])


def doc_function(doc: dict[str, Any]) -> Function:
    """A BFCL function doc as a canonical function (BFCL type names mapped to JSON Schema)."""
    from toolfactory.definitions.convert import normalize_schema

    return Function(
        name=str(doc.get("name", "")),
        description=str(doc.get("description", "")),
        parameters=normalize_schema(doc.get("parameters") or {"type": "object", "properties": {}}),
        returns=normalize_schema(doc.get("response") or {"type": "object"}),
    )


class PythonSession:
    """One runner process holding one fresh instance."""

    def __init__(self, settings: PythonEnvironmentSettings, process: asyncio.subprocess.Process, folder: str) -> None:
        self.settings = settings
        self.process = process
        self.folder = folder
        self.stderr = bytearray()
        self.stderr_bytes = 0
        self.flooded = False
        assert process.stderr is not None
        self._drain = asyncio.ensure_future(self._drain_stderr(process.stderr))

    @property
    def flood_bytes(self) -> int:
        return FLOOD_FACTOR * self.settings.output_cap_bytes

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        # Read whatever the process writes on stderr (its prints too), keep the tail for messages,
        # and stop a process that writes far past its cap.
        while chunk := await stream.read(65536):
            self.stderr_bytes += len(chunk)
            self.stderr = (self.stderr + chunk)[-STDERR_TAIL:]
            if self.stderr_bytes > self.flood_bytes and not self.flooded:
                self.flooded = True
                signal_launcher(self.process, signal.SIGTERM)

    async def request(self, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and read its answer, within `timeout` seconds."""
        assert self.process.stdin is not None and self.process.stdout is not None
        if self.process.returncode is not None or self.flooded:
            raise await self._failure()
        try:
            self.process.stdin.write((json.dumps(payload, ensure_ascii=False) + "\n").encode())
            await self.process.stdin.drain()
            line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        except TimeoutError:
            await self.stop()
            raise ExecutionFailed(EXEC_TIMEOUT, f"{self.settings.name}: no answer to {payload.get('op')} "
                                                f"{payload.get('name', '')} within {timeout:g} s".replace("  ", " ")) from None
        except ValueError:  # a line longer than the stream's limit
            await self.stop()
            raise ExecutionFailed(EXEC_OUTPUT_FLOOD, f"{self.settings.name}: an answer of more than {self.flood_bytes} bytes") from None
        except (BrokenPipeError, ConnectionResetError):
            raise await self._failure() from None
        if not line:
            raise await self._failure()
        try:
            answer = json.loads(line)
        except json.JSONDecodeError:
            await self.stop()
            raise ExecutionFailed(EXEC_CRASHED, f"{self.settings.name}: not a protocol answer: {line[:200]!r}") from None
        if not isinstance(answer, dict):
            await self.stop()
            raise ExecutionFailed(EXEC_CRASHED, f"{self.settings.name}: not a protocol answer: {line[:200]!r}")
        return answer

    async def _failure(self) -> ExecutionFailed:
        """Why the process stopped answering (after it is stopped)."""
        # The end of its output usually comes just before its exit status, which tells a crash
        # from a process limit: wait a little for it before stopping it.
        with suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), STATUS_WAIT_SECONDS)
        await self.stop()
        tail = self.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        if self.flooded:
            return ExecutionFailed(EXEC_OUTPUT_FLOOD, f"{self.settings.name}: wrote more than {self.flood_bytes} bytes")
        if self.process.returncode == EXIT_PROCESS_LIMIT:
            return ExecutionFailed(EXEC_PROCESS_LIMIT, f"{self.settings.name}: more than "
                                                       f"{self.settings.limits.max_processes} processes")
        return ExecutionFailed(EXEC_CRASHED, f"{self.settings.name}: the process exited "
                                             f"(status {self.process.returncode}) {tail[0][:300]}".strip())

    async def call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        answer = await self.request({"op": "call", "name": name, "arguments": arguments}, self.settings.call_timeout_seconds)
        if "content" not in answer:
            await self.stop()
            raise ExecutionFailed(EXEC_CRASHED, f"{self.settings.name}: {answer.get('error', 'an answer without content')}")
        content = str(answer["content"])
        encoded = content.encode()
        truncated = len(encoded) > self.settings.output_cap_bytes
        if truncated:
            content = encoded[: self.settings.output_cap_bytes].decode(errors="ignore")
        structured = None if truncated else answer.get("structured")
        return CallResult(content=content, is_error=bool(answer.get("is_error")) or self.settings.answers_error(structured),
                          truncated=truncated, structured=structured)

    async def state(self) -> Any:
        return (await self.request({"op": "state"}, self.settings.call_timeout_seconds)).get("state")

    def version(self) -> str:
        """The distribution that holds the class, with its version ("" if unknown)."""
        return self.settings.distribution_version()

    async def initialize(self, timeout: float) -> None:
        """Make the instance from the initial state (anew, on a warm process)."""
        init = {"op": "init", "class_path": self.settings.resolved_class_path(), "initial_state": self.settings.initial_state}
        answer = await self.request(init, timeout)
        if not answer.get("ok"):
            await self.stop()
            raise ExecutionFailed(EXEC_START_FAILED, f"{self.settings.name}: {self.settings.resolved_class_path()}: {answer.get('error')}")

    async def reset(self) -> None:
        """A fresh environment in this process: its folder emptied and the instance made anew
        from the initial state (what a module of the class keeps at its level survives: vetting
        checks that two sessions stay apart before a run reuses processes)."""
        empty_folder(Path(self.folder))
        await self.initialize(self.settings.start_timeout_seconds)

    async def stop(self) -> None:
        """Stop the runner: the launcher kills everything it started when told to stop."""
        if self.process.returncode is None:
            signal_launcher(self.process, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), STOP_SECONDS)
            except TimeoutError:
                signal_launcher(self.process, signal.SIGKILL)
                await self.process.wait()
        with suppress(Exception):
            await asyncio.wait_for(self._drain, STOP_SECONDS)


class PythonEnvironment:
    """A configured Python environment (implements :class:`~toolfactory.executable.session.Environment`)."""

    def __init__(self, settings: PythonEnvironmentSettings) -> None:
        self.settings = settings
        self.name = settings.name

    @asynccontextmanager
    async def session(self) -> AsyncIterator[PythonSession]:
        """A fresh instance in a runner process of its own, in a temporary folder of its own."""
        with tempfile.TemporaryDirectory(prefix=f"toolfactory-{self.name}-") as folder:
            session = await self._start(folder)
            try:
                yield session
            finally:
                await session.stop()

    async def _start(self, folder: str) -> PythonSession:
        argv = confined([sys.executable, "-P", RUNNER], self.settings.limits)
        # The runner imports the class from where the factory imports its own code.
        environ = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, cwd=folder, env=environ, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, limit=FLOOD_FACTOR * self.settings.output_cap_bytes,
                start_new_session=True,  # a ^C at the terminal reaches the factory, which stops it
            )
        except OSError as exc:
            raise ExecutionFailed(EXEC_START_FAILED, f"{self.name}: cannot start its runner: {exc}") from exc
        session = PythonSession(self.settings, process, folder)
        try:
            await session.initialize(self.settings.start_timeout_seconds)
        except ExecutionFailed as exc:
            await session.stop()
            if exc.reason == EXEC_START_FAILED:
                raise
            raise ExecutionFailed(EXEC_START_FAILED, f"{exc.reason}: {exc.message}") from exc
        except BaseException:
            await session.stop()
            raise
        return session

    async def list_tools(self) -> list[Tool]:
        """One tool: the class, its public methods the functions (documented by `function_docs`
        when set; a doc naming no public method is left out, which the tools stage reports)."""
        async with self.session() as session:
            try:
                answer = await session.request({"op": "describe"}, self.settings.start_timeout_seconds)
            except ExecutionFailed as exc:
                raise ExecutionFailed(EXEC_START_FAILED, f"{exc.reason}: {exc.message}") from exc
        methods = {m["name"]: m for m in answer.get("methods") or []}
        docs = self.settings.resolved_function_docs()
        if docs is not None:
            functions = [doc_function(doc) for doc in read_function_docs(docs)]
        else:
            functions = [Function(name=m["name"], description=m["doc"], parameters=m["parameters"], returns=m["returns"])
                         for m in methods.values()]
        class_path = self.settings.resolved_class_path()
        class_name = class_path.partition(":")[2]
        tool = Tool(
            name=self.name, description=f"{class_name}: a stateful Python environment", category="Executable",
            source=KIND, functions=functions,
            provenance={"class_path": class_path, "methods": sorted(methods)},
        )
        return [mark_executable(tool, KIND, self.name)]

