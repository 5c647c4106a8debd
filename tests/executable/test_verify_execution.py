"""The verifier's execution layer: dialogues whose calls really ran on a Python environment are
replayed in fresh runner processes and judged by the result, the errors and the state they leave."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from toolfactory.config import Config
from toolfactory.executable.python_env import PythonEnvironment
from toolfactory.executable.settings import PythonEnvironmentSettings
from toolfactory.models import Dialogue, Function, Message, ToolCall
from toolfactory.stages import ShardContext, ShardSpec
from toolfactory.stages.verify.execution import ExecutionLayer
from toolfactory.stages.verify.stage import VerifyStage

HERE = Path(__file__).parent
ADD = Function(name="add", description="Add to the counter.",
               parameters={"type": "object", "properties": {"amount": {"type": "integer"}, "note": {"type": "string"}},
                           "required": ["amount"]})
DIVIDE = Function(name="divide", description="Divide the counter's value.",
                  parameters={"type": "object", "properties": {"by": {"type": "number"}}, "required": ["by"]})


@pytest.fixture(autouse=True)
def envs_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def settings(**overrides: Any) -> PythonEnvironmentSettings:
    return PythonEnvironmentSettings(**{"name": "counter", "class_path": "toolenvs:Counter", "deterministic": True,
                                        "initial_state": {"start": 10}, **overrides})


def recorded(calls: list[tuple[str, dict[str, Any]]], env_settings: PythonEnvironmentSettings | None = None) -> Dialogue:
    """A dialogue whose calls really ran on one fresh session, recorded as the dialogues stage does."""
    env = PythonEnvironment(env_settings or settings())

    async def run() -> tuple[list[Message], list[dict[str, Any]], Any]:
        messages = [Message(role="user", content="Work the counter.")]
        executed: list[dict[str, Any]] = []
        async with env.session() as session:
            for i, (name, arguments) in enumerate(calls):
                call = ToolCall(id=f"call_{i}", name=name, arguments=json.dumps(arguments))
                result = await session.call(name, arguments)
                messages += [Message(role="assistant", tool_calls=[call]),
                             Message(role="tool", tool_call_id=call.id, name=name, content=result.content)]
                executed.append({"source": "counter", "name": name, "arguments": call.arguments,
                                 "is_error": result.is_error, "truncated": result.truncated})
            state = await session.state()
        messages.append(Message(role="assistant", content="Done."))
        return messages, executed, {"counter": state}

    messages, executed, states = asyncio.run(run())
    return Dialogue(id="d", task_id="t", tools=[ADD, DIVIDE], messages=messages, recipe="toolace",
                    generation={"execution": {"calls": executed, "states": states}})


def codes(dialogue: Dialogue, env_settings: PythonEnvironmentSettings | None = None,
          disabled: frozenset[str] = frozenset()) -> list[str]:
    chosen = env_settings or settings()
    layer = ExecutionLayer({"counter": (PythonEnvironment(chosen), chosen)}, disabled)
    return sorted(v.code for v in asyncio.run(layer.verdicts(dialogue)))


def test_a_recorded_dialogue_replays_to_the_same_results_and_state() -> None:
    assert codes(recorded([("add", {"amount": 5}), ("divide", {"by": 3})])) == []


def test_a_deterministic_result_the_replay_does_not_give_is_exec_result_mismatch() -> None:
    dialogue = recorded([("add", {"amount": 5})])
    dialogue.messages[2].content = '{"value": 99}'
    assert codes(dialogue) == ["exec_result_mismatch"]


def test_a_tool_not_declared_deterministic_may_answer_otherwise() -> None:
    dialogue = recorded([("add", {"amount": 5})])
    dialogue.messages[2].content = '{"value": 99}'
    assert codes(dialogue, settings(deterministic=["divide"])) == []


def test_an_error_never_followed_by_a_successful_call_of_its_function_is_exec_error_unrecovered() -> None:
    assert codes(recorded([("divide", {"by": 0}), ("add", {"amount": 1})])) == ["exec_error_unrecovered"]


def test_an_error_followed_by_a_successful_call_of_the_same_function_is_recovered() -> None:
    assert codes(recorded([("divide", {"by": 0}), ("divide", {"by": 2})])) == []


def test_a_replay_that_leaves_another_state_than_recorded_is_exec_state_mismatch() -> None:
    dialogue = recorded([("add", {"amount": 5})])
    dialogue.generation["execution"]["states"]["counter"]["value"] = 16
    assert codes(dialogue) == ["exec_state_mismatch"]


def test_the_target_state_is_what_the_replay_must_reach_when_the_task_has_one() -> None:
    dialogue = recorded([("add", {"amount": 5})])
    target = json.loads(json.dumps(dialogue.generation["execution"]["states"]))
    dialogue.generation["execution"]["target_state"] = target
    assert codes(dialogue) == []
    target["counter"]["value"] = 20  # the task wanted 20; the dialogue reached 15
    assert codes(dialogue) == ["exec_state_mismatch"]


def test_a_call_that_ran_is_replayed_even_where_its_arguments_break_the_documented_parameters() -> None:
    # BFCL's ground truths do this (a string `ticket_id` documented as an integer) and BFCL runs them.
    dialogue = recorded([("add", {"amount": 2.5})])
    dialogue.generation["execution"]["target_state"] = json.loads(json.dumps(dialogue.generation["execution"]["states"]))
    assert codes(dialogue) == []


def test_calls_of_abandoned_branches_make_the_recorded_state_unreproducible_so_only_the_target_counts() -> None:
    # The session ran add(3) on a branch the search abandoned: the recorded state includes it.
    branchy = recorded([("add", {"amount": 3}), ("add", {"amount": 5})])
    del branchy.messages[1:3]
    assert codes(branchy, settings(deterministic=False)) == []
    branchy.generation["execution"]["target_state"] = {"counter": {"value": 18, "label": "counter", "history": [3, 5]}}
    assert codes(branchy, settings(deterministic=False)) == ["exec_state_mismatch"]
    # Its result on the path was computed after the abandoned call: a deterministic tool shows it.
    assert "exec_result_mismatch" in codes(branchy)


def test_a_replayed_call_that_hangs_is_exec_timeout() -> None:
    hostile = settings(name="counter", class_path="toolenvs:Hostile", call_timeout_seconds=30)
    dialogue = recorded([("add", {"amount": 1})], hostile)
    dialogue.messages[1].tool_calls[0].name = "hang"  # type: ignore[index]
    dialogue.messages[1].tool_calls[0].arguments = "{}"  # type: ignore[index]
    dialogue.generation["execution"]["calls"][0].update(name="hang", arguments="{}")
    dialogue.tools.append(Function(name="hang", description="Never answers."))
    assert codes(dialogue, settings(name="counter", class_path="toolenvs:Hostile", call_timeout_seconds=1)) == ["exec_timeout"]


def test_a_disabled_execution_rule_is_not_applied() -> None:
    dialogue = recorded([("add", {"amount": 5})])
    dialogue.generation["execution"]["states"]["counter"]["value"] = 16
    assert codes(dialogue, disabled=frozenset({"exec_state_mismatch"})) == []


def test_the_verify_stage_counts_the_execution_layer_and_its_rejections() -> None:
    good = recorded([("add", {"amount": 5})])
    bad = recorded([("add", {"amount": 2})])
    bad.id = "bad"
    bad.generation["execution"]["states"]["counter"]["value"] = 0
    environment = settings().model_dump(mode="json", exclude_none=True)
    config = Config.model_validate({"tools": {"environments": [environment]}, "verify": {"judges": []}})
    ctx = ShardContext(config=config, run_id="r", gateway=None)  # type: ignore[arg-type]
    out = asyncio.run(VerifyStage().run(ShardSpec("verify", 0, ("in",)), [good.model_dump(), bad.model_dump()], ctx))
    assert [d.id for d in out.records] == ["d"]  # type: ignore[attr-defined]
    assert [(r.id, r.reasons) for r in out.rejected] == [("bad", ["exec_state_mismatch"])]
    assert out.layers["execution"] == (2, 1)


def test_a_verify_shard_that_replays_nothing_still_reports_the_execution_layer_of_a_run_with_sources() -> None:
    plain = recorded([("add", {"amount": 5})])
    plain.generation = {}  # no call ran on a source: nothing to replay
    environment = settings().model_dump(mode="json", exclude_none=True)
    config = Config.model_validate({"tools": {"environments": [environment]}, "verify": {"judges": []}})
    ctx = ShardContext(config=config, run_id="r", gateway=None)  # type: ignore[arg-type]
    out = asyncio.run(VerifyStage().run(ShardSpec("verify", 0, ("in",)), [plain.model_dump()], ctx))
    assert out.layers["execution"] == (1, 1)
    assert out.profile["execution_replayed"] == {"dialogues": 0}


def test_the_exec_codes_are_rules_of_the_execution_kind_which_disabled_rules_accepts() -> None:
    from toolfactory.stages.verify.rules import RULES

    assert {"exec_result_mismatch", "exec_error_unrecovered", "exec_state_mismatch", "exec_timeout"} <= set(RULES)
    assert all(RULES[c].kind == "execution" for c in RULES if c.startswith("exec_"))


def test_an_error_the_replay_gets_where_the_dialogue_records_a_success_is_quoted_from_the_replay() -> None:
    dialogue = recorded([("divide", {"by": 2})])
    dialogue.messages[1].tool_calls[0].arguments = json.dumps({"by": 0})  # not the call that ran
    layer = ExecutionLayer({"counter": (PythonEnvironment(settings()), settings())})
    verdicts = asyncio.run(layer.verdicts(dialogue))
    assert sorted(v.code for v in verdicts) == ["exec_error_unrecovered", "exec_result_mismatch"]
    [verdict] = [v for v in verdicts if v.code == "exec_error_unrecovered"]
    assert "failed on replay ('" in verdict.message and "ZeroDivisionError" in verdict.message, verdict.message
    assert f"the dialogue records {dialogue.messages[2].content!r}" in verdict.message


def test_without_a_declaration_the_replay_holds_a_tool_to_its_result_as_vetting_found() -> None:
    undeclared = settings(deterministic=None)
    for vetted, expected in ((True, ["exec_result_mismatch"]), (False, []), (None, [])):
        dialogue = recorded([("add", {"amount": 5})], undeclared)
        dialogue.messages[2].content = '{"value": 99}'
        if vetted is not None:  # the dialogues stage records what the tool's card says
            dialogue.generation["execution"]["calls"][0]["deterministic"] = vetted
        assert codes(dialogue, undeclared) == expected, vetted
