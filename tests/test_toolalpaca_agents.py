"""ToolAlpaca's agents against the simulator over HTTP: the error-aware tool executor (Fig. 11),
the user agent's multi-call instructions (Fig. 8) and the ReAct assistant (Fig. 10)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable, Iterator, TypeVar

import pytest
from jsonschema import Draft202012Validator

from conftest import http
from toolfactory.config import Config, load_config
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue, Function, Task, Tool, ToolCall
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.dialogues.stage import DialoguesStage
from toolfactory.stages.verify.stage import VerifyStage
from toolfactory.stages.dialogues.agents import execute
from toolfactory.stages.dialogues.simulation import simulate
from toolfactory.stages.tasks.toolalpaca import toolalpaca_tasks
from toolfactory.stages.verify.policy import for_recipe
from toolfactory.stages.verify.rules.registry import check, errors

T = TypeVar("T")

FORECAST = Function(
    name="getForecast",
    description="The weather forecast for a city over the next days.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"},
                       "days": {"type": "integer", "minimum": 1, "maximum": 7, "description": "Days ahead"}},
        "required": ["city", "days"],
    },
    returns={"type": "object", "properties": {"city": {"type": "string"}, "temperatures": {"type": "array", "items": {"type": "number"}}},
             "required": ["city", "temperatures"]},
    method="GET", path="/forecast",
)
ALERTS = Function(
    name="getAlerts",
    description="Active weather alerts for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string", "description": "City name"}}, "required": ["city"]},
    returns={"type": "object", "properties": {"alerts": {"type": "array", "items": {"type": "string"}}}, "required": ["alerts"]},
    method="GET", path="/alerts",
)
WEATHER = Tool(name="Weather", description="Forecasts and alerts for cities worldwide.", functions=[FORECAST, ALERTS])
QUIET = {"latency_ms": 0, "latency_jitter_ms": 0, "rate_malformed_json": 0, "rate_hallucinated_function": 0,
         "rate_missing_required": 0, "rate_wrong_type": 0, "rate_parallel_calls": 0, "rate_follow_up_call": 0,
         "rate_clarify": 0, "rate_decline": 0}


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings(**QUIET)) as simulator:
        yield simulator


def run(sim: Any, job: Callable[[ShardContext], Awaitable[T]], settings: dict[str, Any] | None = None, *overrides: str) -> T:
    http.post(f"{sim.root_url}/simulator/settings", json={**QUIET, **(settings or {})}).raise_for_status()
    config: Config = load_config(None, list(overrides), environ={})

    async def go() -> T:
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), config.llm) as gateway:
            return await job(ShardContext(config=config, run_id="r", gateway=gateway))

    return asyncio.run(go())


def test_the_executor_answers_a_valid_request_with_a_response_in_the_documented_shape(sim: Any) -> None:
    call = ToolCall(id="c1", name="getForecast", arguments=json.dumps({"city": "Lyon", "days": 3}))
    body, llm_calls = run(sim, lambda ctx: execute(FORECAST, call, ctx, WEATHER, api_errors=True))
    assert llm_calls == 1 and body["status_code"] == 200
    assert not list(Draft202012Validator(FORECAST.returns).iter_errors(body["response"]))


def test_the_executor_answers_a_function_whose_returns_refer_to_their_own_definitions(sim: Any) -> None:
    # An MCP server's output schema (pydantic) keeps its parts in $defs and refers to them from the root.
    place = {"type": "object", "properties": {"city": {"type": "string"}, "hour": {"type": "string"}}, "required": ["city", "hour"]}
    returns = {"$defs": {"Place": place}, "type": "object", "required": ["source", "target"],
               "properties": {"source": {"$ref": "#/$defs/Place"}, "target": {"$ref": "#/$defs/Place"}}}
    convert = FORECAST.model_copy(update={"name": "convertHour", "returns": returns})
    call = ToolCall(id="c1", name="convertHour", arguments=json.dumps({"city": "Lyon", "days": 3}))
    body, _ = run(sim, lambda ctx: execute(convert, call, ctx, WEATHER, api_errors=True))
    assert body["status_code"] == 200
    assert not list(Draft202012Validator(returns).iter_errors(body["response"]))


@pytest.mark.parametrize("arguments, named", [({"city": "Lyon"}, "days"), ({"city": "Lyon", "days": 40}, "days"),
                                              ({"city": 7, "days": 2}, "city")])
def test_the_executor_answers_a_bad_request_with_the_apis_error(sim: Any, arguments: dict[str, Any], named: str) -> None:
    call = ToolCall(id="c1", name="getForecast", arguments=json.dumps(arguments))
    body, llm_calls = run(sim, lambda ctx: execute(FORECAST, call, ctx, WEATHER, api_errors=True))
    # The model wrote the error (one LLM call), not the pipeline's own check.
    assert llm_calls == 1
    assert body["status_code"] in (400, 404, 422) and named in body["error"] and "response" not in body


def test_without_api_errors_a_bad_request_is_refused_without_the_model(sim: Any) -> None:
    call = ToolCall(id="c1", name="getForecast", arguments=json.dumps({"city": "Lyon"}))
    body, llm_calls = run(sim, lambda ctx: execute(FORECAST, call, ctx, WEATHER))
    assert llm_calls == 0 and body["status_code"] == 400


def test_toolalpaca_dialogues_recover_from_api_errors_and_the_verifier_keeps_them(sim: Any) -> None:
    tasks = [Task(id=f"t{k}", tools=[WEATHER], instruction=f"What will the weather be in {city} over the next {k % 5 + 2} days?",
                  relevant_functions=["getForecast"], recipe="toolalpaca")
             for k, city in enumerate(["Lyon", "Oslo", "Lima", "Kyoto", "Cairo", "Quito", "Hanoi", "Dakar"])]

    async def job(ctx: ShardContext) -> tuple[StageOutput, StageOutput]:
        made = await DialoguesStage().run(ShardSpec("dialogues", 0, ()), [t.model_dump() for t in tasks], ctx)
        checked = await VerifyStage().run(ShardSpec("verify", 0, ()), [d.model_dump() for d in made.records], ctx)
        return made, checked

    # Some of the assistant's calls miss a required value or mistype one, as a model may; the
    # ReAct assistant (the recipe's default) reads the API's error and calls again.
    made, checked = run(sim, job, {"rate_missing_required": 0.3, "rate_wrong_type": 0.3}, "verify.judges=[]")
    accepted = {d.id for d in checked.records}
    recovered = []
    for dialogue in made.records:
        assert isinstance(dialogue, Dialogue)
        bodies = [json.loads(m.content or "{}") for m in dialogue.messages if m.role == "tool"]
        failed = [i for i, b in enumerate(bodies) if b["status_code"] >= 400]
        if failed and any(b["status_code"] == 200 for b in bodies[failed[0] + 1:]):
            recovered.append(dialogue)
            assert all("error" in bodies[i] and "response" not in bodies[i] for i in failed)
            assert errors(check(dialogue, policy=for_recipe("toolace")))  # a recipe that does not keep recovery
    assert recovered and {d.id for d in recovered} <= accepted
    assert made.profile["error_responses"]["toolalpaca"] >= len(recovered)


def _dialogue(sim: Any, settings: dict[str, Any], *overrides: str) -> tuple[list[Any], dict[str, Any]]:
    task = Task(id="t", tools=[WEATHER], instruction="What will the weather be in Lyon over the next 3 days?", recipe="toolalpaca")
    result = run(sim, lambda ctx: simulate(task, ctx), settings, *overrides)
    return result.messages, result.generation


def test_the_react_assistant_is_stored_as_the_canonical_record(sim: Any) -> None:
    messages, _ = _dialogue(sim, {})
    calls = [m for m in messages if m.role == "assistant" and m.tool_calls]
    final = messages[-1]
    assert calls and all(c.content for c in calls)  # an Action turn's text is its Thought
    assert [c.name for m in calls for c in m.tool_calls] == ["getForecast"]
    # The Final Answer is the turn's text; the Thought before it is reasoning, labels are gone.
    assert final.role == "assistant" and final.content and final.reasoning and not final.tool_calls
    assert not any(label in (m.content or "") for m in messages for label in ("Final Answer:", "Action:", "Observation:"))


def test_get_details_becomes_the_assistants_question_and_the_users_answer(sim: Any) -> None:
    messages, notes = _dialogue(sim, {"rate_clarify": 1.0})
    asked = notes["clarification_turns"]
    assert asked and messages[asked[0]].role == "assistant" and messages[asked[0]].content
    assert not messages[asked[0]].tool_calls and messages[asked[0] + 1].role == "user"
    assert "getDetails" not in {c.name for m in messages for c in m.tool_calls or []}
    # The user agent answers with a concrete value (Fig. 9), which the assistant then uses.
    answer = messages[asked[0] + 1].content or ""
    later = [json.loads(c.arguments) for m in messages[asked[0] + 1:] for c in m.tool_calls or []]
    assert later and any(isinstance(v, str) and v in answer for arguments in later for v in arguments.values())


def test_the_native_form_stays_an_option(sim: Any) -> None:
    messages, _ = _dialogue(sim, {}, "dialogues.assistant_format=native")
    final = messages[-1]
    assert [c.name for m in messages for c in m.tool_calls or []] == ["getForecast"]
    assert final.content and final.reasoning is None


def test_the_user_agent_lists_every_function_an_instruction_needs(sim: Any) -> None:
    tasks = run(sim, lambda ctx: toolalpaca_tasks(WEATHER, 10, ctx, recipe="toolalpaca"))
    assert len(tasks) == 10
    assert all(t.relevant_functions and set(t.relevant_functions) <= {"getForecast", "getAlerts"} for t in tasks)
    assert any(len(t.relevant_functions) > 1 for t in tasks)  # instructions that need several calls


def test_many_instructions_for_one_tool_are_asked_a_batch_at_a_time_and_all_differ(sim: Any) -> None:
    # 40 instructions in one answer outgrow the user role's 512 tokens and are cut off
    # (llm_truncated, with no larger re-ask); a batch of them fits.
    tasks = run(sim, lambda ctx: toolalpaca_tasks(WEATHER, 40, ctx, recipe="toolalpaca"), None,
                "llm.roles.user.max_tokens_ceiling=512")
    assert len(tasks) == 40
    assert len({t.id for t in tasks}) == 40 and len({t.instruction for t in tasks}) == 40


def test_the_openapi_document_keeps_output_descriptions_and_error_responses() -> None:
    from toolfactory.stages.dialogues.agents import error_statuses
    from toolfactory.definitions.convert import functions_from_openapi
    from toolfactory.stages.tools.introductions import assemble_openapi

    field = {"name": "city", "type": "string", "description": "City name", "required": True}
    answer = {"title": "Weather", "version": "1.0", "description": "Forecasts for cities.", "operations": [
        {"operationId": "getForecast", "method": "get", "path": "/forecast", "summary": "Forecast", "description": "The forecast.",
         "parameters": [field], "response": [{"name": "summary", "type": "string", "description": "The outlook", "required": True}],
         "errors": [{"status": 404, "description": "The city is unknown"}]},
    ]}
    problems, document = assemble_openapi(answer, {"name": "Weather", "link": "https://w.example.com"},
                                          {"getForecast": "The outlook of the next days for the city."})
    assert problems == []
    responses = document["paths"]["/forecast"]["get"]["responses"]
    assert responses["200"]["description"] == "The outlook of the next days for the city."
    assert sorted(responses) == ["200", "400", "404"] and responses["404"]["description"] == "The city is unknown"
    tool = Tool(name="Weather", functions=functions_from_openapi(document), openapi=document)
    assert error_statuses(tool, tool.functions[0]) == [400, 404]


def test_a_question_and_its_answer_export_as_toolalpacas_get_details_step(sim: Any) -> None:
    from toolfactory.export.toolalpaca import request_of, steps

    messages, notes = _dialogue(sim, {"rate_clarify": 1.0})
    dialogue = Dialogue(id="d", task_id="t", tools=WEATHER.functions, messages=messages, recipe="toolalpaca", generation=notes)
    asked = notes["clarification_turns"][0]
    assert request_of(dialogue) == "What will the weather be in Lyon over the next 3 days?"
    golden, intermediate = steps(dialogue)
    assert golden[0] == {"Action": "getDetails", "Action_Input": json.dumps({"Question": messages[asked].content})}
    assert intermediate[0][1] == messages[asked + 1].content  # the user's answer is the observation
    assert [step["Action"] for step in golden[1:]] == ["getForecast"]


def test_a_react_turn_is_read_as_its_thought_actions_or_final_answer() -> None:
    from toolfactory.llm.text_tools import parse_text_calls
    from toolfactory.stages.dialogues.react import split_final

    assert split_final("Thought: I have the forecast.\nFinal Answer: Lyon will be sunny.") == ("I have the forecast.", "Lyon will be sunny.")
    assert split_final("Lyon will be sunny.") == (None, "Lyon will be sunny.")
    # A model that writes its own Observation after the Action is making it up: it is cut.
    content, calls = parse_text_calls('Thought: I need the forecast.\nAction: getForecast\nAction Input: {"city": "Lyon", "days": 2}\n'
                                      'Observation: {"city": "Lyon"}\nFinal Answer: sunny', "react", "r1")
    assert content == "I need the forecast." and [c["function"]["name"] for c in calls] == ["getForecast"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Lyon", "days": 2}


def test_recovery_from_an_apis_own_error_status_is_kept_for_toolalpaca() -> None:
    from toolfactory.models import Message

    bad = ToolCall(id="c1", name="getForecast", arguments=json.dumps({"city": "Lyon", "days": 40}))
    good = ToolCall(id="c2", name="getForecast", arguments=json.dumps({"city": "Lyon", "days": 4}))
    messages = [
        Message(role="system", content="You can use the functions."),
        Message(role="user", content="What will the weather be in Lyon over the next 40 days?"),
        Message(role="assistant", content="I need the forecast.", tool_calls=[bad]),
        Message(role="tool", tool_call_id="c1", name="getForecast",
                content=json.dumps({"status_code": 422, "error": "days must be between 1 and 7"})),
        Message(role="assistant", content="The API allows 7 days at most; I will ask for 4.", tool_calls=[good]),
        Message(role="tool", tool_call_id="c2", name="getForecast",
                content=json.dumps({"status_code": 200, "response": {"city": "Lyon", "temperatures": [12, 14, 11, 9]}})),
        Message(role="assistant", content="Lyon will see 12, 14, 11 and 9 degrees over the next four days."),
    ]
    dialogue = Dialogue(id="d", task_id="t", tools=WEATHER.functions, messages=messages, recipe="toolalpaca")
    kept = check(dialogue, policy=for_recipe("toolalpaca"))
    assert not errors(kept) and any(v.code == "call_argument_range" and v.severity == "warning" for v in kept)
    assert any(v.code == "call_argument_range" for v in errors(check(dialogue, policy=for_recipe("toolace"))))
