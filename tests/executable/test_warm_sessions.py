"""Warm sessions: a source's processes reused between dialogues, each handed out fresh.

Each reset kind with a real source: BFCL's file system (a Python environment's instance made
anew) and the npm memory server (a server's working folder emptied), what one session wrote
invisible to the next; vetting tells a source whose reset keeps sessions apart from one whose
state survives it (a module-level list); an idle process that died or hangs is replaced and the
next session still works.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from .test_mcp_servers import memory_server
from conftest import _ci
from toolfactory.executable.confine import descendants
from toolfactory.executable.pool import WarmPools, warm
from toolfactory.executable.python_env import PythonEnvironment
from toolfactory.executable.settings import PythonEnvironmentSettings
from toolfactory.executable.vetting import vet

HERE = Path(__file__).parent


def file_system(**settings: Any) -> PythonEnvironment:
    if importlib.util.find_spec("bfcl_eval") is None:
        (pytest.fail if _ci() else pytest.skip)("BFCL's environments need bfcl-eval (make setup installs it)")
    return PythonEnvironment(PythonEnvironmentSettings(name="files", preset="GorillaFileSystem", **settings))


def _pid(session: Any) -> int:
    return int(session.process.pid)


def test_a_reset_instance_forgets_what_the_last_session_wrote_and_no_process_is_started() -> None:
    env = file_system()
    pools = WarmPools()

    async def go() -> list[Any]:
        seen = []
        for folder in ("first", "second", "third"):
            async with pools.session(env, env.settings) as session:
                before = await session.state()
                await session.call("mkdir", {"dir_name": folder})
                seen.append((_pid(session), session.reused, before, await session.state()))
        return seen

    try:
        seen = asyncio.run(go())
    finally:
        pools.close()
    pids = {pid for pid, *_ in seen}
    assert len(pids) == 1, "one process served the three sessions"
    assert [reused for _, reused, _, _ in seen] == [False, True, True]
    fresh = seen[0][2]
    assert all(before == fresh for _, _, before, _ in seen), "each session began from the initial state"
    assert "second" in str(seen[1][3]) and "first" not in str(seen[1][3])
    assert pools.counts().started == 1 and pools.counts().reused == 2


def test_a_reset_server_process_starts_from_an_empty_working_folder(npm_servers: Path) -> None:
    env = memory_server(npm_servers)
    pools = WarmPools()
    entity = {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}

    async def go() -> list[Any]:
        seen = []
        for _ in range(2):
            async with pools.session(env, env.settings) as session:
                before = await session.state()
                await session.call("create_entities", {"entities": [entity]})
                seen.append((session.link.process.pid, session.reused, before, await session.state()))
        return seen

    try:
        (pid1, reused1, before1, after1), (pid2, reused2, before2, after2) = asyncio.run(go())
    finally:
        pools.close()
    assert pid1 == pid2 and (reused1, reused2) == (False, True)
    assert before1 == before2 == {"tool": {"entities": [], "relations": []}, "files": {}}
    assert after1 == after2 and after1["tool"]["entities"] == [entity]


def test_vetting_finds_whether_a_reset_keeps_sessions_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("PYTHONPATH", str(HERE))
    leaky = asyncio.run(vet(PythonEnvironment(PythonEnvironmentSettings(name="leaky", class_path="toolenvs:Leaky")), timeout_seconds=240))
    assert leaky.failure is None, leaky.failure
    assert leaky.warm is False, "the module's notes survive a new instance: every session needs a new process"
    files = asyncio.run(vet(file_system(), timeout_seconds=240))
    assert files.failure is None and files.warm is True and files.reset_seconds is not None
    assert files.reset_seconds < files.start_seconds  # type: ignore[operator]


def test_the_setting_overrides_what_vetting_found() -> None:
    env = file_system()
    assert warm(env.settings, True) and not warm(env.settings, None) and not warm(env.settings, False)
    forced = file_system(warm_sessions=False)
    assert not warm(forced.settings, True)
    assert warm(file_system(warm_sessions=True).settings, None)


@pytest.mark.parametrize("fault", ["killed", "hung"])
def test_a_pooled_process_that_died_or_hangs_is_replaced_without_failing_the_next_session(fault: str) -> None:
    env = file_system(start_timeout_seconds=5.0)
    pools = WarmPools()

    async def go() -> tuple[int, int, bool, Any]:
        async with pools.session(env, env.settings) as session:
            first = _pid(session)
            launcher = session.process.pid
        # Idle in the pool: the process dies, or stops answering.
        os.killpg(launcher, signal.SIGKILL if fault == "killed" else signal.SIGSTOP)
        async with pools.session(env, env.settings) as session:
            answer = await session.call("ls", {})
            return first, _pid(session), session.reused, answer

    try:
        first, second, reused, answer = asyncio.run(go())
    finally:
        pools.close()
    assert second != first and not reused
    assert not answer.is_error
    assert pools.counts().replaced == 1 and pools.counts().started == 2


def test_a_caller_that_gives_up_while_a_process_starts_leaves_nothing_running_or_held() -> None:
    env = file_system()
    pools = WarmPools()
    before = _runners()  # other tests' (a warm pool's, a Ray worker's)

    async def go() -> tuple[Any, bool]:
        with pytest.raises(TimeoutError):  # gives up before the runner has started
            async with asyncio.timeout(0.01):
                async with pools.session(env, env.settings):
                    pass
        # The pool is whole: a session still comes, within the bound of one process.
        async with pools.session(env, env.settings) as session:
            return await session.call("pwd", {}), session.reused

    try:
        answer, _ = asyncio.run(go())
        assert not answer.is_error
        pool = next(iter(pools._pools.values()))
        assert pool.alive <= 1 and len(pool.idle) == pool.alive
    finally:
        pools.close()
    assert not _runners() - before


def _runners() -> set[int]:
    return {pid for pid in descendants(os.getpid()) if b"runner.py" in _cmdline(pid)}


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # it exited meanwhile
        return b""
