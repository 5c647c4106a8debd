"""Start the offline simulator as a child process: the endpoint of `llm.provider: simulator`.

The simulator is a program of its own (`python -m toolfactory.simulator serve`), started here as
any local endpoint would be, never imported: the product knows only its command line, the
readiness answer and how it reports settings it refuses. A child process (not a thread) keeps its
event loop away from the caller's, gives a real socket the `openai` client talks to, and can be
killed cleanly. The settings (`llm.simulator`, an opaque mapping to this side) go to the child as
JSON; the child validates them with its own settings model and, when one is invalid, exits at once
with status 2 and a line naming the field, which becomes a :class:`~toolfactory.errors.ConfigError`
here, before the run does any work. Readiness is detected by polling GET /v1/models until the
answer carries this child's process id.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from toolfactory.errors import ConfigError, ToolfactoryError

# The header the simulator puts its process id in (toolfactory/simulator/app.py sends it), so that
# readiness is this child's answer, not that of whatever else took the port.
PID_HEADER = "x-simulator-pid"
# The line the simulator writes, exiting with status 2, when it refuses its settings.
SETTINGS_REFUSED = "error: invalid config: "
SETTINGS_REFUSED_STATUS = 2

_POLL_INTERVAL_S = 0.05
_STOP_TIMEOUT_S = 5.0
_PORT_ATTEMPTS = 3  # a picked free port can be taken before the child binds it; retry


def simulator_command(settings: Mapping[str, Any], settings_name: str = "", args: Sequence[str] = (),
                      prog: str | None = None, epilog: str | None = None) -> list[str]:
    """The command line that serves the simulator with `settings`, then `args` (flags, which win).
    `settings_name`: how the caller's config names the settings, so that a refused value is named
    as the user wrote it; `prog` and `epilog`: the command its help and errors name, and what
    that command adds to the help."""
    command = [sys.executable, "-m", "toolfactory.simulator"]
    command += ["--prog", prog] if prog else []
    command += ["--epilog", epilog] if epilog else []
    command.append("serve")
    if settings:
        command += ["--settings-json", json.dumps(dict(settings), sort_keys=True)]
    if settings_name:
        command += ["--settings-name", settings_name]
    return [*command, *args]


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


def child_env() -> dict[str, str]:
    """The caller's environment with this source tree first on PYTHONPATH."""
    env = dict(os.environ)
    source_root = str(Path(__file__).resolve().parents[2])
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = source_root + (os.pathsep + existing if existing else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class SimulatorNotStarted(ToolfactoryError, RuntimeError):
    """The simulator did not answer in time (`status` None) or exited while starting (`status`:
    its exit status); `output` is what it wrote."""

    def __init__(self, message: str, status: int | None, output: str) -> None:
        super().__init__(message, status, output)
        self.status, self.output = status, output

    def __str__(self) -> str:
        return str(self.args[0])


class SimulatorSettingsRefused(ConfigError):
    """The simulator refused its settings; the message names the field (e.g.
    `invalid config: llm.simulator.rate_429: Input should be less than or equal to 1 (got 5)`)."""


class SimulatorProcess:
    """A simulator running in a child process; use as a context manager or call stop()."""

    def __init__(self, process: subprocess.Popen[bytes], log: IO[bytes], host: str, port: int,
                 settings: Mapping[str, Any]) -> None:
        self.process = process
        self.host = host
        self.port = port
        self.settings = dict(settings)
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

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
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


def _refusal(status: int | None, output: str) -> str | None:
    """The simulator's message about refused settings, when that is why it exited."""
    if status != SETTINGS_REFUSED_STATUS:
        return None
    lines = [line for line in output.splitlines() if line.startswith(SETTINGS_REFUSED)]
    return lines[-1].removeprefix("error: ") if lines else None


def _launch(settings: Mapping[str, Any], settings_name: str, host: str, port: int, deadline: float) -> SimulatorProcess:
    command = simulator_command(settings, settings_name, ["--host", host, "--port", str(port)])
    log = tempfile.TemporaryFile(prefix="toolfactory-simulator-")
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=child_env())
    simulator = SimulatorProcess(process, log, host, port, settings)
    started = time.monotonic()
    while time.monotonic() < deadline:
        if not simulator.alive():
            output = simulator.log_text()
            simulator.stop()
            refused = _refusal(process.returncode, output)
            if refused is not None:
                raise SimulatorSettingsRefused(refused)
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


def check_simulator_settings(settings: Mapping[str, Any], settings_name: str, timeout_s: float) -> None:
    """Have the simulator check `settings` without serving, in a short child process (the product
    does not import the simulator), so that a wrong value stops a run before anything starts.
    Raises :class:`SimulatorSettingsRefused` naming the field as `settings_name` names the
    settings. A check that fails otherwise, or does not finish within `timeout_s` of wall time,
    is not an error here: starting the simulator checks the settings again and reports such a
    failure with its own deadline (`orchestration.simulator_start_timeout_s`)."""
    command = [sys.executable, "-m", "toolfactory.simulator", "check",
               "--settings-json", json.dumps(dict(settings), sort_keys=True), "--settings-name", settings_name]
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, env=child_env(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return
    refused = _refusal(done.returncode, done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace"))
    if refused is not None:
        raise SimulatorSettingsRefused(refused)


def start_simulator(settings: Mapping[str, Any] | None = None, host: str = "127.0.0.1", port: int | None = None,
                    ready_timeout_s: float = 180, settings_name: str = "") -> SimulatorProcess:
    """Start a simulator child process with `settings` and wait until it answers GET /v1/models.

    `port=None` picks a free loopback port (retrying if another process grabs it first).
    `ready_timeout_s` is wall time for the whole start, retries included; its default is sized
    for a busy machine, where starting the child takes far longer than its second on an idle one.
    Raises :class:`SimulatorSettingsRefused` (a ConfigError naming the field, as `settings_name`
    names the settings) when the simulator refuses `settings`, and :class:`SimulatorNotStarted`,
    with the child's output, if it exits otherwise or is not ready in time.
    """
    settings = dict(settings or {})
    deadline = time.monotonic() + ready_timeout_s
    if port is not None:
        return _launch(settings, settings_name, host, port, deadline)
    for attempt in range(_PORT_ATTEMPTS):
        try:
            return _launch(settings, settings_name, host, free_port(host), deadline)
        except SimulatorNotStarted as exc:
            in_use = "address already in use" in exc.output.lower()
            if not in_use or attempt == _PORT_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")
