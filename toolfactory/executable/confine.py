"""Run a command under limits, and leave nothing behind.

Every process the factory starts to execute tools (an MCP server, a Python environment's runner)
is started through this launcher: ``confined(argv, limits)`` is the command line that runs
``argv`` under ``limits``. The launcher

* gives the command its own network namespace (loopback only) unless ``network`` is allowed,
  where the OS permits it (root, or unprivileged user namespaces); otherwise it says so on
  stderr once and goes on;
* sets resource limits on it: writable memory, CPU seconds, largest file written, open files;
* counts the command's processes, the first included (in a ``pids`` cgroup of its own where the
  cgroup file system is writable, else by walking ``/proc``: the launcher is a child subreaper,
  so every orphaned descendant becomes its child and stays countable). Past ``max_processes`` it
  kills them all and exits with :data:`EXIT_PROCESS_LIMIT`, saying why on stderr;
* kills every descendant when the command exits, when it is told to stop (SIGTERM, SIGINT,
  SIGHUP), and when its own parent dies (a killed shard): nothing it started survives it.

Output caps are the caller's: it reads the command's output and stops reading past its cap.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNET = 0x40000000
CGROUP_PIDS = Path("/sys/fs/cgroup/pids")
CGROUP_PREFIX = "toolfactory-"
#: Exit status of the launcher when the command started more processes than allowed.
EXIT_PROCESS_LIMIT = 125
POLL_SECONDS = 0.05
MEGABYTE = 1024 * 1024


@dataclass(frozen=True)
class ProcessLimits:
    """Limits on a process the factory starts (per source: ``limits`` in its configuration)."""

    memory_mb: int = 2048
    """Writable private memory of each process (``RLIMIT_DATA``: its heap and anonymous mappings).
    Not its address space: runtimes reserve far more than they use (Node's built-in `fetch`
    reserves gigabytes for WebAssembly), which a limit on the address space makes them crash on."""
    cpu_seconds: int = 600
    """CPU time of each process (``RLIMIT_CPU``)."""
    max_processes: int = 16
    """Processes alive at once, the first included; past it all are killed."""
    file_size_mb: int = 256
    """Largest file a process may write (``RLIMIT_FSIZE``)."""
    open_files: int = 1024
    """Open file descriptors of each process (``RLIMIT_NOFILE``)."""
    network: bool = False
    """Allow the network; when false the process gets a network namespace of its own (loopback
    only) where the OS permits it."""


def confined(argv: list[str], limits: ProcessLimits) -> list[str]:
    """The command line that runs `argv` under `limits` (see the module doc)."""
    # Run as a script, not `-m`: importing the toolfactory package would cost every launch seconds;
    # -P keeps this file's folder off the command's module path.
    return [sys.executable, "-P", str(Path(__file__).resolve()), json.dumps(asdict(limits)), "--", *argv]


def signal_launcher(process: Any, signum: int) -> None:
    """Send `signum` to a launcher the caller started (an asyncio or anyio process), without
    reaping it.

    ``terminate()`` and ``kill()`` go through ``Popen.send_signal``, which first polls the child
    and so can reap it behind the event loop's child watcher: the watcher then reports exit
    status 255 instead of the launcher's own (which tells a crash from a process limit).
    ``os.kill`` on an exited but unreaped child is harmless.
    """
    if process.returncode is None:
        try:
            os.kill(process.pid, signum)
        except ProcessLookupError:
            pass


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid …; comm may hold spaces and parentheses: split after the last ")".
        fields = stat[stat.rfind(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (zombies included until reaped)."""
    tree = _children_by_parent()
    found: list[int] = []
    todo = list(tree.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(tree.get(child, []))
    return found


class _Group:
    """The command's processes: a pids cgroup where one can be made, else the launcher's
    descendants."""

    def __init__(self, max_processes: int) -> None:
        self.cgroup: Path | None = None
        self.max_processes = max_processes
        _sweep_stale_cgroups()
        path = CGROUP_PIDS / f"{CGROUP_PREFIX}{os.getpid()}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(max_processes))
            self.cgroup = path
        except OSError:
            self.cgroup = None

    def enter(self) -> None:
        """Called in the child before exec: join the cgroup."""
        if self.cgroup is not None:
            (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))

    def pids(self) -> list[int]:
        if self.cgroup is not None:
            try:
                return [int(p) for p in (self.cgroup / "cgroup.procs").read_text().split()]
            except OSError:
                return []
        return [pid for pid in descendants(os.getpid()) if not _zombie(pid)]

    def over_limit(self) -> bool:
        if self.cgroup is not None:
            try:
                events = (self.cgroup / "pids.events").read_text().split()
            except OSError:
                return False
            # "max N": N forks were refused at the limit.
            return len(events) >= 2 and int(events[1]) > 0
        return len(self.pids()) > self.max_processes

    def kill_all(self) -> None:
        for _ in range(200):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _reap()
            time.sleep(0.01)
        if self.cgroup is not None:
            try:
                self.cgroup.rmdir()
            except OSError:
                pass


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2:].startswith("Z")


def _sweep_stale_cgroups() -> None:
    """Kill what is left in the cgroups of launchers that were killed outright (SIGKILL)."""
    try:
        stale = [p for p in CGROUP_PIDS.glob(f"{CGROUP_PREFIX}*") if not alive(int(p.name[len(CGROUP_PREFIX):]))]
    except (OSError, ValueError):
        return
    for path in stale:
        try:
            for pid in (path / "cgroup.procs").read_text().split():
                os.kill(int(pid), signal.SIGKILL)
            path.rmdir()
        except (OSError, ValueError):
            pass


def alive(pid: int) -> bool:
    """Whether process `pid` exists (a process of another user counts as existing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap() -> dict[int, int]:
    """Reap every child that has exited (orphans included: we are their subreaper): pid → exit
    status (a signal as 128 + its number)."""
    reaped: dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped[pid] = os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _isolate_network() -> None:
    if _libc().unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        print(f"toolfactory-confine: network not isolated ({os.strerror(err)})", file=sys.stderr, flush=True)


def _child_setup(limits: ProcessLimits, group: _Group) -> None:
    """In the child, before exec: die with the launcher, join the group, take the limits."""
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    group.enter()
    for kind, value in (
        (resource.RLIMIT_DATA, limits.memory_mb * MEGABYTE),
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_size_mb * MEGABYTE),
        (resource.RLIMIT_NOFILE, limits.open_files),
    ):
        _, hard = resource.getrlimit(kind)
        resource.setrlimit(kind, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)


def run(argv: list[str], limits: ProcessLimits) -> int:
    """Run `argv` under `limits` until it exits; the exit status to leave with."""
    libc = _libc()
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    # A SIGTERM (not a SIGKILL) when our parent dies: we still kill everything we started.
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if not limits.network:
        _isolate_network()
    group = _Group(limits.max_processes)
    stop: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        stop.append(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    if os.getppid() == 1:  # the parent died before the death signal was armed
        return 128 + signal.SIGTERM
    try:
        # The launcher is single-threaded, so preexec_fn is safe here.
        child = subprocess.Popen(argv, preexec_fn=lambda: _child_setup(limits, group), close_fds=False)  # noqa: PLW1509
    except OSError as exc:
        group.kill_all()
        print(f"toolfactory-confine: cannot start {argv[0]!r}: {exc}", file=sys.stderr, flush=True)
        return 127
    status: int | None = None
    try:
        while status is None:
            if stop:
                status = 128 + stop[0]
            elif group.over_limit():
                print(f"toolfactory-confine: process limit ({limits.max_processes}) exceeded", file=sys.stderr, flush=True)
                status = EXIT_PROCESS_LIMIT
            else:
                status = _reap().get(child.pid)
                if status is None:
                    time.sleep(POLL_SECONDS)
    finally:
        group.kill_all()
        _reap()
    return status


def main(args: list[str] | None = None) -> int:
    args = sys.argv[1:] if args is None else args
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m toolfactory.executable.confine LIMITS_JSON -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    return run(args[2:], ProcessLimits(**json.loads(args[0])))


if __name__ == "__main__":
    sys.exit(main())
