"""The services of the production stack, each started as its own process on this machine, as CI
can: Prefect's database (Postgres when installed, SQLite otherwise), a Prefect server, a Ray
cluster of two nodes, the simulator as an OpenAI-compatible endpoint, and a process worker.

Every service runs in a process group of its own, which is what stops it: `ray stop` would end
every Ray on the machine, the test session's own among them.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import httpx

from conftest import http

BIN = Path(sys.executable).parent
STARTUP_S = 180  # a loaded 2-core machine starts a Prefect server or a raylet in over a minute


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until(ready: Callable[[], bool], what: str, process: subprocess.Popen[bytes] | None = None,
               log: Path | None = None, timeout_s: float = STARTUP_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}: {_tail(log)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready after {timeout_s:.0f} s: {_tail(log)}")
        time.sleep(0.2)


def _tail(log: Path | None) -> str:
    return log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""


def _answers(url: str) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            return http.get(url, timeout=3).status_code == 200
        except httpx.HTTPError:
            return False
    return ready


def stop_group(process: subprocess.Popen[bytes], grace_s: float = 30) -> None:
    """Stop `process` and every process of its group (it was started in a session of its own)."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:  # the leader may be gone while others of its group (Ray's workers) are not
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if process.poll() is None:
        process.wait(30)


@contextmanager
def group(args: list[str], log: Path, env: dict[str, str], cwd: Path | None = None,
          grace_s: float = 30) -> Iterator[subprocess.Popen[bytes]]:
    """`args` running in a process group of its own, output in `log`; stopped on exit (killed
    after `grace_s`)."""
    with log.open("ab") as out:
        process = subprocess.Popen(args, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield process
    finally:
        stop_group(process, grace_s)


def kill_tree(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGKILL `processes` and every process below them, also those that left their group."""
    from toolfactory.run.lifetime import descendants

    roots = {process.pid for process in processes}
    for pid in descendants(roots) | roots:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# --- Prefect's database --------------------------------------------------------------------


def postgres_bin() -> Path | None:
    """Debian's Postgres server programs, when installed and usable (they run as `postgres`)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name)
                   if p.parent.parent.name.isdigit() else 0)
    if not found or os.geteuid() != 0 or shutil.which("runuser") is None:
        return None
    return found[-1].parent


@dataclass(frozen=True)
class Database:
    kind: str  # "postgres" or "sqlite"
    url: str  # PREFECT_API_DATABASE_CONNECTION_URL


@contextmanager
def prefect_database(folder: Path) -> Iterator[Database]:
    """A Postgres cluster of its own on a free loopback port, with a `prefect` database, where
    Debian's `postgresql` is installed and this runs as root; a SQLite file otherwise."""
    programs = postgres_bin()
    if programs is None:
        yield Database("sqlite", f"sqlite+aiosqlite:///{folder / 'prefect.db'}")
        return
    # Its own folder, owned by postgres: the server refuses to run as root, and its socket and
    # data stay out of the machine's own cluster.
    home = Path(tempfile.mkdtemp(prefix="tfpg", dir="/tmp"))
    shutil.chown(home, "postgres")
    data, port, log = home / "data", free_port(), folder / "postgres.log"

    def as_postgres(*args: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *args], check=True, capture_output=True, timeout=STARTUP_S)

    try:
        as_postgres(str(programs / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync")
        # fsync off: a test's database need not survive a power cut, and the disk is shared.
        as_postgres(str(programs / "pg_ctl"), "-D", str(data), "-l", str(home / "server.log"), "-w", "-t", str(STARTUP_S),
                    "-o", f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        try:
            as_postgres(str(programs / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "prefect")
            yield Database("postgres", f"postgresql+asyncpg://postgres@127.0.0.1:{port}/prefect")
        finally:
            subprocess.run(["runuser", "-u", "postgres", "--", str(programs / "pg_ctl"), "-D", str(data), "-m", "fast",
                            "-w", "stop"], capture_output=True, timeout=120)
    finally:
        if (home / "server.log").exists():
            shutil.copy(home / "server.log", log)
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def prefect_server(folder: Path, database: Database, env: dict[str, str]) -> Iterator[str]:
    """`prefect server start` on a free loopback port; its API URL."""
    port = free_port()
    server_env = {
        **env,
        "PREFECT_HOME": str(folder / "prefect-home"),
        "PREFECT_SERVER_API_HOST": "127.0.0.1",
        "PREFECT_SERVER_API_PORT": str(port),
        "PREFECT_API_DATABASE_CONNECTION_URL": database.url,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        # The nightly schedule must not start a run of its own while the test runs.
        "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
    }
    server_env.pop("PREFECT_API_URL", None)
    log = folder / "prefect-server.log"
    with group([str(BIN / "prefect"), "server", "start"], log, server_env) as server:
        api = f"http://127.0.0.1:{port}/api"
        wait_until(_answers(f"{api}/health"), "prefect server", server, log)
        yield api


# --- Ray --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RayCluster:
    address: str
    temp_dirs: tuple[str, ...]  # one a node

    def worker_logs(self) -> list[Path]:
        """The stderr files of every worker the nodes have started, in every session of theirs."""
        return sorted(path for temp in self.temp_dirs for path in Path(temp).glob("session_*/logs/worker-*.err"))


@contextmanager
def ray_cluster(folder: Path, env: dict[str, str], nodes: int = 2) -> Iterator[RayCluster]:
    """A Ray cluster of `nodes` nodes of one CPU each on this machine (`ray start`)."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    # Ray's command line as docker-compose.yml runs it on each node, with a run's patience for a
    # node starting on a busy host (flows/ray_node.py).
    ray = [str(BIN / "python"), "-m", "flows.ray_node"]

    def node_args(k: int) -> list[str]:
        # Short temp dirs (Ray's socket paths are length-limited) of their own, so no node records
        # itself as the machine's current cluster in /tmp/ray; ports of their own, as two nodes
        # on one host cannot share the defaults.
        return [f"--temp-dir={temps[k]}", "--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats",
                f"--dashboard-agent-listen-port={free_port()}", f"--metrics-export-port={free_port()}", "--block"]

    temps = [tempfile.mkdtemp(prefix="tfray", dir="/tmp") for _ in range(nodes)]
    with ExitStack() as stack:
        stack.callback(lambda: [shutil.rmtree(t, ignore_errors=True) for t in temps])
        head_log = folder / "ray-head.log"
        head = stack.enter_context(group(
            [*ray, "start", "--head", f"--port={port}", "--include-dashboard=false", *node_args(0)], head_log, env))
        wait_until(lambda: _listens(port), "ray head", head, head_log)  # its GCS: the others can join
        started = [head] + [
            stack.enter_context(group([*ray, "start", f"--address={address}", *node_args(k)], folder / f"ray-node-{k}.log", env))
            for k in range(1, nodes)]
        # Killed, not stopped: Ray's own shutdown takes about 40 s, and the cluster holds nothing
        # the test keeps (runs first, before the groups are stopped).
        stack.callback(kill_tree, started)
        # One driver asks until every node is up: each probe costs a Python start and a ray.init.
        wait_until(lambda: _alive_nodes(address, env, nodes) >= nodes, f"ray cluster of {nodes} nodes", head, head_log)
        yield RayCluster(address, tuple(temps))


def _listens(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _alive_nodes(address: str, env: dict[str, str], nodes: int) -> int:
    """The cluster's live nodes once `nodes` are up (or after 50 s), asked by a short-lived driver
    (never this test's own process, which may be connected to the session's Ray)."""
    code = ("import time, ray; ray.init(address=%r, log_to_driver=False)\n"
            "for _ in range(100):\n"
            "    alive = sum(n['Alive'] for n in ray.nodes())\n"
            "    if alive >= %d: break\n"
            "    time.sleep(0.5)\n"
            "print(alive)") % (address, nodes)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=STARTUP_S)
    lines = result.stdout.strip().splitlines()
    return int(lines[-1]) if result.returncode == 0 and lines and lines[-1].isdigit() else 0


# --- the endpoint and the worker -----------------------------------------------------------


@contextmanager
def simulator(folder: Path, env: dict[str, str], flags: list[str]) -> Iterator[str]:
    """`toolfactory simulator serve` on a free loopback port; its root URL (the API is under /v1)."""
    port = free_port()
    log = folder / "simulator.log"
    with group([str(BIN / "toolfactory"), "simulator", "serve", "--port", str(port), *flags], log, env) as process:
        root = f"http://127.0.0.1:{port}"
        wait_until(_answers(f"{root}/v1/models"), "simulator", process, log)
        yield root


@contextmanager
def process_worker(cwd: Path, log: Path, env: dict[str, str]) -> Iterator[None]:
    """`prefect worker start` on the toolfactory pool, in `cwd`, until the block ends. Prefect's
    worker can hang in its shutdown: `group` kills what a SIGTERM did not stop."""
    # It asks for new flow runs every second, not every 10 s: a test waits for each of its runs.
    env = {**env, "PREFECT_WORKER_QUERY_SECONDS": "1"}
    with group([str(BIN / "prefect"), "worker", "start", "--pool", "toolfactory", "--type", "process"], log, env, cwd,
               grace_s=5) as worker:
        wait_until(lambda: "started!" in log.read_text(errors="replace"), "prefect worker", worker, log)
        yield
