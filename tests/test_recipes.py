"""The tasks and dialogues stages by recipe and mode, through the real gateway and the simulator
over HTTP: tool-set sampling (I1/I2/I3, same domain), instructions, multi-agent simulation in
every mode, formal thinking, self-consistency and the DFSDT search."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import http
from toolfactory.catalog import load_seed_catalog
from toolfactory.config import load_config
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue, Task, Tool
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.dialogues.modes import shown_mode
from toolfactory.stages.dialogues.stage import DialoguesStage
from toolfactory.stages.tasks.stage import TasksStage
from toolfactory.stages.verify.policy import for_recipe
from toolfactory.stages.verify.stage import VerifyStage
from toolfactory.stages.verify.rules import check, errors
from toolfactory.storage import ObjectStore

NO_FAULTS = {"rate_malformed_json": 0, "rate_hallucinated_function": 0, "rate_missing_required": 0, "rate_wrong_type": 0,
             "rate_parallel_calls": 0, "rate_follow_up_call": 0, "rate_clarify": 0, "rate_decline": 0}


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings()) as simulator:
        yield simulator


@pytest.fixture(scope="module")
def pool() -> list[Tool]:
    return load_seed_catalog()


def run_stage(sim: Any, stage: Any, spec: ShardSpec, inputs: list[dict[str, Any]], root: Path,
              knobs: dict[str, float] | None = None, *overrides: str) -> StageOutput:
    http.post(f"{sim.root_url}/simulator/settings", json={**NO_FAULTS, "boolean_true_rate": 0.5, **(knobs or {})}).raise_for_status()
    config = load_config(None, [f"storage.root={root}", *overrides], environ={})

    async def go() -> StageOutput:
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), config.llm) as gateway:
            ctx = ShardContext(config=config, run_id="r", gateway=gateway, store=ObjectStore.open(config.storage))
            return await stage.run(spec, inputs, ctx)

    return asyncio.run(go())


def tasks_of(sim: Any, pool: list[Tool], root: Path, *overrides: str, parts: int = 1) -> StageOutput:
    spec = ShardSpec("tasks", 0, (), {"part": 0, "parts": parts})
    return run_stage(sim, TasksStage(), spec, [t.model_dump() for t in pool], root, None, *overrides)


def dialogues_of(sim: Any, tasks: list[Task], root: Path, knobs: dict[str, float] | None = None, *overrides: str) -> StageOutput:
    return run_stage(sim, DialoguesStage(), ShardSpec("dialogues", 0, ()), [t.model_dump() for t in tasks], root, knobs, *overrides)


# --- sampling and instructions (tasks stage) -------------------------------------------------


def test_toolllm_samples_i1_i2_i3_tool_sets_and_keeps_only_sampled_relevant_apis(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    out = tasks_of(sim, pool, tmp_path, "tasks.recipes={toolllm: 1}", "tasks.instructions_per_tool=3")
    tasks = [t for t in out.records if isinstance(t, Task)]
    assert tasks and {t.recipe for t in tasks} == {"toolllm"}
    assert {t.scenario for t in tasks} == {"single_tool", "intra_category", "intra_collection"}
    by_id = {t.id: t for t in pool}
    for task in tasks:
        offered = {fn.name for tool in task.tools for fn in tool.functions}
        assert task.relevant_functions and set(task.relevant_functions) <= offered
        if task.scenario == "single_tool":
            assert len(task.tools) == 1 and len(task.tools[0].functions) <= 5
            continue
        assert 2 <= len(task.tools) <= 3 and all(len(t.functions) <= 3 for t in task.tools)
        if task.scenario == "intra_category":
            assert len({t.category for t in task.tools}) == 1
        else:
            assert set.intersection(*(set(by_id[t.id].collections) for t in task.tools))
    # With several tools, pairs of (tool, API) the set does not have are dropped, as ToolLLM does.
    assert out.profile["hallucinated_relevant_apis"]["toolllm"] > 0
    assert set(out.rejections()) <= {"task_no_relevant_api"}
    assert out.profile["coverage"]["pool_tools"] == len(pool) and out.profile["tool_uses"]


def test_toolace_tasks_have_a_target_mode_turns_and_a_style(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    out = tasks_of(sim, pool, tmp_path, "tasks.recipes={toolace: 1}", "tasks.multi_turn=0.5")
    tasks = [t for t in out.records if isinstance(t, Task)]
    assert {t.mode for t in tasks} == {"single", "parallel", "multiple", "dependent", "non_tool", "missing_params"}
    assert {t.turns for t in tasks} >= {1, 2} and all(t.style for t in tasks)
    anchors = {t.id: t for t in pool}
    for task in tasks:
        if task.mode == "non_tool":
            assert task.relevant_functions == []
            assert len({(t.domain_path or [t.category])[0] for t in task.tools}) >= 1
        else:
            assert len({t.domain_path[0] for t in task.tools}) == 1  # one domain per dialogue
            assert {t.id for t in task.tools} <= set(anchors)


def test_toolalpaca_tasks_name_one_of_the_tools_functions(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    out = tasks_of(sim, pool[:6], tmp_path, "tasks.recipes={toolalpaca: 1}")
    tasks = [t for t in out.records if isinstance(t, Task)]
    assert len(tasks) == 12 and all(len(t.tools) == 1 and t.relevant_functions[0] in {f.name for f in t.tools[0].functions} for t in tasks)


# --- multi-agent simulation in every mode (dialogues stage) ----------------------------------


def toolace_task(pool: list[Tool], mode: str, turns: int = 1, tools: int = 1) -> Task:
    weather = [t for t in pool if t.category == "Weather"][:tools]
    return Task(id=f"t-{mode}-{turns}", tools=weather, instruction="What is the weather in Lyon this weekend?",
                relevant_functions=[weather[0].functions[0].name], mode=mode, recipe="toolace", turns=turns, scenario="same_domain")


def one(out: StageOutput) -> Dialogue:
    assert len(out.records) == 1, out.rejections()
    record = out.records[0]
    assert isinstance(record, Dialogue)
    return record


THINK_OFF = ("dialogues.self_consistency=1",)


def test_parallel_turns_hold_several_calls(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    d = one(dialogues_of(sim, [toolace_task(pool, "parallel")], tmp_path, {"rate_parallel_calls": 1.0}, *THINK_OFF))
    assert d.mode == "parallel" and d.target_mode == "parallel"
    assert max(len(m.tool_calls or []) for m in d.messages) >= 2
    answered = {m.tool_call_id for m in d.messages if m.role == "tool"}
    assert all(c.id in answered for m in d.messages for c in m.tool_calls or [])
    assert errors(check(d)) == []


def test_dependent_calls_use_an_earlier_response(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    hotels = next(t for t in pool if t.name == "StayFinder")
    task = Task(id="t-dependent", tools=[hotels], instruction="Search hotels in Lyon from 2026-05-01 to 2026-05-03, then read the reviews of one.",
                relevant_functions=["search_hotels", "get_hotel_details"], mode="dependent", recipe="toolace", scenario="same_domain")
    d = one(dialogues_of(sim, [task], tmp_path, {"rate_follow_up_call": 1.0}, *THINK_OFF))
    assert d.mode == "dependent" and errors(check(d)) == []
    calls = [c for m in d.messages for c in m.tool_calls or []]
    first_response = next(json.loads(m.content) for m in d.messages if m.role == "tool")
    ids = {r["hotel_id"] for r in first_response["response"].get("results", []) if "hotel_id" in r}
    assert calls[0].name == "search_hotels" and ids
    assert any(json.loads(c.arguments).get("hotel_id") in ids for c in calls[1:])


def test_non_tool_dialogues_hold_no_call(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    d = one(dialogues_of(sim, [toolace_task(pool, "non_tool")], tmp_path, {"rate_decline": 1.0}, *THINK_OFF))
    assert d.mode == "non_tool" and not any(m.tool_calls for m in d.messages)
    assert d.messages[-1].role == "assistant" and d.messages[-1].content
    assert errors(check(d)) == []


def test_missing_parameter_dialogues_hold_the_question_and_the_answer(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    d = one(dialogues_of(sim, [toolace_task(pool, "missing_params")], tmp_path, {"rate_clarify": 1.0}, *THINK_OFF))
    roles = [m.role for m in d.messages]
    assert roles[:4] == ["system", "user", "assistant", "user"]
    assert d.messages[2].content and not d.messages[2].tool_calls
    assert d.generation["clarification_turns"] == [2]
    assert any(m.tool_calls for m in d.messages[4:])  # after the answer, the call
    assert d.mode == "missing_params" and d.generation["clarifications"] == 1


def test_a_dialogue_not_showing_its_target_mode_is_rejected_by_the_verifier(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    d = one(dialogues_of(sim, [toolace_task(pool, "parallel")], tmp_path, {}, *THINK_OFF))
    assert d.mode == "single" and "dialogue_mode_mismatch" in {v.code for v in errors(check(d))}


def test_multi_turn_dialogues_have_the_task_s_user_turns(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    d = one(dialogues_of(sim, [toolace_task(pool, "single", turns=3)], tmp_path, {}, *THINK_OFF))
    assert sum(m.role == "user" for m in d.messages) == 3 and d.messages[-1].role == "assistant"


def test_formal_thinking_is_kept_as_reasoning_of_every_assistant_turn(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    d = one(dialogues_of(sim, [toolace_task(pool, "single")], tmp_path, {}, "dialogues.self_consistency=1"))
    assistant = [m for m in d.messages if m.role == "assistant"]
    assert assistant and all(m.reasoning and "Functions needed" in m.reasoning for m in assistant)
    off = one(dialogues_of(sim, [toolace_task(pool, "single")], tmp_path, {}, *THINK_OFF, "dialogues.formal_thinking=false"))
    assert not any(m.reasoning for m in off.messages)


def test_self_consistency_drops_or_masks_turns_whose_samples_disagree(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    tasks = [toolace_task(pool, "single").model_copy(update={"id": f"t{k}", "instruction": f"Weather in city number {k}?"}) for k in range(6)]
    dropped = dialogues_of(sim, tasks, tmp_path, {}, "dialogues.self_consistency=3", "dialogues.formal_thinking=false")
    # The simulator draws argument values at random per sample, so samples often disagree.
    assert dropped.rejections().get("dialogue_inconsistent_decision", 0) > 0
    masked = dialogues_of(sim, tasks, tmp_path, {}, "dialogues.self_consistency=3", "dialogues.formal_thinking=false",
                          "dialogues.on_disagreement=mask")
    assert not masked.rejected and len(masked.records) == 6
    flagged = [m for d in masked.records for m in d.messages if m.masked]  # type: ignore[attr-defined]
    assert len({d.id for d in masked.records if any(m.masked for m in d.messages)}) == dropped.rejections()["dialogue_inconsistent_decision"]  # type: ignore[attr-defined]
    assert all(m.role == "assistant" for m in flagged)


def test_toolllm_dialogues_come_from_a_bounded_search(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    weather = [t for t in pool if t.category == "Weather"]
    tasks = [Task(id=f"s{k}", tools=weather[:2], instruction=f"Plan a picnic in Lyon on day {k}: check the forecast.",
                  relevant_functions=[weather[0].functions[0].name], recipe="toolllm", mode="open") for k in range(6)]
    out = dialogues_of(sim, tasks, tmp_path, {}, "dialogues.search_max_depth=4", "dialogues.search_max_calls=16")
    assert len(out.records) + len(out.rejected) == 6
    assert set(out.rejections()) <= {"search_failed"}
    for d in out.records:
        assert isinstance(d, Dialogue)
        search = d.generation["search"]
        assert search["method"] == "dfsdt" and search["finish_type"] == "give_answer"
        assert search["llm_calls"] <= 16 and search["path_depth"] <= 4 and d.llm_calls == search["llm_calls"]
        assert not any(c.name == "Finish" for m in d.messages for c in m.tool_calls or [])
        assert d.messages[-1].role == "assistant" and d.messages[-1].content
        # An answer whose path the verify stage's rules reject failed its branch in the search.
        assert not errors(check(d, policy=for_recipe("toolllm", {"toolalpaca": 5}, ["toolalpaca"])))
    for rejected in out.rejected:
        assert rejected.record["generation"]["search"]["finish_type"] in ("give_up", "limit")


def test_malformed_llm_answers_become_reason_coded_rejections(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    tasks_out = run_stage(sim, TasksStage(), ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), [t.model_dump() for t in pool[:4]],
                          tmp_path, {"rate_malformed_json": 1.0}, "llm.max_reasks=1")
    assert not tasks_out.records and set(tasks_out.rejections()) == {"llm_malformed_json"}
    assert tasks_out.items_in == 4


@pytest.mark.parametrize(
    ("knob", "code"),
    [
        ("rate_hallucinated_function", "call_unknown_function"),
        ("rate_missing_required", "call_missing_required"),
        ("rate_wrong_type", "call_argument_type"),
    ],
)
def test_each_simulator_fault_knob_is_caught_by_its_rule(sim: Any, pool: list[Tool], tmp_path: Path, knob: str, code: str) -> None:
    """Every dialogue made with one of the simulator's call faults is rejected by the verify rule
    for that fault, as a run's verify shard checks it (judges off: the rules are the point)."""
    recipe = ("tasks.recipes={toolalpaca: 1}", "tasks.instructions_per_tool=2")
    tasks = [t for t in tasks_of(sim, pool[:3], tmp_path, *recipe).records if isinstance(t, Task)]
    made = dialogues_of(sim, tasks, tmp_path, {knob: 1.0}, *recipe)
    assert len(made.records) == len(tasks) == 6, made.rejections()
    inputs = [d.model_dump() for d in made.records]
    verified = run_stage(sim, VerifyStage(), ShardSpec("verify", 0, ()), inputs, tmp_path, {knob: 1.0}, "verify.judges=[]")
    assert not verified.records and verified.items_in == 6
    assert verified.rejections()[code] == 6  # every dialogue, by the rule for that fault


def test_dialogues_record_their_shown_mode(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    out = dialogues_of(sim, [toolace_task(pool, "single")], tmp_path, {}, *THINK_OFF)
    d = one(out)
    assert d.mode == shown_mode(d) == "single" and out.profile["modes"] == {"single": 1}


def test_an_allowlisted_tool_is_called_over_real_http_instead_of_the_executor_llm(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Weather(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            seen.append(self.path)
            body = json.dumps({"temperature": 17.5, "condition": "real server"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Weather)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        weather = next(t for t in pool if t.category == "Weather").model_copy(update={"link": base})
        task = Task(id="t-http", tools=[weather], instruction="What is the weather in Lyon right now?",
                    relevant_functions=[weather.functions[0].name], mode="open", recipe="toolalpaca")
        overrides = (f"dialogues.http.allowlist=[{base}]", "dialogues.http.allow_private=true")
        d = one(dialogues_of(sim, [task], tmp_path, {}, *overrides))
        responses = [json.loads(m.content) for m in d.messages if m.role == "tool"]
        assert responses and all(r.get("response", {}).get("condition") == "real server" for r in responses if r["status_code"] == 200)
        paths = {fn.path for fn in weather.functions}
        called = [c for m in d.messages for c in m.tool_calls or []]
        assert seen and {p.split("?")[0] for p in seen} <= paths and len(seen) == len(called)
        refused = one(dialogues_of(sim, [task.model_copy(update={"id": "t-http-2"})], tmp_path, {}, f"dialogues.http.allowlist=[{base}]"))
        errors_seen = [json.loads(m.content) for m in refused.messages if m.role == "tool"]
        assert errors_seen and all(r["status_code"] == 0 and "error" in r for r in errors_seen)  # loopback refused by default
        assert len(seen) == len(responses)
    finally:
        server.shutdown()


def test_the_tool_executor_sees_the_operation_of_the_tool_s_openapi_document() -> None:
    from toolfactory.stages.dialogues.agents import openapi_operation

    document = {"openapi": "3.0.3", "info": {"title": "Pets", "version": "1"},
                "paths": {"/pets/{pet_id}": {"get": {"operationId": "getPet", "responses": {"404": {"description": "No such pet"}}}}}}
    fn = Tool(name="Pets", functions=[]).model_copy()
    from toolfactory.models import Function
    get_pet = Function(name="getPet", description="d", method="GET", path="/pets/{pet_id}")
    text = openapi_operation(fn.model_copy(update={"openapi": document}), get_pet)
    assert "No such pet" in text and "GET /pets/{pet_id}" in text
    assert openapi_operation(fn, get_pet) == "" and openapi_operation(None, get_pet) == ""
