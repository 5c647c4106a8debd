"""Warm sessions shared by a node's workers: the session host (toolfactory.executable.node_pool).

With a real local Ray: a session given back by one worker process is reset and handed to another
worker process (one start for both), and what the first wrote is invisible to the second; the
run's end closes the host with every process it kept. Without Ray: a lease held by a worker
process that died is given back, not reused, so a killed worker leaks no process.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest

from conftest import process_alive
from toolfactory.executable.confine import descendants
from toolfactory.executable.node_pool import HostRef, SessionHost, close_hosts

from .test_warm_sessions import file_system


def _lease_and_write(run_id: str, folder: str) -> tuple[int, bool, Any, Any]:
    """In a Ray worker, as a shard does: a warm session of BFCL's file system from the node's
    host (self-contained: Ray ships it by value to a worker that cannot import the tests)."""
    from toolfactory.executable.node_pool import use_host
    from toolfactory.executable.pool import open_session
    from toolfactory.executable.python_env import PythonEnvironment
    from toolfactory.executable.settings import PythonEnvironmentSettings

    assert use_host(run_id) is not None, "a Ray worker finds its node's host"
    env = PythonEnvironment(PythonEnvironmentSettings(name="files", preset="GorillaFileSystem"))

    async def go() -> tuple[int, bool, Any, Any]:
        async with open_session(env, env.settings, True) as session:
            before = await session.state()
            await session.call("mkdir", {"dir_name": folder})
            return os.getpid(), bool(session.reused), before, await session.state()

    return asyncio.run(go())


@pytest.mark.usefixtures("ray_cluster")
def test_two_worker_processes_share_one_warm_process_and_the_run_end_stops_it() -> None:
    import ray
    from ray import cloudpickle

    file_system()  # skips (fails in CI) without bfcl-eval
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    run_id = f"shared-{uuid.uuid4().hex[:8]}"
    # max_calls=1: Ray retires the worker after one task, so the second runs in another process.
    lease = ray.remote(num_cpus=0, max_calls=1)(_lease_and_write)
    first_pid, first_reused, first_before, first_after = ray.get(lease.remote(run_id, "first"), timeout=600)
    second_pid, second_reused, second_before, second_after = ray.get(lease.remote(run_id, "second"), timeout=600)

    assert first_pid != second_pid, "the two sessions were leased by two worker processes"
    assert (first_reused, second_reused) == (False, True), "the second worker got the first's process, reset"
    assert "first" in str(first_after)
    assert second_before == first_before, "the reset process holds what a fresh one does"
    assert "first" not in str(second_after), "what the first session wrote is invisible to the second"

    host = ray.get_actor(HostRef(run_id, ray.get_runtime_context().get_node_id()).name)
    assert ray.get(host.counts.remote(), timeout=120) == {"started": 1, "reused": 1, "replaced": 0}
    kept = descendants(ray.get(host.pid.remote(), timeout=120))
    assert kept, "the host keeps the warm process between sessions"

    assert close_hosts(run_id, 120) == 1
    deadline = time.monotonic() + 120
    while any(process_alive(pid) for pid in kept) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(process_alive(pid) for pid in kept), "the run's end stopped the processes its host kept"
    with pytest.raises(ValueError):
        ray.get_actor(HostRef(run_id, ray.get_runtime_context().get_node_id()).name)


def test_a_lease_of_a_dead_worker_is_given_back_and_its_process_stopped() -> None:
    env = file_system()
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = SessionHost(sweep_s=0.2)
    others = set(descendants(os.getpid()))  # this test process's own (a Ray head, servers of other tests)

    async def go() -> tuple[int, list[int], int, dict[str, int], int]:
        answer = await host.acquire(env, "files", dead.pid)
        assert isinstance(answer, tuple), answer
        lease, reused, _version = answer
        assert not reused
        await host.call(lease, "mkdir", {"dir_name": "left"})
        kept = [pid for pid in descendants(os.getpid()) if pid not in others]
        assert kept
        deadline = time.monotonic() + 60
        while host.leases() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        left = host.leases()
        # The next lease cannot be the dead worker's process: it was stopped, not put back.
        again = await host.acquire(env, "files", os.getpid())
        assert isinstance(again, tuple), again
        state = await host.state(again[0])
        await host.close()
        return left, kept, int(again[1]), host.counts(), len(str(state).split("left")) - 1

    left, kept, reused, counts, left_in_state = asyncio.run(go())
    assert left == 0, "the sweep gave the dead worker's lease back"
    assert reused == 0 and counts["started"] == 2, "its process was not reused"
    assert left_in_state == 0
    deadline = time.monotonic() + 60
    while any(process_alive(pid) for pid in kept) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(process_alive(pid) for pid in kept), "the dead worker's process was stopped"


def test_a_session_the_host_no_longer_holds_fails_as_a_crash_not_a_hang() -> None:
    env = file_system()
    host = SessionHost()

    async def go() -> Any:
        answer = await host.acquire(env, "files", os.getpid())
        assert isinstance(answer, tuple)
        await host.release(answer[0], False)
        failed = await host.call(answer[0], "ls", {})
        await host.close()
        return failed

    failed = asyncio.run(go())
    assert failed.reason == "exec_server_crashed"
    assert "given back" in failed.message


@pytest.mark.usefixtures("ray_cluster")
def test_a_host_nobody_closed_stops_itself_and_its_processes_once_idle() -> None:
    import ray

    env = file_system()
    name = f"toolfactory-sessions-idle-{uuid.uuid4().hex[:8]}"
    host = ray.remote(SessionHost).options(name=name, lifetime="detached", num_cpus=0).remote(0.2, 2.0)
    answer = ray.get(host.acquire.remote(env, "files", os.getpid()), timeout=600)
    assert isinstance(answer, tuple), answer
    kept = descendants(ray.get(host.pid.remote(), timeout=120))
    assert kept
    ray.get(host.release.remote(answer[0], True), timeout=120)  # idle from now on, its process kept warm
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name)
        except ValueError:
            break
        time.sleep(0.5)
    with pytest.raises(ValueError):
        ray.get_actor(name)
    deadline = time.monotonic() + 60
    while any(process_alive(pid) for pid in kept) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(process_alive(pid) for pid in kept), "its warm process stopped with it"
