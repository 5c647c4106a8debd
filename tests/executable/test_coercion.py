"""Near-miss argument types coerced before a call to an executable tool runs: what is coerced and
what is not, and a call with "5" for an integer through the dialogues stage, under both policies."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolfactory.config import Config, validate_config
from toolfactory.executable.coercion import coerce
from toolfactory.executable.python_env import PythonEnvironment
from toolfactory.models import Dialogue, Task, ToolCall
from toolfactory.stages.dialogues.execution import DialogueExecution
from toolfactory.stages.verify.execution import ExecutionLayer
from toolfactory.stages.verify.rules import check, errors

from .test_dialogues_execution import HERE, dialogues, source_tool

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "force": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ids": {"type": "array", "items": {"type": "integer"}},
        "name": {"type": "string"},
        "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "filter": {"type": "object", "properties": {"max": {"type": "integer"}, "exact": {"type": "boolean"}}},
    },
    "required": ["count"],
}


def kinds(arguments: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c.kind, c.pointer) for c in coerce(SCHEMA, arguments).coercions]


def test_a_number_string_becomes_the_integer_or_number_asked_for() -> None:
    found = coerce(SCHEMA, {"count": "5", "ratio": "2.5"})
    assert found.arguments == {"count": 5, "ratio": 2.5}
    assert [(c.kind, c.pointer, c.sent, c.coerced) for c in found.coercions] == [
        ("number", "/count", "5", 5), ("number", "/ratio", "2.5", 2.5)]


def test_an_integral_string_is_an_integer_but_a_fraction_is_not() -> None:
    assert coerce(SCHEMA, {"count": "5.0"}).arguments == {"count": 5}
    assert coerce(SCHEMA, {"count": "5.5"}).coercions == ()


def test_only_plain_json_numbers_are_numbers() -> None:
    for text in (" 5", "05", "+5", "5,0", "0x10", "NaN", "Infinity", "1e999", "five", ""):
        assert coerce(SCHEMA, {"count": 1, "ratio": text}).coercions == (), text


def test_true_and_false_in_any_case_become_booleans() -> None:
    assert coerce(SCHEMA, {"count": 1, "force": "TRUE"}).arguments == {"count": 1, "force": True}
    assert coerce(SCHEMA, {"count": 1, "force": "false"}).arguments == {"count": 1, "force": False}
    assert kinds({"count": 1, "force": "True"}) == [("boolean", "/force")]


def test_yes_is_no_boolean() -> None:
    assert coerce(SCHEMA, {"count": 1, "force": "yes"}).coercions == ()
    assert coerce(SCHEMA, {"count": 1, "force": 1}).coercions == ()


def test_a_single_value_becomes_an_array_of_one_when_it_fits_the_items() -> None:
    found = coerce(SCHEMA, {"count": 1, "tags": "urgent"})
    assert found.arguments == {"count": 1, "tags": ["urgent"]} and kinds({"count": 1, "tags": "urgent"}) == [("array", "/tags")]


def test_a_value_that_still_fails_the_items_once_wrapped_is_not_coerced() -> None:
    assert coerce(SCHEMA, {"count": 1, "tags": 7}).coercions == ()
    assert coerce(SCHEMA, {"count": 1, "ids": "7"}).coercions == ()  # one step only: no ["7"] then [7]


def test_an_object_where_a_string_is_asked_is_not_coerced() -> None:
    found = coerce(SCHEMA, {"count": 1, "name": {"first": "Ada"}})
    assert found.coercions == () and found.arguments == {"count": 1, "name": {"first": "Ada"}}
    assert coerce(SCHEMA, {"count": 1, "name": 5}).coercions == ()  # nor a number to a string


def test_nested_properties_and_items_are_coerced_where_they_fail() -> None:
    found = coerce(SCHEMA, {"count": 1, "filter": {"max": "10", "exact": "false"}, "ids": [1, "2"]})
    assert found.arguments == {"count": 1, "filter": {"max": 10, "exact": False}, "ids": [1, 2]}
    assert [(c.kind, c.pointer) for c in found.coercions] == [
        ("boolean", "/filter/exact"), ("number", "/filter/max"), ("number", "/ids/1")]


def test_an_any_of_takes_the_coerced_value_its_branch_accepts() -> None:
    assert coerce(SCHEMA, {"count": 1, "limit": "3"}).arguments == {"count": 1, "limit": 3}
    assert coerce(SCHEMA, {"count": 1, "limit": "3.5"}).coercions == ()


def test_valid_arguments_are_left_as_they_are() -> None:
    arguments = {"count": 1, "name": "5", "tags": ["a"]}
    found = coerce(SCHEMA, arguments)
    assert found.arguments is arguments and found.coercions == ()


def test_nothing_is_coerced_when_the_arguments_stay_invalid() -> None:
    # "5" could be coerced, but the missing `count` keeps the call a rejection.
    arguments = {"ratio": "5"}
    assert coerce(SCHEMA, arguments).coercions == () and coerce(SCHEMA, arguments).arguments == {"ratio": "5"}
    assert coerce(SCHEMA, {"count": "5", "force": "maybe"}).coercions == ()


def test_a_schema_that_names_no_type_is_not_coerced_to() -> None:
    # "12" fails minLength; 12 would pass it (minLength reads strings only) but nothing asks for a number.
    assert coerce({"type": "object", "properties": {"code": {"minLength": 3}}}, {"code": "12"}).coercions == ()


# The dialogues stage, with the simulator's assistant sending "5" for `amount` (an integer).


@pytest.fixture
def envs_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def counter_config(policy: str) -> Config:
    counter = {"name": "counter", "class_path": "toolenvs:Counter", "allow": ["add"], "deterministic": True,
               "near_miss_types": policy}
    return validate_config({"tools": {"environments": [counter]}, "dialogues": {"reject_early": False}})


def test_with_coerce_a_number_string_for_an_integer_runs_and_the_record_holds_the_integer(sim: Any, envs_on_path: None) -> None:
    cfg = counter_config("coerce")
    tool = source_tool(cfg, "counter")
    out, _ = dialogues(sim, cfg, [Task(id="t", tools=[tool], instruction="Add 4 to the counter.")], rate_wrong_type=1.0)
    [dialogue] = out.records
    assert isinstance(dialogue, Dialogue)
    calls = [c for m in dialogue.messages for c in m.tool_calls or []]
    executed = dialogue.generation["execution"]["calls"]
    assert calls and len(executed) == len(calls)  # every call ran: none answered with the 400
    for call, entry in zip(calls, executed):
        amount = json.loads(call.arguments)["amount"]
        assert type(amount) is int and entry["arguments"] == call.arguments
        assert json.loads(entry["sent_arguments"])["amount"] == str(amount)
        assert entry["coercions"] == [{"kind": "number", "path": "/amount"}] and not entry["is_error"]
    assert dialogue.generation["execution"]["states"]["counter"]["history"] == [json.loads(c.arguments)["amount"] for c in calls]
    assert out.profile["arg_coerced_number"] == {"counter": len(calls)}
    # The verifier takes the record as it is: its rules accept the calls, and the replay reproduces them.
    assert [v.code for v in errors(check(dialogue)) if v.code.startswith("call_")] == []
    settings = cfg.tools.environments[0]
    layer = ExecutionLayer({"counter": (PythonEnvironment(settings), settings)})
    assert asyncio.run(layer.verdicts(dialogue)) == []


def test_with_reject_a_number_string_for_an_integer_gets_the_400_without_running(sim: Any, envs_on_path: None) -> None:
    cfg = counter_config("reject")
    tool = source_tool(cfg, "counter")
    out, _ = dialogues(sim, cfg, [Task(id="t", tools=[tool], instruction="Add 4 to the counter.")], rate_wrong_type=1.0)
    [dialogue] = out.records
    assert isinstance(dialogue, Dialogue)
    calls = [c for m in dialogue.messages for c in m.tool_calls or []]
    answers = [json.loads(m.content or "") for m in dialogue.messages if m.role == "tool"]
    assert calls and all(isinstance(json.loads(c.arguments)["amount"], str) for c in calls)
    assert all(a["status_code"] == 400 and "invalid arguments" in a["error"] for a in answers)
    assert not (dialogue.generation.get("execution") or {}).get("calls")
    assert not any(dimension.startswith("arg_coerced_") for dimension in out.profile)


def test_well_typed_leaves_valid_calls_and_calls_of_other_functions_alone(envs_on_path: None) -> None:
    cfg = counter_config("coerce")
    tool = source_tool(cfg, "counter")
    valid = ToolCall(id="a", name="add", arguments='{"amount": 5}')
    other = ToolCall(id="b", name="lookup", arguments='{"amount": "5"}')
    broken = ToolCall(id="c", name="add", arguments='{"amount": "5"')
    near = ToolCall(id="d", name="add", arguments='{"amount": "5"}')

    async def go() -> list[ToolCall]:
        return DialogueExecution(Task(id="t", tools=[tool], instruction="Add."), cfg.tools).well_typed([valid, other, broken, near])

    kept = asyncio.run(go())
    assert kept[:3] == [valid, other, broken] and kept[0] is valid
    assert kept[3] == ToolCall(id="d", name="add", arguments='{"amount": 5}')


def test_a_toolllm_search_runs_the_coerced_calls(sim: Any, envs_on_path: None) -> None:
    # Every call is wrong typed, Finish too, so the search never answers: its record is kept anyway.
    cfg = counter_config("coerce").model_copy(deep=True)
    cfg.dialogues.keep_failed_searches = True
    tool = source_tool(cfg, "counter")
    task = Task(id="t", tools=[tool], instruction="Add 4 to the counter.", recipe="toolllm")
    out, _ = dialogues(sim, cfg, [task], rate_wrong_type=1.0)
    [dialogue] = out.records
    assert isinstance(dialogue, Dialogue)
    executed = dialogue.generation["execution"]["calls"]
    assert executed and all(type(json.loads(e["arguments"])["amount"]) is int for e in executed)
    assert all(json.loads(e["sent_arguments"])["amount"] == str(json.loads(e["arguments"])["amount"]) for e in executed)
    assert all(e["coercions"] == [{"kind": "number", "path": "/amount"}] and not e["is_error"] for e in executed)
    assert out.profile["arg_coerced_number"] == {"counter": len(executed)}


def test_a_coerced_call_is_not_rejected_early(sim: Any, envs_on_path: None) -> None:
    # Under a policy without error recovery, a call that breaks the schema rejects its dialogue at once.
    for policy, kept in (("coerce", True), ("reject", False)):
        cfg = counter_config(policy).model_copy(deep=True)
        cfg.dialogues.reject_early = True
        cfg.verify.keep_error_recovery = []
        task = Task(id="t", tools=[source_tool(cfg, "counter")], instruction="Add 4 to the counter.")
        out, _ = dialogues(sim, cfg, [task], rate_wrong_type=1.0)
        assert bool(out.records) is kept, policy
        assert kept or [r.reasons for r in out.rejected] == [["call_argument_type"]]
