"""Record and replay: each executed call's source version is recorded with the dialogue, and a
replay on another version that answers otherwise is the source's drift (`exec_source_drifted`),
not a wrong record (`exec_result_mismatch`). With BFCL's file system, whose version is the
installed bfcl-eval's."""

from __future__ import annotations

import asyncio
import importlib.util
import json

import pytest

from conftest import _ci
from toolfactory.executable.python_env import PythonEnvironment
from toolfactory.executable.settings import PythonEnvironmentSettings
from toolfactory.models import Dialogue, Function, Message, ToolCall
from toolfactory.stages.verify.execution import ExecutionLayer

PWD = Function(name="pwd", description="The current folder.", parameters={"type": "object", "properties": {}})
HOME = {"root": {"alex": {"type": "directory", "contents": {}}}}


@pytest.fixture
def files() -> PythonEnvironmentSettings:
    if importlib.util.find_spec("bfcl_eval") is None:
        (pytest.fail if _ci() else pytest.skip)("BFCL's environments need bfcl-eval (make setup installs it)")
    return PythonEnvironmentSettings(name="files", preset="GorillaFileSystem", initial_state=HOME, deterministic=True)


def dialogue(answer: str, version: str) -> Dialogue:
    call = ToolCall(id="call_0", name="pwd", arguments="{}")
    messages = [Message(role="user", content="Where am I?"), Message(role="assistant", tool_calls=[call]),
                Message(role="tool", tool_call_id="call_0", name="pwd", content=answer),
                Message(role="assistant", content="In alex.")]
    execution = {"calls": [{"source": "files", "name": "pwd", "arguments": "{}", "is_error": False, "truncated": False}],
                 "versions": {"files": version}}
    return Dialogue(id="d", task_id="t", tools=[PWD], messages=messages, recipe="toolace", generation={"execution": execution})


def codes(record: Dialogue, settings: PythonEnvironmentSettings) -> list[str]:
    layer = ExecutionLayer({"files": (PythonEnvironment(settings), settings)})
    return sorted(v.code for v in asyncio.run(layer.verdicts(record)))


def test_the_installed_version_is_what_a_session_says(files: PythonEnvironmentSettings) -> None:
    from importlib import metadata

    assert files.distribution_version() == f"bfcl_eval {metadata.version('bfcl_eval')}"


def test_an_answer_that_changed_with_the_source_s_version_is_drift_and_on_the_same_version_a_mismatch(
        files: PythonEnvironmentSettings) -> None:
    now = files.distribution_version()
    real = asyncio.run(_pwd(files))
    assert codes(dialogue(real, now), files) == []
    assert codes(dialogue(real, "bfcl_eval 2020.1.1"), files) == []  # another version, same answer: no drift
    assert codes(dialogue(json.dumps({"current_working_directory": "/home"}), now), files) == ["exec_result_mismatch"]
    assert codes(dialogue(json.dumps({"current_working_directory": "/home"}), "bfcl_eval 2020.1.1"), files) == ["exec_source_drifted"]


def test_a_record_without_versions_is_judged_as_before(files: PythonEnvironmentSettings) -> None:
    record = dialogue(json.dumps({"current_working_directory": "/home"}), "")
    assert codes(record, files) == ["exec_result_mismatch"]


async def _pwd(settings: PythonEnvironmentSettings) -> str:
    async with PythonEnvironment(settings).session() as session:
        return (await session.call("pwd", {})).content
