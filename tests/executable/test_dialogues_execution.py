"""Real execution in the dialogues stage: the simulator over HTTP plays the user and the
assistant, the calls run on a Python environment in runner processes of their own."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import http
from toolfactory.config import Config, validate_config
from toolfactory.executable.pool import pools
from toolfactory.executable.confine import descendants
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue, Task, Tool
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.dialogues.stage import DialoguesStage
from toolfactory.stages.tools.executable import import_executable

from .conftest import QUIET

HERE = Path(__file__).parent
@pytest.fixture
def envs_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def config(*environments: dict[str, Any]) -> Config:
    return validate_config({"tools": {"environments": list(environments)}, "dialogues": {"reject_early": False}})


def source_tool(cfg: Config, name: str) -> Tool:
    [tool] = asyncio.run(import_executable(name, cfg.tools)).records
    assert isinstance(tool, Tool)
    return tool


def dialogues(sim: Any, cfg: Config, tasks: list[Task], **settings: float) -> tuple[StageOutput, int]:
    """The shard's output, and the LLM calls made for the tool role (the LLM playing a tool)."""
    http.post(f"{sim.root_url}/simulator/settings", json={**QUIET, **settings}).raise_for_status()

    async def go() -> tuple[StageOutput, int]:
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), cfg.llm) as gateway:
            ctx = ShardContext(config=cfg, run_id="r", gateway=gateway)
            out = await DialoguesStage().run(ShardSpec("dialogues", 0, ()), [t.model_dump() for t in tasks], ctx)
            return out, gateway.meter.role("tool").calls

    return asyncio.run(go())


def runners() -> set[int]:
    """Runner processes this test process started that are alive now."""
    found = set()
    for pid in descendants(os.getpid()):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if len(argv) > 2 and argv[2].endswith(b"runner.py"):  # the runner, not its launcher
                found.add(pid)
        except OSError:
            pass
    return found


class MostRunners:
    """The most runner processes alive at once while it watches (a thread polling /proc)."""

    def __init__(self) -> None:
        # Runners of earlier tests of this process (a warm pool's, another test's) are not counted.
        self.before = runners()
        self.most, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.most = max(self.most, len(runners() - self.before))
            time.sleep(0.02)

    def __enter__(self) -> MostRunners:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_calls_run_on_a_fresh_environment_per_dialogue_and_their_results_are_the_tool_messages(sim: Any, envs_on_path: None) -> None:
    cfg = config({"name": "counter", "class_path": "toolenvs:Counter", "allow": ["add"], "max_sessions": 1})
    tool = source_tool(cfg, "counter")
    tasks = [Task(id=f"t{k}", tools=[tool], instruction=f"Add {k + 2} to the counter.") for k in range(3)]
    pools().close()  # warm processes of earlier tests in this process are not this test's
    with MostRunners() as watch:
        out, played = dialogues(sim, cfg, tasks)
    assert len(out.records) == 3 and not out.rejected and played == 0
    assert watch.most == 1  # max_sessions: one session of the source at a time
    for dialogue in out.records:
        assert isinstance(dialogue, Dialogue)
        calls = [c for m in dialogue.messages if m.tool_calls for c in m.tool_calls]
        results = [m.content for m in dialogue.messages if m.role == "tool"]
        executed = dialogue.generation["execution"]
        assert calls and [c["name"] for c in executed["calls"]] == [c.name for c in calls]
        # The tools stage vetted the source: each call carries what its card says, for the replay.
        assert all(c["deterministic"] is True for c in executed["calls"])
        # Each dialogue's counter starts at 0: its results and final state are its own calls' alone.
        total = 0
        for call, result in zip(calls, results):
            total += json.loads(call.arguments)["amount"]
            assert result == json.dumps({"value": total})
        assert executed["states"]["counter"]["value"] == total
        assert executed["states"]["counter"]["history"] == [json.loads(c.arguments)["amount"] for c in calls]
    assert out.profile["executed_dialogues"] == {"toolalpaca": 3}
    # Vetting found that making the instance anew keeps two sessions apart: one process served the
    # three dialogues, reset before each (a pool of this test process may already hold it).
    began = [d.generation["execution"]["sessions"]["counter"] for d in out.records if isinstance(d, Dialogue)]
    assert began.count("started") <= 1 and began.count("reused") >= 2, began
    assert out.profile["sessions_reused_by_source"]["counter"] >= 2
    assert len(runners() - watch.before) <= 1  # the warm one, idle
    pools().close()
    assert not runners() - watch.before


def test_a_hanging_environment_rejects_its_dialogue_with_exec_timeout_and_the_shard_goes_on(sim: Any, envs_on_path: None) -> None:
    cfg = config({"name": "hostile", "class_path": "toolenvs:Hostile", "allow": ["hang"], "call_timeout_seconds": 1, "vet": False},
                 {"name": "counter", "class_path": "toolenvs:Counter", "allow": ["add"]})
    before = runners()
    hang, add = source_tool(cfg, "hostile"), source_tool(cfg, "counter")
    tasks = [Task(id="hangs", tools=[hang], instruction="Wait for it."), Task(id="adds", tools=[add], instruction="Add 3.")]
    out, _ = dialogues(sim, cfg, tasks)
    assert [r.reasons for r in out.rejected] == [["exec_timeout"]] and out.rejected[0].record["task"]["id"] == "hangs"
    assert [d.task_id for d in out.records if isinstance(d, Dialogue)] == ["adds"]
    # The rejected dialogue ran its source too: it counts with the dialogues that did.
    assert out.profile["executed_dialogues_by_source"] == {"counter": 1, "hostile": 1}, out.profile
    pools().close()  # the warm counter; the hung process was stopped with its session
    assert not runners() - before


def test_a_call_that_breaks_the_schema_gets_the_400_without_running(sim: Any, envs_on_path: None) -> None:
    # The simulator's wrong type for an integer is its digits as a string: a near miss, coerced by default.
    cfg = config({"name": "counter", "class_path": "toolenvs:Counter", "allow": ["add"], "near_miss_types": "reject"})
    tool = source_tool(cfg, "counter")
    out, played = dialogues(sim, cfg, [Task(id="t", tools=[tool], instruction="Add 4 to the counter.")], rate_wrong_type=1.0)
    [dialogue] = out.records
    assert isinstance(dialogue, Dialogue) and played == 0
    answers = [json.loads(m.content or "") for m in dialogue.messages if m.role == "tool"]
    refused = [a for a in answers if isinstance(a, dict) and a.get("status_code") == 400]
    assert refused and "invalid arguments" in refused[0]["error"]
    executed = (dialogue.generation.get("execution") or {}).get("calls", [])
    assert len(executed) == len(answers) - len(refused)


def test_an_mcp_session_opened_by_a_call_in_another_task_closes_when_the_dialogue_ends() -> None:
    # Parallel calls and self-consistency samples run in tasks of their own; an MCP session is
    # an anyio task group, which must be left by the task that entered it.
    from toolfactory.models import ToolCall
    from toolfactory.stages.dialogues.execution import DialogueExecution

    server = {"name": "time", "command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
    cfg = validate_config({"tools": {"mcp": [server]}})
    tool = source_tool(cfg, "time")
    call = ToolCall(id="c1", name="convert_time", arguments=json.dumps(
        {"source_timezone": "Asia/Tokyo", "time": "09:30", "target_timezone": "UTC"}))

    async def go() -> tuple[Any, dict[str, Any] | None]:
        async with DialogueExecution(Task(id="t", tools=[tool], instruction="Convert."), cfg.tools) as live:
            result = await asyncio.create_task(live.respond(tool, tool.function("convert_time"), call))
            return result, await live.metadata()

    result, metadata = asyncio.run(go())
    assert not result.is_error and "00:30" in result.content
    assert metadata is not None and [c["name"] for c in metadata["calls"]] == ["convert_time"]
