"""Python environments as a tool source: real runner processes, real BFCL environment classes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from toolfactory.executable.confine import ProcessLimits, descendants
from toolfactory.executable.python_env import PythonEnvironment, read_function_docs
from toolfactory.executable.settings import PythonEnvironmentSettings
from toolfactory.executable.session import ExecutionFailed, executable_source

HERE = Path(__file__).parent
FILES = {"root": {"alex": {"type": "directory", "contents": {"notes.txt": {"type": "file", "content": "hello"}}}}}


@pytest.fixture
def envs_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def counter(**overrides: Any) -> PythonEnvironment:
    return PythonEnvironment(PythonEnvironmentSettings(**{"name": "counter", "class_path": "toolenvs:Counter", **overrides}))


def hostile(**overrides: Any) -> PythonEnvironment:
    return PythonEnvironment(PythonEnvironmentSettings(**{"name": "hostile", "class_path": "toolenvs:Hostile", **overrides}))


def gone(pids: list[int], seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{pid}").exists() for pid in pids):
            return True
        time.sleep(0.05)
    return False


def test_the_bfcl_preset_imports_gorilla_file_system_with_its_function_docs() -> None:
    env = PythonEnvironment(PythonEnvironmentSettings(name="files", preset="GorillaFileSystem", initial_state=FILES))
    [tool] = asyncio.run(env.list_tools())
    docs = read_function_docs(env.settings.resolved_function_docs() or "")
    assert [fn.name for fn in tool.functions] == [doc["name"] for doc in docs]
    assert executable_source(tool) == "files" and tool.source == "python"
    cd = tool.function("cd")
    assert cd is not None and cd.parameters["type"] == "object" and cd.parameters["required"] == ["folder"]


def test_a_session_runs_calls_on_the_real_class_and_its_state_changes() -> None:
    env = PythonEnvironment(PythonEnvironmentSettings(name="files", preset="GorillaFileSystem", initial_state=FILES))

    async def scenario() -> tuple[Any, Any, Any]:
        async with env.session() as session:
            before = await session.state()
            await session.call("mkdir", {"dir_name": "reports"})
            read = await session.call("cat", {"file_name": "notes.txt"})
            return before, read, await session.state()

    before, read, after = asyncio.run(scenario())
    assert json.loads(read.content) == {"file_content": "hello"} and not read.is_error
    assert "reports" not in before["root"]["contents"] and "reports" in after["root"]["contents"]


def test_an_error_answered_by_bfcl_s_convention_is_an_error_unless_turned_off() -> None:
    # BFCL's environments answer many failures with {"error": …} instead of raising.
    async def convert(settings: PythonEnvironmentSettings) -> tuple[Any, Any]:
        async with PythonEnvironment(settings).session() as session:
            failed = await session.call("si_unit_conversion", {"value": 1.0, "unit_in": "imperial", "unit_out": "metric"})
            done = await session.call("si_unit_conversion", {"value": 1.0, "unit_in": "km", "unit_out": "m"})
            return failed, done

    failed, done = asyncio.run(convert(PythonEnvironmentSettings(name="math", preset="MathAPI")))
    assert failed.is_error and json.loads(failed.content) == {"error": "Conversion from 'imperial' to 'metric' is not supported"}
    assert not done.is_error and json.loads(done.content) == {"result": 1000.0}
    failed, _ = asyncio.run(convert(PythonEnvironmentSettings(name="math", preset="MathAPI", error_keys=[])))
    assert not failed.is_error  # the convention turned off: only an exception is an error


def test_two_sessions_do_not_share_state(envs_on_path: None) -> None:
    env = counter(initial_state={"start": 10})

    async def scenario() -> tuple[Any, Any]:
        async with env.session() as first, env.session() as second:
            await first.call("add", {"amount": 5})
            return await first.state(), await second.state()

    first, second = asyncio.run(scenario())
    assert (first["value"], second["value"]) == (15, 10)


def test_the_initial_state_goes_to_the_constructor_and_private_attributes_are_not_state(envs_on_path: None) -> None:
    async def scenario() -> Any:
        async with counter(initial_state={"start": 2, "label": "c"}).session() as session:
            return await session.state()

    assert asyncio.run(scenario()) == {"value": 2, "label": "c", "history": []}


def test_an_exception_in_a_method_is_an_error_result_and_the_session_goes_on(envs_on_path: None) -> None:
    async def scenario() -> tuple[Any, Any]:
        async with counter().session() as session:
            failed = await session.call("divide", {"by": 0})
            return failed, await session.call("add", {"amount": 1})

    failed, after = asyncio.run(scenario())
    assert failed.is_error and failed.content == "ZeroDivisionError: division by zero"
    assert not after.is_error and after.structured == {"value": 1}


def test_what_a_method_prints_does_not_break_the_protocol(envs_on_path: None) -> None:
    async def scenario() -> Any:
        async with counter().session() as session:
            return await session.call("shout", {})

    assert asyncio.run(scenario()).content == "done"


def test_without_docs_the_functions_come_from_signatures_and_docstrings(envs_on_path: None) -> None:
    [tool] = asyncio.run(counter().list_tools())
    add = tool.function("add")
    assert add is not None and add.description == "Add to the counter."
    assert add.parameters["required"] == ["amount"]
    assert add.parameters["properties"]["amount"] == {"type": "integer", "description": "How much to add."}
    assert [fn.name for fn in tool.functions] == ["add", "divide", "shout"]


def test_a_hanging_method_is_exec_timeout_and_leaves_no_process(envs_on_path: None) -> None:
    pids: list[int] = []

    async def scenario() -> None:
        async with hostile(call_timeout_seconds=1.5).session() as session:
            pids.extend([session.process.pid, *descendants(session.process.pid)])
            await session.call("hang", {})

    with pytest.raises(ExecutionFailed) as failed:
        asyncio.run(scenario())
    assert failed.value.reason == "exec_timeout"
    assert len(pids) >= 2 and gone(pids)


def test_a_method_that_exits_is_exec_server_crashed(envs_on_path: None) -> None:
    async def scenario() -> None:
        async with hostile().session() as session:
            await session.call("crash", {})

    with pytest.raises(ExecutionFailed) as failed:
        asyncio.run(scenario())
    assert failed.value.reason == "exec_server_crashed"


def test_a_method_that_floods_its_output_is_exec_output_flood(envs_on_path: None) -> None:
    async def scenario() -> None:
        async with hostile(output_cap_bytes=4096).session() as session:
            await session.call("flood", {})

    with pytest.raises(ExecutionFailed) as failed:
        asyncio.run(scenario())
    assert failed.value.reason == "exec_output_flood"


def test_an_answer_far_beyond_the_cap_is_exec_output_flood(envs_on_path: None) -> None:
    async def scenario() -> None:
        async with hostile(output_cap_bytes=1024).session() as session:
            await session.call("huge", {})

    with pytest.raises(ExecutionFailed) as failed:
        asyncio.run(scenario())
    assert failed.value.reason == "exec_output_flood"


def test_a_long_answer_is_cut_at_the_output_cap_and_marked(envs_on_path: None) -> None:
    async def scenario() -> Any:
        async with hostile(output_cap_bytes=1024).session() as session:
            return await session.call("big", {})

    answer = asyncio.run(scenario())
    assert (len(answer.content), answer.truncated) == (1024, True)


def test_a_method_that_forks_past_the_limit_is_exec_process_limit(envs_on_path: None) -> None:
    async def scenario() -> None:
        async with hostile(limits=ProcessLimits(max_processes=3)).session() as session:
            await session.call("fork", {"n": 6})

    with pytest.raises(ExecutionFailed) as failed:
        asyncio.run(scenario())
    assert failed.value.reason == "exec_process_limit"


def test_a_class_that_cannot_be_made_is_exec_start_failed(envs_on_path: None) -> None:
    with pytest.raises(ExecutionFailed) as failed:
        asyncio.run(counter(initial_state={"no_such_argument": 1}).list_tools())
    assert failed.value.reason == "exec_start_failed" and "no_such_argument" in failed.value.message


def test_a_module_that_cannot_be_imported_is_an_error_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="class_path: module 'no_such_module_here' cannot be imported"):
        PythonEnvironmentSettings(name="x", class_path="no_such_module_here:Thing")


def test_an_unknown_preset_is_an_error_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="preset: unknown BFCL environment 'Nope'"):
        PythonEnvironmentSettings(name="x", preset="Nope")


HOLDER = """
import asyncio, sys, time
sys.path.insert(0, {here!r})
from toolfactory.executable.confine import descendants
from toolfactory.executable.python_env import PythonEnvironment
from toolfactory.executable.settings import PythonEnvironmentSettings

async def main():
    env = PythonEnvironment(PythonEnvironmentSettings(name="c", class_path="toolenvs:Counter"))
    async with env.session() as session:
        await session.call("add", {{"amount": 1}})
        print(" ".join(map(str, [session.process.pid, *descendants(session.process.pid)])), flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_a_killed_holder_of_sessions_leaves_no_process(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER.format(here=str(HERE))], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert holder.stdout is not None
    pids = [int(pid) for pid in holder.stdout.readline().split()]
    assert len(pids) >= 2 and not gone(pids, seconds=0.5)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert gone(pids)


def test_the_state_is_what_bfcl_s_own_executor_leaves_in_its_instance() -> None:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    from toolfactory.executable.runner import snapshot

    calls = [("mkdir", {"dir_name": "reports"}), ("cd", {"folder": "reports"}), ("touch", {"file_name": "q1.txt"}),
             ("echo", {"content": "revenue up", "file_name": "q1.txt"})]
    _, instances = execute_multi_turn_func_call(
        [f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})" for name, args in calls],
        {"GorillaFileSystem": FILES}, ["GorillaFileSystem"], "toolfactory", "state_test")
    env = PythonEnvironment(PythonEnvironmentSettings(name="files", preset="GorillaFileSystem", initial_state=FILES))

    async def scenario() -> Any:
        async with env.session() as session:
            for name, args in calls:
                assert not (await session.call(name, args)).is_error
            return await session.state()

    ours = asyncio.run(scenario())
    assert ours == snapshot(instances["GorillaFileSystem"])
    assert ours["root"]["contents"]["reports"]["contents"]["q1.txt"]["content"] == "revenue up"
