"""Run the simulator in a child process, for tests, benchmarks and local demos.

A child process (not a thread) keeps the simulator's event loop away from the caller's, gives
a real socket the `openai` client can talk to, and can be killed cleanly. The child is
`sys.executable -m toolfactory.simulator serve ...`, configured by CLI flags generated from
the settings; readiness is detected by polling GET /v1/models.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from types import TracebackType
from typing import IO

from .app import PID_HEADER
from .cli import settings_to_cli_args
from .settings import SimulatorSettings

_POLL_INTERVAL_S = 0.05
_STOP_TIMEOUT_S = 5.0
_PORT_ATTEMPTS = 3  # a picked free port can be taken before the child binds it; retry


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _terminate(process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    """Stop `process` (TERM, then KILL) and close its log file; safe to call twice."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if not log.closed:
        log.close()


def _child_env() -> dict[str, str]:
    """The caller's environment with this source tree first on PYTHONPATH."""
    env = dict(os.environ)
    source_root = str(Path(__file__).resolve().parents[2])
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = source_root + (os.pathsep + existing if existing else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class SimulatorNotStarted(RuntimeError):
    """The simulator did not answer in time (`status` None) or exited while starting (`status`:
    its exit status); `output` is what it wrote."""

    def __init__(self, message: str, status: int | None, output: str) -> None:
        super().__init__(message, status, output)
        self.status, self.output = status, output

    def __str__(self) -> str:
        return str(self.args[0])


class SimulatorProcess:
    """A simulator running in a child process; use as a context manager or call stop()."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        log: IO[bytes],
        host: str,
        port: int,
        settings: SimulatorSettings,
    ) -> None:
        self.process = process
        self.host = host
        self.port = port
        self.settings = settings
        self.root_url = f"http://{host}:{port}"
        self.base_url = f"{self.root_url}/v1"
        self._log = log
        self._finalizer = weakref.finalize(self, _terminate, process, log)

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_text(self) -> str:
        """What the child wrote to stdout/stderr so far."""
        if self._log.closed:
            return ""
        fd = self._log.fileno()  # pread: the child shares the file offset, leave it alone
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def stop(self) -> None:
        """Terminate the child and wait for it (idempotent)."""
        self._finalizer()

    def __enter__(self) -> SimulatorProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.alive() else "stopped"
        return f"SimulatorProcess(pid={self.pid}, base_url={self.base_url!r}, {state})"


def _ready(url: str, pid: int) -> bool:
    """Whether the simulator with process id `pid` (not just anything) answers at `url`."""
    try:
        with urllib.request.urlopen(url, timeout=1.0) as response:
            return bool(response.status == 200 and response.headers.get(PID_HEADER) == str(pid))
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _launch(settings: SimulatorSettings, host: str, port: int, deadline: float) -> SimulatorProcess:
    command = [
        sys.executable,
        "-m",
        "toolfactory.simulator",
        "serve",
        "--host",
        host,
        "--port",
        str(port),
        *settings_to_cli_args(settings),
    ]
    log = tempfile.TemporaryFile(prefix="toolfactory-simulator-")
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=_child_env()
    )
    simulator = SimulatorProcess(process, log, host, port, settings)
    started = time.monotonic()
    while time.monotonic() < deadline:
        if not simulator.alive():
            output = simulator.log_text()
            simulator.stop()
            raise SimulatorNotStarted(
                f"simulator exited with status {process.returncode} before it was ready "
                f"(command: {' '.join(command)}):\n{output}", process.returncode, output
            )
        if _ready(f"{simulator.base_url}/models", process.pid):
            return simulator
        time.sleep(_POLL_INTERVAL_S)
    output = simulator.log_text()
    simulator.stop()
    raise SimulatorNotStarted(f"simulator not ready after {time.monotonic() - started:.0f} s:\n{output}", None, output)


def start_simulator(
    settings: SimulatorSettings,
    host: str = "127.0.0.1",
    port: int | None = None,
    ready_timeout_s: float = 180,
) -> SimulatorProcess:
    """Start a simulator child process and wait until it answers GET /v1/models.

    `port=None` picks a free loopback port (retrying if another process grabs it first).
    `ready_timeout_s` is wall time for the whole start, retries included; its default is sized
    for a busy machine, where starting the child takes far longer than its second on an idle one.
    Raises SimulatorNotStarted, with the child's output, if it exits or is not ready in time.
    """
    deadline = time.monotonic() + ready_timeout_s
    if port is not None:
        return _launch(settings, host, port, deadline)
    for attempt in range(_PORT_ATTEMPTS):
        try:
            return _launch(settings, host, free_port(host), deadline)
        except SimulatorNotStarted as exc:
            in_use = "address already in use" in exc.output.lower()
            if not in_use or attempt == _PORT_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")
