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
