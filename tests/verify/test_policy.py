"""Validity vs policy: the filters are a recipe's choice, not a verdict on correctness."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from toolfactory.config import Config
from toolfactory.models import Dialogue, Message, ToolCall
from toolfactory.stages.base import ShardContext, ShardSpec
from toolfactory.stages.verify.policy import POLICIES, for_recipe
from toolfactory.stages.verify.report import verify_file
from toolfactory.stages.verify.rules import check, errors
from toolfactory.stages.verify.stage import VerifyStage

from .helpers import ANSWER, WEATHER

ERROR = json.dumps({"status_code": 400, "error": 'invalid arguments: "days" must be at most 7'})
OK = json.dumps({"status_code": 200, "response": {"temp": 21}})


def recovered(recipe: str = "toolalpaca") -> Dialogue:
    """An invalid call answered with the pipeline's error, then corrected (ToolAlpaca keeps these)."""
    messages = [
        Message(role="user", content="Weather in Lyon for 9 days?"),
        Message(role="assistant", tool_calls=[ToolCall(id="c1", name="get_forecast", arguments='{"city": "Lyon", "days": 9}')]),
        Message(role="tool", tool_call_id="c1", name="get_forecast", content=ERROR),
        Message(role="assistant", tool_calls=[ToolCall(id="c2", name="get_forecast", arguments='{"city": "Lyon", "days": 7}')]),
        Message(role="tool", tool_call_id="c2", name="get_forecast", content=OK),
        Message(role="assistant", content=ANSWER),
    ]
    return Dialogue(id=recipe, task_id="t", tools=[WEATHER], messages=messages, recipe=recipe)


def steps(n: int, recipe: str) -> Dialogue:
    messages = [Message(role="user", content="Weather in Lyon, day by day?")]
    for i in range(n):
        messages += [Message(role="assistant", tool_calls=[ToolCall(id=f"c{i}", name="get_forecast", arguments='{"city": "Lyon"}')]),
                     Message(role="tool", tool_call_id=f"c{i}", name="get_forecast", content=OK)]
    messages.append(Message(role="assistant", content=ANSWER))
    return Dialogue(id=f"{recipe}-{n}", task_id="t", tools=[WEATHER], messages=messages, recipe=recipe)


def test_toolalpaca_keeps_an_error_that_was_recovered() -> None:
    verdicts = check(recovered(), policy=POLICIES["toolalpaca"])
    assert errors(verdicts) == []
    assert [(v.code, v.severity) for v in verdicts] == [("call_argument_range", "warning")]


def test_toolace_rejects_the_same_dialogue() -> None:
    rejecting = {v.code for v in errors(check(recovered("toolace"), policy=POLICIES["toolace"]))}
    assert rejecting == {"call_argument_range", "filter_parse_error"}


def test_the_step_limit_is_toolalpacas_not_toolllms() -> None:
    assert "filter_too_many_steps" in {v.code for v in check(steps(6, "toolalpaca"), policy=POLICIES["toolalpaca"])}
    assert check(steps(6, "toolllm"), policy=POLICIES["toolllm"]) == []


def test_without_a_policy_only_validity_rules_run() -> None:
    assert check(steps(6, "toolalpaca"), policy=None) == []


def test_config_overrides_a_recipes_step_limit() -> None:
    assert for_recipe("toolllm", {"toolllm": 12}, []).max_steps == 12
    assert for_recipe("toolalpaca", {}, []).max_steps is None


def test_the_factory_applies_each_dialogues_recipe_policy() -> None:
    config = Config.model_validate({"verify": {"judges": []}})
    ctx = ShardContext(config=config, run_id="r", gateway=None)  # type: ignore[arg-type]
    records = [recovered("toolalpaca"), recovered("toolace"), steps(6, "toolllm")]
    out = asyncio.run(VerifyStage().run(ShardSpec("verify", 0, ("in",)), [json.loads(d.to_json()) for d in records], ctx))
    assert sorted(d.id for d in out.records) == ["toolalpaca", "toolllm-6"]  # type: ignore[attr-defined]
    assert [r.id for r in out.rejected] == ["toolace"]


def test_verify_reports_policy_only_on_request(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(steps(6, "toolalpaca").to_json() + "\n")
    assert verify_file(path, "toolfactory", tmp_path / "a")["accepted"] == 1
    report = verify_file(path, "toolfactory", tmp_path / "b", policy=POLICIES["toolalpaca"])
    assert (report["rejected"], report["rules"], report["policy"]) == (1, {"filter_too_many_steps": 1}, "toolalpaca")


# -- ToolAlpaca's getDetails ---------------------------------------------------------------------

def asks_the_user(recipe: str, name: str = "getDetails") -> Dialogue:
    """A golden answer that first asks the user (ToolAlpaca's built-in action), then calls the tool."""
    messages = [
        Message(role="user", content="Weather for a few days?"),
        Message(role="assistant", tool_calls=[ToolCall(id="c1", name=name, arguments='{"Question": "Which city?"}')]),
        Message(role="assistant", tool_calls=[ToolCall(id="c2", name="get_forecast", arguments='{"city": "Lyon"}')]),
    ]
    return Dialogue(id="d", task_id="t", tools=[WEATHER], messages=messages, recipe=recipe)


def test_getdetails_is_a_known_action_of_toolalpaca_records_whatever_the_policy() -> None:
    for policy in (None, POLICIES["toolalpaca"], POLICIES["toolllm"]):
        assert "call_unknown_function" not in {v.code for v in check(asks_the_user("toolalpaca"), policy=policy)}


def test_getdetails_is_unknown_outside_toolalpaca_unless_its_policy_is_applied() -> None:
    assert "call_unknown_function" in {v.code for v in check(asks_the_user("toolllm"), policy=None)}
    assert "call_unknown_function" not in {v.code for v in check(asks_the_user("openai"), policy=POLICIES["toolalpaca"])}


def test_toolalpaca_knows_nothing_else_outside_the_offered_functions() -> None:
    assert POLICIES["toolalpaca"].builtin_functions == frozenset({"getDetails"})
    verdicts = check(asks_the_user("toolalpaca", name="askUser"), policy=None)
    assert [v.path for v in verdicts if v.code == "call_unknown_function"] == ["messages[1].tool_calls[0].name"]


def test_released_golden_answers_that_ask_the_user_are_not_unknown_calls(shared_data: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolfactory.cli import app

    path = shared_data / "toolalpaca/eval_simulated.json"
    asking = [f"{t['Name']}/{k}" for t in json.loads(path.read_text()) for k, golden in enumerate(t["Golden_Answers"])
              if any(step["Action"] == "getDetails" for step in golden)]
    assert len(asking) == 8
    result = CliRunner().invoke(app, ["verify", str(path), "--format", "toolalpaca", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    rejected = [json.loads(line) for line in (tmp_path / "r/rejected.jsonl").read_text().splitlines()]
    unknown = [e for line in rejected for e in line["errors"] if e["code"] == "call_unknown_function"]
    assert not [e for e in unknown if "getDetails" in e["message"]]
    # The one left is a real fault: an "[Optional]" marker around an offered name.
    assert len(unknown) == 1 and "[Optional]" in unknown[0]["message"]
    assert not {line["id"] for line in rejected if line["codes"] == ["call_unknown_function"]} & set(asking)
