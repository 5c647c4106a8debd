"""Tasks written from what executable tools really answered: the tasks stage explores a fresh
environment of each executable source (BFCL's environments, run from the installed bfcl-eval in
runner processes of their own), lists what exists there in the request-writing prompts, and the
simulator, over HTTP, writes requests that name it."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import _ci, http
from toolfactory.config import Config, validate_config
from toolfactory.executable.registry import environments
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue, Task, Tool
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.dialogues.stage import DialoguesStage
from toolfactory.stages.tasks.exploration import SECTION_HEADING, facts_in
from toolfactory.stages.tasks.stage import TasksStage
from toolfactory.stages.tools.executable import import_executable

ENVS = Path(__file__).parent / "executable"
#: A home folder whose names no writer would guess.
FILES = {"root": {"kestrel": {"type": "directory", "contents": {
    "quarterly-zephyr.txt": {"type": "file", "content": "revenue up in the north"},
    "ledger_okapi.csv": {"type": "file", "content": "a,b\n1,2"},
}}}}
QUIET = {"latency_ms": 0, "latency_jitter_ms": 0, "rate_malformed_json": 0, "rate_hallucinated_function": 0,
         "rate_missing_required": 0, "rate_wrong_type": 0, "rate_parallel_calls": 0, "rate_follow_up_call": 0,
         "rate_clarify": 0, "rate_decline": 0, "obedience": 1.0}


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    """The simulator over HTTP, following the prompts it is given (`obedience` 1)."""
    with start_simulator(SimulatorSettings(**QUIET)) as simulator:
        http.post(f"{simulator.root_url}/simulator/settings", json=QUIET).raise_for_status()
        yield simulator


@pytest.fixture(scope="module")
def bfcl() -> None:
    if importlib.util.find_spec("bfcl_eval") is None:
        reason = "needs bfcl-eval (pip install --no-deps bfcl-eval==2026.3.23)"
        if _ci():
            pytest.fail(reason)
        pytest.skip(reason)


def config(source: dict[str, Any], recipe: str = "toolalpaca", explore: bool = True, **tasks: Any) -> Config:
    return validate_config({
        "tools": {"builtin_catalog": False, "environments": [source]},
        "tasks": {"instructions_per_tool": 3, "recipes": {recipe: 1.0}, "explore": explore, **tasks},
    })


class Prompts:
    """Every request-writing prompt the gateway sends (the gateway itself is the real one)."""

    def __init__(self, gateway: LLMGateway) -> None:
        self.sent: list[str] = []
        original = gateway.chat

        async def chat(role: str, messages: Any, **kwargs: Any) -> Any:
            self.sent.append("\n".join(str(m.get("content") or "") for m in messages))
            return await original(role, messages, **kwargs)

        gateway.chat = chat  # type: ignore[method-assign]


def tasks_of(sim: Any, cfg: Config, name: str) -> tuple[StageOutput, Prompts, Tool]:
    """The tasks shard over the source `name`'s tool (imported and vetted as the tools stage does)."""
    [tool] = asyncio.run(import_executable(name, cfg.tools)).records
    assert isinstance(tool, Tool)

    async def go() -> tuple[StageOutput, Prompts]:
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), cfg.llm) as gateway:
            prompts = Prompts(gateway)
            ctx = ShardContext(config=cfg, run_id="r", gateway=gateway)
            spec = ShardSpec("tasks", 0, (), {"part": 0, "parts": 1})
            return await TasksStage().run(spec, [tool.model_dump()], ctx), prompts

    out, prompts = asyncio.run(go())
    return out, prompts, tool


def initial_state(cfg: Config, name: str) -> Any:
    async def go() -> Any:
        async with environments(cfg.tools)[name].session() as session:
            return await session.state()

    return asyncio.run(go())


def test_facts_are_names_really_present_in_the_fresh_environment(sim: Any, bfcl: None) -> None:
    cfg = config({"name": "files", "preset": "GorillaFileSystem", "initial_state": FILES})
    out, prompts, _ = tasks_of(sim, cfg, "files")
    assert out.profile["exploration"] == {"files: explored": 1}
    assert out.profile["exploration_calls"]["files"] >= 3  # ls, pwd, du … and reads of what ls listed
    state = json.dumps(initial_state(cfg, "files"))
    [prompt] = [p for p in prompts.sent if SECTION_HEADING in p]
    section = prompt[prompt.index(SECTION_HEADING):]
    for name in ("kestrel", "quarterly-zephyr.txt", "ledger_okapi.csv"):
        assert f'"{name}"' in section and name in state
    # What the state holds beyond names (a file's short content), and what the reads answered.
    assert '"revenue up in the north"' in section
    assert out.profile["exploration_facts"]["files"] >= 4


def test_the_written_requests_name_the_files_that_exist(sim: Any, bfcl: None) -> None:
    cfg = config({"name": "files", "preset": "GorillaFileSystem", "initial_state": FILES, "allow": ["ls", "cat", "wc", "tail"]})
    out, _, _ = tasks_of(sim, cfg, "files")
    made = [t for t in out.records if isinstance(t, Task)]
    assert len(made) == 3
    for task in made:
        assert "quarterly-zephyr.txt" in task.instruction or "ledger_okapi.csv" in task.instruction, task.instruction


def test_the_assistant_s_calls_carry_the_names_the_requests_give(sim: Any, bfcl: None) -> None:
    cfg = config({"name": "files", "preset": "GorillaFileSystem", "initial_state": FILES, "allow": ["cat", "wc", "tail"]})
    out, _, _ = tasks_of(sim, cfg, "files")
    made = [t for t in out.records if isinstance(t, Task)]

    async def go() -> StageOutput:
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), cfg.llm) as gateway:
            ctx = ShardContext(config=cfg, run_id="r", gateway=gateway)
            return await DialoguesStage().run(ShardSpec("dialogues", 0, ()), [t.model_dump() for t in made], ctx)

    dialogues = asyncio.run(go())
    calls = [call for d in dialogues.records if isinstance(d, Dialogue) for call in d.generation["execution"]["calls"]]
    assert calls
    for call in calls:  # every file a call names is one the environment has, and the call worked
        arguments = json.loads(call["arguments"]) if isinstance(call["arguments"], str) else call["arguments"]
        assert arguments["file_name"] in ("quarterly-zephyr.txt", "ledger_okapi.csv") and not call["is_error"], call


@pytest.mark.parametrize("recipe", ["toolllm", "toolace"])
def test_every_recipe_s_prompt_lists_the_facts(sim: Any, bfcl: None, recipe: str) -> None:
    cfg = config({"name": "messages", "preset": "MessageAPI"}, recipe, api_filter={"enabled": False})
    out, prompts, _ = tasks_of(sim, cfg, "messages")
    assert out.profile["exploration"] == {"messages: explored": 1}
    listed = [p for p in prompts.sent if SECTION_HEADING in p]
    assert listed and all('"Alice"' in p and '"USR001"' in p for p in listed)
    assert any(isinstance(t, Task) for t in out.records)


def test_blueprints_are_designed_with_the_facts_and_their_calls_name_them(sim: Any, bfcl: None) -> None:
    cfg = config({"name": "files", "preset": "GorillaFileSystem", "initial_state": FILES, "allow": ["rm", "mv", "ls"]},
                 blueprints={"enabled": True, "multi_turn": 0.0})
    out, prompts, _ = tasks_of(sim, cfg, "files")
    assert any(SECTION_HEADING in p and '"quarterly-zephyr.txt"' in p for p in prompts.sent)
    kept = [t for t in out.records if isinstance(t, Task)]
    assert kept, out.rejections()
    for task in kept:
        assert task.blueprint is not None
        named = [v for turn in task.blueprint.turns for call in turn.calls for v in call.arguments.values()]
        assert {"quarterly-zephyr.txt", "ledger_okapi.csv"} & set(named)


def test_a_source_whose_exploration_fails_still_gets_tasks_with_the_reason_counted(
        sim: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ENVS))
    # Not vetted: every listed function is explored, and `crash` ends the runner mid-call.
    cfg = config({"name": "hostile", "class_path": "toolenvs:Hostile", "allow": ["crash", "shout"], "vet": False})
    out, prompts, _ = tasks_of(sim, cfg, "hostile")
    assert out.profile["exploration"] == {"hostile: exec_server_crashed": 1}
    assert "exploration_facts" not in out.profile
    assert len([t for t in out.records if isinstance(t, Task)]) == 3
    assert not any(SECTION_HEADING in p for p in prompts.sent)
    sys.modules.pop("toolenvs", None)


def test_exploration_off_sends_today_s_prompts(sim: Any, bfcl: None) -> None:
    cfg = config({"name": "files", "preset": "GorillaFileSystem", "initial_state": FILES}, explore=False)
    out, prompts, _ = tasks_of(sim, cfg, "files")
    assert "exploration" not in out.profile
    assert prompts.sent and not any(SECTION_HEADING in p for p in prompts.sent)
    assert len([t for t in out.records if isinstance(t, Task)]) == 3


def test_facts_are_things_not_field_names() -> None:
    state = {"user_map": {"Alice": "USR001"}, "root": {"name": "alex", "contents": {
        "a.txt": {"name": "a.txt"}, "docs": {"name": "docs", "contents": {"b.txt": {"name": "b.txt"}}}}},
        "count": 4, "ticket_id": 7, "open": True, "error": "no such thing"}
    found = {(f.label, f.value) for f in facts_in(state)}
    assert found == {("user_map", "Alice"), ("user_map", "USR001"), ("name", "alex"), ("contents", "a.txt"),
                     ("name (in a.txt)", "a.txt"), ("contents", "docs"), ("name (in docs)", "docs"),
                     ("contents (in docs)", "b.txt"), ("name (in docs/b.txt)", "b.txt"), ("ticket_id", "7")}


def test_a_source_s_many_instructions_draw_a_recipe_each(sim: Any, bfcl: None) -> None:
    cfg = validate_config({
        "tools": {"builtin_catalog": False, "environments": [{"name": "files", "preset": "GorillaFileSystem", "initial_state": FILES}]},
        "tasks": {"instructions_per_tool": 1, "instructions_per_executable_tool": 12,
                  "recipes": {"toolalpaca": 0.5, "toolace": 0.5}},
    })
    out, _, _ = tasks_of(sim, cfg, "files")
    made = [t for t in out.records if isinstance(t, Task)]
    recipes = {t.recipe for t in made}
    assert recipes == {"toolalpaca", "toolace"}, recipes  # 12 draws at even odds: both (1 in 2048 not)
    assert len(made) + len(out.rejected) >= 10 and len({t.id for t in made}) == len(made)


def test_a_clock_is_not_explored_so_a_rerun_writes_the_same_prompts() -> None:
    # The time server's get_current_time answers otherwise in every session (vetting finds it not
    # deterministic): its answer in the prompts would change them from run to run, and a re-run
    # could take nothing from the LLM cache.
    import datetime

    from toolfactory.stages.tasks.exploration import explore

    cfg = validate_config({"tools": {"builtin_catalog": False, "mcp": [
        {"name": "time", "command": "mcp-server-time", "args": ["--local-timezone", "UTC"]}]}})
    [tool] = asyncio.run(import_executable("time", cfg.tools)).records
    assert tool.provenance["vetting"]["functions"]["get_current_time"]["deterministic"] is False
    found = asyncio.run(explore(environments(cfg.tools)["time"], tool))
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    assert found.failure is None and not [f for f in found.facts if today in f.value]


def test_a_value_that_says_nothing_was_found_is_no_fact() -> None:
    # BFCL's trading bot answers a company it does not know with this "symbol".
    assert facts_in({"symbol": "Stock not found"}, "get_symbol_by_name") == []
    assert [f.value for f in facts_in({"symbol": "NVDA"}, "get_symbol_by_name")] == ["NVDA"]


def test_an_answer_with_an_error_beside_its_status_is_a_refusal() -> None:
    from toolfactory.stages.tasks.exploration import refusal

    assert refusal({"cancel_status": False, "error": "Invalid access token"}) == "Invalid access token"
    assert refusal({"cancel_status": True}) is None and refusal({"error": ""}) is None and refusal("fine") is None
