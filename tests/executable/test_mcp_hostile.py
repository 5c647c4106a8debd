"""An MCP server that misbehaves costs one reason-coded failure, never a hang, a crash of the
caller or a process left behind (tests/executable/hostile_mcp_server.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from toolfactory.executable.confine import ProcessLimits
from toolfactory.executable.mcp import McpEnvironment, McpSourceSettings
from toolfactory.executable.session import ExecutionFailed, executable_source
from toolfactory.definitions.validity import definition_problems

SERVER = str(Path(__file__).with_name("hostile_mcp_server.py"))
# On each server's command line (the server reads only its mode): `running` counts this process's
# servers, not those of tests that another pytest worker runs at the same time (test_mcp_cli).
MARK = f"mark-{uuid.uuid4().hex}"


def hostile(mode: str = "ok", **settings: Any) -> McpEnvironment:
    fields: dict[str, Any] = {"name": "hostile", "command": sys.executable, "args": [SERVER, mode, MARK], "call_timeout_seconds": 3.0,
                              "start_timeout_seconds": 20.0, "output_cap_bytes": 1024}
    return McpEnvironment(McpSourceSettings(**{**fields, **settings}))


def running() -> list[int]:
    """Processes of the hostile server still alive (zombies excluded)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes()
            state = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if SERVER.encode() in cmdline and MARK.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def nothing_left(seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while running() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not running()


def failure_of_call(env: McpEnvironment, name: str) -> ExecutionFailed:
    async def go() -> ExecutionFailed:
        async with env.session() as session:
            assert (await session.call("echo", {"text": "alive"})).content == "alive"
            with pytest.raises(ExecutionFailed) as caught:
                await session.call(name, {})
            return caught.value

    return asyncio.run(go())


def test_a_call_that_never_answers_is_exec_timeout_and_the_server_is_killed() -> None:
    started = time.monotonic()
    failure = failure_of_call(hostile(call_timeout_seconds=1.0), "sleep")
    assert failure.reason == "exec_timeout" and "sleep" in failure.message
    assert time.monotonic() - started < 30
    assert nothing_left()


def test_an_endless_line_on_stdout_is_exec_output_flood() -> None:
    assert failure_of_call(hostile(), "flood").reason == "exec_output_flood"
    assert nothing_left()


def test_endless_non_protocol_lines_are_exec_output_flood() -> None:
    assert failure_of_call(hostile(), "garbage").reason == "exec_output_flood"
    assert nothing_left()


def test_a_server_that_exits_mid_call_is_exec_server_crashed() -> None:
    failure = failure_of_call(hostile(), "exit")
    assert failure.reason == "exec_server_crashed" and "status 3" in failure.message
    assert nothing_left()


def test_a_server_that_forks_past_its_limit_is_exec_process_limit() -> None:
    failure = failure_of_call(hostile(limits=ProcessLimits(max_processes=4), call_timeout_seconds=20.0), "fork")
    assert failure.reason == "exec_process_limit"
    assert nothing_left()


def test_a_failed_session_refuses_further_calls_with_the_same_reason() -> None:
    async def go() -> tuple[str, str]:
        async with hostile().session() as session:
            with pytest.raises(ExecutionFailed) as first:
                await session.call("exit", {})
            with pytest.raises(ExecutionFailed) as second:
                await session.call("echo", {"text": "again"})
            return first.value.reason, second.value.reason

    assert asyncio.run(go()) == ("exec_server_crashed", "exec_server_crashed")


def test_an_error_result_is_a_result_the_assistant_sees_not_a_failure() -> None:
    async def go() -> Any:
        async with hostile().session() as session:
            return await session.call("fail", {})

    result = asyncio.run(go())
    assert (result.is_error, result.content) == (True, "the disk is on fire")


def test_a_result_longer_than_the_output_cap_is_cut_and_marked() -> None:
    async def go() -> Any:
        async with hostile().session() as session:
            return await session.call("big", {})

    result = asyncio.run(go())
    assert (len(result.content), result.truncated, result.is_error) == (1024, True, False)


def test_a_server_that_never_answers_initialize_is_exec_start_failed_within_its_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(ExecutionFailed) as caught:
        asyncio.run(hostile("mute", start_timeout_seconds=1.0).list_tools())
    assert caught.value.reason == "exec_start_failed" and "initialize" in caught.value.message
    assert time.monotonic() - started < 30
    assert nothing_left()


def test_a_command_that_does_not_exist_is_exec_start_failed_naming_the_source() -> None:
    env = McpEnvironment(McpSourceSettings(name="ghost", command="no-such-mcp-server-here"))
    with pytest.raises(ExecutionFailed) as caught:
        asyncio.run(env.list_tools())
    assert caught.value.reason == "exec_start_failed"
    assert "ghost" in caught.value.message and "no-such-mcp-server-here" in caught.value.message


def test_a_server_that_dies_at_start_is_exec_start_failed_and_its_stderr_hides_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTILE_SECRET_VALUE", "s3cr3t-t0ken")
    env = hostile("crash", env={"HOSTILE_TOKEN": "${HOSTILE_SECRET_VALUE}"})
    with pytest.raises(ExecutionFailed) as caught:
        asyncio.run(env.list_tools())
    assert caught.value.reason == "exec_start_failed"
    assert "token *** refused" in caught.value.message and "s3cr3t-t0ken" not in str(caught.value)


def test_env_values_are_taken_from_the_environment_when_the_server_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTILE_SECRET_VALUE", "s3cr3t-t0ken")
    env = hostile(env={"HOSTILE_TOKEN": "${HOSTILE_SECRET_VALUE}"})

    async def go() -> str:
        async with env.session() as session:
            return (await session.call("env", {"name": "HOSTILE_TOKEN"})).content

    assert asyncio.run(go()) == "s3cr3t-t0ken"
    assert "s3cr3t-t0ken" not in env.settings.model_dump_json()


def test_a_listing_on_two_pages_is_read_whole_and_a_bad_schema_is_left_to_the_definition_checks() -> None:
    [tool] = asyncio.run(hostile("pages").list_tools())
    assert [f.name for f in tool.functions][:4] == ["echo", "env", "write", "fail"] and len(tool.functions) == 11
    assert executable_source(tool) == "hostile"
    assert {code for code, _ in definition_problems(tool)} == {"tool_invalid_schema"}


def test_non_protocol_lines_before_the_answers_are_skipped() -> None:
    [tool] = asyncio.run(hostile("banner", allow=["echo"]).list_tools())
    assert [f.name for f in tool.functions] == ["echo"]


def test_allow_and_deny_choose_the_functions_and_annotations_are_kept() -> None:
    [tool] = asyncio.run(hostile(deny=["bad_schema", "fork"]).list_tools())
    names = [f.name for f in tool.functions]
    assert "bad_schema" not in names and "fork" not in names and "echo" in names
    assert tool.provenance["mcp"]["functions"]["write"] == {"destructive": True, "read_only": False, "structured_output": False}
    assert definition_problems(tool) == []


def test_an_allowed_name_the_server_does_not_list_is_exec_start_failed() -> None:
    with pytest.raises(ExecutionFailed) as caught:
        asyncio.run(hostile(allow=["echo", "ehco"]).list_tools())
    assert caught.value.reason == "exec_start_failed" and "ehco" in caught.value.message


def test_each_session_has_its_own_working_folder_whose_files_are_its_state() -> None:
    env = hostile(state_files=True)

    async def go() -> tuple[Any, Any]:
        async with env.session() as first:
            await first.call("write", {"path": "notes.txt", "text": "hello"})
            written = await first.state()
        async with env.session() as second:
            fresh = await second.state()
        return written, fresh

    written, fresh = asyncio.run(go())
    assert list(written["files"]) == ["notes.txt"] and fresh == {"files": {}}


def test_a_cancelled_session_leaves_no_process() -> None:
    async def go() -> None:
        async with hostile().session() as session:
            task = asyncio.ensure_future(session.call("sleep", {}))
            await asyncio.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(go())
    assert nothing_left()


def test_a_killed_worker_leaves_no_server_running(tmp_path: Path) -> None:
    # A worker that opens a session and is killed outright (SIGKILL: no cleanup of its own runs).
    worker = tmp_path / "worker.py"
    worker.write_text(
        "import asyncio, sys\n"
        "from toolfactory.executable.mcp import McpEnvironment, McpSourceSettings\n"
        f"env = McpEnvironment(McpSourceSettings(name='hostile', command=sys.executable, args=[{SERVER!r}, 'ok', {MARK!r}]))\n"
        "async def main():\n"
        "    async with env.session() as session:\n"
        "        await session.call('echo', {'text': 'up'})\n"
        "        print('ready', flush=True)\n"
        "        await asyncio.sleep(3600)\n"
        "asyncio.run(main())\n"
    )
    process = subprocess.Popen([sys.executable, str(worker)], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        assert running()
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        assert nothing_left()
    finally:
        process.kill()
