"""Tasks from verified blueprints: the simulator over HTTP plays the designer (and the dialogue's
agents), the ground-truth calls run on a Python environment in runner processes of their own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import http
from toolfactory.config import Config, validate_config
from toolfactory.errors import ConfigError
from toolfactory.executable.registry import environments
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue, Rejected, Task, Tool
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.dialogues.stage import DialoguesStage
from toolfactory.stages.tasks.stage import TasksStage
from toolfactory.stages.tools.executable import import_executable

HERE = Path(__file__).parent
@pytest.fixture(autouse=True)
def envs_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


@pytest.fixture(autouse=True)
def obedient_designer(sim: Any) -> Iterator[None]:
    """The simulator follows its prompts: a request states the values its calls take, as the
    designer prompt asks (with obedience 0 it writes a few of the prompt's words instead, and the
    blueprint is rejected as `blueprint_value_unstated`)."""
    http.post(f"{sim.root_url}/simulator/settings", json={"obedience": 1.0}).raise_for_status()
    yield
    http.post(f"{sim.root_url}/simulator/settings", json={"obedience": 0.0}).raise_for_status()


def config(allow: list[str], recipe: str = "toolalpaca", **blueprints: Any) -> Config:
    return validate_config({
        # Not vetted: these tests give blueprints tools that fail on purpose.
        "tools": {"environments": [{"name": "shelf", "class_path": "toolenvs:Shelf", "allow": allow, "vet": False}]},
        "tasks": {"instructions_per_tool": 3, "recipes": {recipe: 1.0},
                  "blueprints": {"enabled": True, "multi_turn": 0.0, **blueprints}},
        "dialogues": {"reject_early": False},
    })


def shelf(cfg: Config) -> Tool:
    [tool] = asyncio.run(import_executable("shelf", cfg.tools)).records
    assert isinstance(tool, Tool)
    return tool


class Recorded:
    """Every chat request the gateway sends, by role (the gateway itself is the real one)."""

    def __init__(self, gateway: LLMGateway) -> None:
        self.prompts: list[tuple[str, str]] = []
        self.told: list[tuple[str, str]] = []  # what the model is told: the system's and the user's messages
        original = gateway.chat

        async def chat(role: str, messages: Any, **kwargs: Any) -> Any:
            # The text the model reads: every message's content and calls, unescaped.
            self.prompts.append((role, "\n".join(f"{m.get('content') or ''} {m.get('tool_calls') or ''}" for m in messages)))
            self.told.append((role, "\n".join(str(m.get("content") or "") for m in messages if m.get("role") in ("system", "user"))))
            return await original(role, messages, **kwargs)

        gateway.chat = chat  # type: ignore[method-assign]


def run_stage(sim: Any, cfg: Config, stage: Any, spec: ShardSpec, inputs: list[dict[str, Any]]) -> tuple[StageOutput, Recorded]:
    async def go() -> tuple[StageOutput, Recorded]:
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), cfg.llm) as gateway:
            recorded = Recorded(gateway)
            ctx = ShardContext(config=cfg, run_id="r", gateway=gateway)
            return await stage.run(spec, inputs, ctx), recorded

    return asyncio.run(go())


def tasks(sim: Any, cfg: Config) -> StageOutput:
    out, _ = run_stage(sim, cfg, TasksStage(), ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), [shelf(cfg).model_dump()])
    return out


def state_after(cfg: Config, task: Task) -> Any:
    """The state a fresh session is left in by the blueprint's calls, run here again."""
    async def go() -> Any:
        async with environments(cfg.tools)["shelf"].session() as session:
            for turn in task.blueprint.turns if task.blueprint else []:
                for call in turn.calls:
                    assert not (await session.call(call.name, call.arguments)).is_error
            return await session.state()

    return asyncio.run(go())


def test_a_kept_blueprint_targets_the_state_its_calls_leave(sim: Any) -> None:
    cfg = config(["put"])
    out = tasks(sim, cfg)
    assert len(out.records) == 3 and not out.rejected
    for task in out.records:
        assert isinstance(task, Task) and task.blueprint is not None
        [turn] = task.blueprint.turns
        assert task.instruction == turn.request and task.turns == 1
        titles = [call.arguments["title"] for call in turn.calls]
        assert task.blueprint.target_state == {"shelf": {"books": titles}}
        assert task.blueprint.target_state["shelf"] == state_after(cfg, task)
    assert out.profile["blueprints"] == {"kept": 3}


def test_a_blueprint_whose_call_fails_is_rejected_with_its_reason(sim: Any) -> None:
    out = tasks(sim, config(["lend"]))  # nothing is on the shelf: every lend raises
    assert not out.records and len(out.rejected) == 3
    for rejected in out.rejected:
        assert rejected.stage == "tasks" and rejected.reasons == ["blueprint_call_failed"]
        assert "lend" in rejected.detail and "is not on the shelf" in rejected.detail


def test_a_blueprint_that_leaves_the_state_unchanged_is_rejected(sim: Any) -> None:
    out = tasks(sim, config(["count"]))  # counting changes nothing, and nothing says it is read-only
    assert not out.records and [r.reasons for r in out.rejected] == [["blueprint_state_unchanged"]] * 3


def test_other_tools_keep_their_recipe_and_blueprints_off_change_nothing(sim: Any) -> None:
    cfg = config(["put"], enabled=False)
    out = tasks(sim, cfg)
    assert len(out.records) == 3
    assert all(isinstance(t, Task) and t.blueprint is None for t in out.records)
    assert "blueprints" not in out.profile


@pytest.mark.parametrize("recipe", ["toolalpaca", "toolace"])  # the ReAct assistant, native function calls
def test_the_dialogue_follows_the_requests_alone_and_carries_the_target_state(sim: Any, recipe: str) -> None:
    cfg = config(["put"], recipe, multi_turn=1.0, max_turns=3)
    made = [t for t in tasks(sim, cfg).records if isinstance(t, Task)]
    assert made and all(t.blueprint is not None and len(t.blueprint.turns) >= 2 for t in made)
    out, recorded = run_stage(sim, cfg, DialoguesStage(), ShardSpec("dialogues", 0, ()), [t.model_dump() for t in made])
    assert len(out.records) + len(out.rejected) == len(made)
    by_task = {t.id: t for t in made}
    assert out.records
    for dialogue in out.records:
        assert isinstance(dialogue, Dialogue)
        blueprint = by_task[dialogue.task_id].blueprint
        assert blueprint is not None
        # The user turns are the blueprint's requests, in order.
        assert [m.content for m in dialogue.messages if m.role == "user"] == [t.request for t in blueprint.turns]
        assert dialogue.generation["execution"]["target_state"] == blueprint.target_state
        assert dialogue.recipe == recipe
    # Nothing the assistant is told holds the ground truth: a call's arguments, a title no
    # request mentions, or the target state (its own calls, which may be the blueprint's, aside).
    assistant = [text for role, text in recorded.told if role == "assistant"]
    assert assistant
    for task in made:
        assert task.blueprint is not None
        requests = " ".join(t.request for t in task.blueprint.turns)
        secrets = [json.dumps(task.blueprint.target_state, ensure_ascii=False)]
        for turn in task.blueprint.turns:
            for call in turn.calls:
                secrets += [json.dumps(call.arguments, ensure_ascii=False), call.model_dump_json()]
                secrets += [v for v in call.arguments.values() if isinstance(v, str) and len(v) > 3 and v not in requests]
        for text in assistant:
            # ToolACE's thinking prompt retells the conversation, the assistant's own calls too.
            text = "\n".join(line for line in text.splitlines() if not line.startswith("[assistant calls]"))
            assert not [s for s in secrets if s in text], text


def test_blueprints_without_an_executable_source_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"tasks\.blueprints\.enabled"):
        validate_config({"tasks": {"blueprints": True}})
    cfg = validate_config({"tasks": {"blueprints": True},
                           "tools": {"environments": [{"name": "shelf", "class_path": "toolenvs:Shelf"}]}})
    assert cfg.tasks.blueprints.enabled


def test_rejections_keep_their_blueprint_for_inspection(sim: Any) -> None:
    [rejected, *_] = tasks(sim, config(["count"])).rejected
    assert isinstance(rejected, Rejected)
    assert rejected.record["turns"] and rejected.record["turns"][0]["calls"][0]["name"] == "count"


# Blueprints over sources nobody here wrote: BFCL's file system (a Python environment preset) and
# `@modelcontextprotocol/server-memory` from npm (an MCP server whose state is its `read_graph`).
FILES = {"root": {"alex": {"type": "directory", "contents": {"notes.txt": {"type": "file", "content": "meeting at noon"}}}}}


def source_config(field: str, source: dict[str, Any]) -> Config:
    return validate_config({
        "tools": {field: [source]},
        "tasks": {"instructions_per_tool": 3, "recipes": {"toolalpaca": 1.0}, "blueprints": {"enabled": True, "multi_turn": 0.0}},
        "dialogues": {"reject_early": False},
    })


def blueprints_then_dialogues(sim: Any, cfg: Config, name: str) -> tuple[list[Task], StageOutput]:
    """The kept blueprint tasks of source `name`, each checked against a fresh session that runs
    its calls again, and the dialogues stage's output over them."""
    [tool] = asyncio.run(import_executable(name, cfg.tools)).records
    out, _ = run_stage(sim, cfg, TasksStage(), ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), [tool.model_dump()])
    made = [t for t in out.records if isinstance(t, Task)]

    async def replayed(task: Task) -> Any:
        async with environments(cfg.tools)[name].session() as session:
            for turn in task.blueprint.turns if task.blueprint else []:
                for call in turn.calls:
                    assert not (await session.call(call.name, call.arguments)).is_error
            return await session.state()

    for task in made:
        assert task.blueprint is not None and task.blueprint.target_state[name] == asyncio.run(replayed(task))
    dialogues, _ = run_stage(sim, cfg, DialoguesStage(), ShardSpec("dialogues", 0, ()), [t.model_dump() for t in made])
    return made, dialogues


def test_blueprints_over_bfcl_s_file_system_target_the_state_its_calls_leave(sim: Any) -> None:
    cfg = source_config("environments", {"name": "files", "preset": "GorillaFileSystem", "initial_state": FILES,
                                         "allow": ["mkdir", "touch"]})
    made, dialogues = blueprints_then_dialogues(sim, cfg, "files")
    assert made
    for task in made:
        created = task.blueprint.target_state["files"]["root"]["contents"]  # type: ignore[union-attr]
        assert "notes.txt" in created and len(created) > 1  # what the calls made, beside what was there
    assert dialogues.records
    for dialogue in dialogues.records:
        assert isinstance(dialogue, Dialogue) and dialogue.generation["execution"]["target_state"]["files"]


def test_blueprints_over_an_mcp_server_from_npm_target_the_graph_its_calls_leave(sim: Any, npm_servers: Path) -> None:
    cfg = source_config("mcp", {"name": "memory", "command": "node", "args": [str(npm_servers / "server-memory" / "dist" / "index.js")],
                                "env": {"MEMORY_FILE_PATH": "${TOOLFACTORY_WORKDIR}/memory.jsonl"}, "state_tool": "read_graph",
                                "allow": ["create_entities"]})
    made, dialogues = blueprints_then_dialogues(sim, cfg, "memory")
    assert made
    for task in made:
        assert task.blueprint is not None
        created = [e["name"] for turn in task.blueprint.turns for call in turn.calls for e in call.arguments["entities"]]
        graph = task.blueprint.target_state["memory"]["tool"]
        assert created and sorted(e["name"] for e in graph["entities"]) == sorted(set(created))
    assert dialogues.records


def test_a_failed_blueprint_goes_back_to_the_designer_with_what_its_calls_answered(sim: Any) -> None:
    cfg = config(["lend"], repairs=1)  # nothing is on the shelf: every lend raises, the repair too
    out, recorded = run_stage(sim, cfg, TasksStage(), ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), [shelf(cfg).model_dump()])
    designer = [text for role, text in recorded.prompts if role == "designer"]
    repairs = [text for text in designer if "did not hold" in text]
    assert len(designer) == 6 and len(repairs) == 3
    assert all("is not on the shelf" in text and "turns[0].calls[0] lend" in text for text in repairs)
    assert [r.reasons for r in out.rejected] == [["blueprint_call_failed"]] * 3
    assert all("after 1 repair" in r.detail for r in out.rejected)
    out, recorded = run_stage(sim, config(["lend"], repairs=0), TasksStage(),
                              ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), [shelf(cfg).model_dump()])
    assert len([role for role, _ in recorded.prompts if role == "designer"]) == 3


def test_calls_that_vetting_found_to_only_read_are_rejected_as_read_only(sim: Any) -> None:
    cfg = validate_config({
        "tools": {"environments": [{"name": "shelf", "class_path": "toolenvs:Shelf", "allow": ["count"]}]},
        "tasks": {"instructions_per_tool": 2, "recipes": {"toolalpaca": 1.0}, "blueprints": {"enabled": True, "multi_turn": 0.0}},
    })
    tool = shelf(cfg)
    assert tool.provenance["vetting"]["functions"]["count"]["changes_state"] is False
    out, _ = run_stage(sim, cfg, TasksStage(), ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), [tool.model_dump()])
    assert [r.reasons for r in out.rejected] == [["blueprint_read_only"]] * 2


def test_the_designer_s_schema_takes_the_values_a_bfcl_doc_lists_in_prose() -> None:
    from toolfactory.stages.tasks.blueprints import confined_parameters

    parameters = {"type": "object", "properties": {
        "mode": {"type": "string", "description": 'The mode to set. [Enum]: ["engage", "release"]'},
        "door": {"type": "array", "items": {"type": "string"}, "description": '[Enum]: ["driver", "passenger"]'},
        "note": {"type": "string", "description": "Free text."}}}
    props = confined_parameters(parameters)["properties"]
    assert props["mode"]["enum"] == ["engage", "release"] and props["door"]["items"]["enum"] == ["driver", "passenger"]
    assert "enum" not in props["note"]


def test_blueprints_over_two_sources_run_on_both_and_target_both_states(sim: Any, npm_servers: Path) -> None:
    # BFCL's file system (a file to read) and the memory server from npm (an entity to record).
    cfg = validate_config({
        "tools": {"environments": [{"name": "files", "preset": "GorillaFileSystem", "initial_state": FILES}],
                  "mcp": [{"name": "memory", "command": "node", "args": [str(npm_servers / "server-memory" / "dist" / "index.js")],
                           "env": {"MEMORY_FILE_PATH": "${TOOLFACTORY_WORKDIR}/memory.jsonl"}, "state_tool": "read_graph"}]},
        "tasks": {"instructions_per_tool": 4, "recipes": {"toolalpaca": 1.0},
                  "blueprints": {"enabled": True, "multi_turn": 0.0, "spanning": 1.0}},
    })
    pool = [t for name in ("files", "memory") for t in asyncio.run(import_executable(name, cfg.tools)).records]
    # The designer follows its prompt: the calls name the files the prompt lists.
    http.post(f"{sim.root_url}/simulator/settings", json={"obedience": 1.0}).raise_for_status()
    try:
        out, recorded = run_stage(sim, cfg, TasksStage(), ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}),
                                  [t.model_dump() for t in pool])
    finally:
        http.post(f"{sim.root_url}/simulator/settings", json={"obedience": 0.0}).raise_for_status()
    designer = [text for role, text in recorded.prompts if role == "designer" and "did not hold" not in text]
    assert len(designer) == 8 and all("the two tools below" in text for text in designer)
    spanning = [t for t in out.records if isinstance(t, Task) and len(t.tools) == 2]
    assert spanning, out.rejections()

    async def replayed(task: Task) -> dict[str, Any]:
        owner = {fn.name: str(tool.provenance["executable"]["source"]) for tool in task.tools for fn in tool.functions}
        configured = environments(cfg.tools)
        async with configured["files"].session() as files, configured["memory"].session() as memory:
            sessions = {"files": files, "memory": memory}
            for turn in task.blueprint.turns if task.blueprint else []:
                for call in turn.calls:
                    assert not (await sessions[owner[call.name]].call(call.name, call.arguments)).is_error
            return {name: await session.state() for name, session in sessions.items()}

    for task in spanning:
        assert task.scenario == "two_sources" and task.blueprint is not None
        assert set(task.blueprint.target_state) == {"files", "memory"}
        assert task.blueprint.target_state == asyncio.run(replayed(task))
        called = {call.name for turn in task.blueprint.turns for call in turn.calls}
        assert all(any(tool.function(name) for name in called) for tool in task.tools)  # both sources are used


def test_a_blueprint_whose_request_leaves_out_a_value_of_its_calls_is_rejected(sim: Any) -> None:
    # Without obedience the simulator's request is a few of the prompt's words: it names no title.
    http.post(f"{sim.root_url}/simulator/settings", json={"obedience": 0.0}).raise_for_status()
    out = tasks(sim, config(["put"], repairs=0))
    assert not out.records and [r.reasons for r in out.rejected] == [["blueprint_value_unstated"]] * 3
    for rejected in out.rejected:
        assert rejected.detail.startswith("turns[0].calls[0] put: title ") and "in neither the request" in rejected.detail


def test_a_value_an_earlier_call_answered_or_a_default_need_not_be_stated() -> None:
    from toolfactory.models import BlueprintCall, Function
    from toolfactory.stages.tasks.blueprints import unstated_value

    book = Function(name="book", parameters={"type": "object", "properties": {
        "token": {"type": "string"}, "seats": {"type": "integer", "default": 1}, "when": {"type": "string"}}})
    call = BlueprintCall(name="book", arguments={"token": "tk-81", "seats": 1, "when": "2026-05-01", "express": True})
    assert unstated_value(call, book, "Book it for 2026-05-01.\n{\"token\": \"tk-81\"}") is None
    assert unstated_value(call, book, "Book it for May 1st.\n{\"token\": \"tk-81\"}") == ("when", "2026-05-01")
    nested = BlueprintCall(name="add", arguments={"items": [{"name": "Ada", "tags": ["x"]}]})
    assert unstated_value(nested, None, "Add Ada.") == ("items[0].tags[0]", "x")


def test_dialogues_made_from_kept_blueprints_over_bfcl_s_file_system_pass_the_verifier_s_replay(sim: Any) -> None:
    # A request states the values of its calls (or the blueprint is not kept), so an assistant
    # that takes them from the request makes the blueprint's calls and reaches its state, with or
    # without a designer that follows its prompt. One call a request: the simulator's assistant
    # makes one call a turn when the request asks for no more (no parallel or follow-up calls here).
    from toolfactory.executable.registry import source_settings
    from toolfactory.stages.verify.execution import ExecutionLayer

    cfg = validate_config({
        "tools": {"environments": [{"name": "files", "preset": "GorillaFileSystem", "initial_state": FILES,
                                    "allow": ["mkdir", "touch"]}]},
        "tasks": {"instructions_per_tool": 3, "recipes": {"toolalpaca": 1.0},
                  "blueprints": {"enabled": True, "multi_turn": 0.0, "max_calls": 1, "repairs": 0}},
        "dialogues": {"reject_early": False},
    })
    built, settings = environments(cfg.tools), source_settings(cfg.tools)
    layer = ExecutionLayer({name: (built[name], s) for name, s in settings.items()})
    passed = 0
    for obedience in (0.0, 1.0):
        http.post(f"{sim.root_url}/simulator/settings", json={"obedience": obedience}).raise_for_status()
        made, dialogues = blueprints_then_dialogues(sim, cfg, "files")
        assert len(dialogues.records) == len(made) and not dialogues.rejected
        for dialogue in dialogues.records:
            assert isinstance(dialogue, Dialogue) and dialogue.generation["execution"]["target_state"]
            assert [(v.code, v.message) for v in asyncio.run(layer.verdicts(dialogue))] == []
            passed += 1
    assert passed
