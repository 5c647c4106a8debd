"""The registry: codes, severities, families, disabling, and the verify stage's use of it."""

from __future__ import annotations

import asyncio
import json

import pytest

from toolfactory.config import Config
from toolfactory.errors import ConfigError
from toolfactory.models import Dialogue, Rejected, Verdict
from toolfactory.stages.base import Planning, ShardContext, ShardSpec
from toolfactory.stages.verify.rules import RULES, Rule, check, errors, rule
from toolfactory.stages.verify.rules.registry import Sample
from toolfactory.stages.verify.stage import VerifyStage

from .helpers import dialogue

EXPECTED = {
    "call_unknown_function": "error", "call_arguments_not_json": "error", "call_missing_required": "error",
    "call_unknown_argument": "error", "call_argument_type": "error", "call_argument_enum": "error",
    "call_argument_pattern": "error", "call_argument_format": "error", "call_argument_range": "error",
    "call_argument_invalid": "error", "call_duplicate_argument": "error",
    "dialogue_no_function_call": "error", "dialogue_no_final_answer": "error", "dialogue_missing_field": "error",
    "dialogue_answer_too_long": "error", "dialogue_invalid_characters": "error", "dialogue_mixed_language": "warning",
    "dialogue_incomplete_answer": "error", "dialogue_mode_mismatch": "error",
    "sample_unanswered_call": "error", "sample_response_name_mismatch": "error", "sample_duplicate_call_id": "error",
    "sample_role_order": "error", "sample_call_after_answer": "error", "tool_name_not_openai": "warning",
    "filter_too_many_steps": "error", "filter_parse_error": "error", "filter_search_not_finished": "error",
    "tool_definition_invalid": "error", "tool_description_missing": "warning", "sample_call_format_mismatch": "error",
    "exec_result_mismatch": "error", "exec_source_drifted": "error", "exec_error_unrecovered": "error", "exec_state_mismatch": "error",
    "exec_record_inconsistent": "error",
    "exec_timeout": "error", "exec_server_crashed": "error", "exec_output_flood": "error",
    "exec_process_limit": "error", "exec_start_failed": "error",
    "arg_value_ungrounded": "warning", "arg_text_ungrounded": "warning", "answer_control_token": "error",
    "assistant_contradicts_calls": "error",
}
FAMILIES = {"tool": "definition", "call": "function_call", "dialogue": "dialogue", "sample": "consistency", "filter": "filters",
            "exec": "execution", "arg": "argument_grounding", "answer": "control_tokens", "assistant": "contradiction"}


def test_the_registered_codes_and_severities() -> None:
    assert {code: r.severity for code, r in RULES.items()} == EXPECTED


def test_each_rule_lives_in_its_family_module_and_is_documented() -> None:
    for code, registered in RULES.items():
        assert isinstance(registered, Rule)
        assert registered.family == FAMILIES[code.split("_", 1)[0]]
        assert registered.doc


def test_registering_a_code_twice_or_a_bad_severity_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        rule("call_unknown_function")(lambda sample: [])
    with pytest.raises(ValueError, match="severity"):
        rule("x_new", severity="fatal")  # type: ignore[arg-type]
    assert "x_new" not in RULES


def test_a_rule_can_be_called_alone() -> None:
    broken = dialogue(arguments='{"city": "Lyon", "days": 9}', answer=None)
    assert [v.code for v in RULES["call_argument_range"](broken)] == ["call_argument_range"]
    # 9 days: out of range, and a value the user ("for 3 days") never gave
    assert {v.code for v in check(broken)} == {"call_argument_range", "dialogue_no_final_answer", "arg_value_ungrounded"}


def test_every_failed_rule_is_listed_not_only_the_first() -> None:
    found = {v.code for v in check(dialogue(arguments='{"days": "x"}', answer=None))}
    assert found >= {"call_missing_required", "call_argument_type", "dialogue_no_final_answer"}


def test_disabled_rules_are_skipped() -> None:
    assert check(dialogue(answer=None), frozenset({"dialogue_no_final_answer"})) == []


def test_verdicts_carry_code_severity_path_and_message() -> None:
    (verdict,) = errors(check(dialogue(arguments='{"city": "Lyon", "units": "kelvin"}')))
    assert verdict == Verdict(code="call_argument_enum", passed=False, severity="error",
                              path="messages[2].tool_calls[0].arguments/units", message=verdict.message)
    assert "kelvin" in verdict.message


def test_errors_keeps_only_rejecting_verdicts() -> None:
    warning = Verdict(code="w", passed=False, severity="warning")
    error = Verdict(code="e", passed=False, severity="error")
    assert errors([warning, error]) == [error]


def test_the_sample_parses_each_call_once() -> None:
    sample = Sample(dialogue(arguments='{"city": "Lyon"'))
    assert [c.path for c in sample.calls] == ["messages[2].tool_calls[0]"]
    assert sample.calls[0].arguments is None and sample.calls[0].parse_error


# -- the stage --------------------------------------------------------------------------------

def run_stage(records: list[Dialogue], disabled: list[str] | None = None):  # type: ignore[no-untyped-def]
    # The rule layer alone: judges off, so no gateway is needed (tests/test_judges.py covers them).
    config = Config.model_validate({"verify": {"disabled_rules": disabled or [], "judges": []}})
    ctx = ShardContext(config=config, run_id="r", gateway=None)  # type: ignore[arg-type]
    shard = ShardSpec("verify", 0, ("in",))
    return asyncio.run(VerifyStage().run(shard, [json.loads(d.to_json()) for d in records], ctx))


def test_the_stage_rejects_on_errors_only_and_keeps_warnings() -> None:
    clean = dialogue()
    clean.id = "clean"
    warned = dialogue(answer="It will be sunny in Lyon. 根据查询结果，未来三天都是晴天，最高气温大约二十一度。")
    warned.id = "warned"
    broken = dialogue(arguments='{"city": "Lyon", "days": 9}', answer="It will be sunny in Lyon. 根据查询结果，未来三天都是晴天，最高气温大约二十一度。")
    broken.id = "broken"
    out = run_stage([clean, warned, broken])
    accepted = {d.id: d for d in out.records}  # type: ignore[attr-defined]
    assert set(accepted) == {"clean", "warned"}
    assert accepted["clean"].verdicts == []
    assert [(v.code, v.severity) for v in accepted["warned"].verdicts] == [("dialogue_mixed_language", "warning")]
    (rejected,) = out.rejected
    assert isinstance(rejected, Rejected) and rejected.id == "broken"
    assert rejected.reasons == ["call_argument_range"]  # the warning is recorded, not a reason
    assert {v["code"] for v in rejected.record["verdicts"]} == {"call_argument_range", "dialogue_mixed_language", "arg_value_ungrounded"}
    assert "messages[2].tool_calls[0].arguments/days" in rejected.detail


def test_a_record_the_model_refuses_or_too_deep_is_a_rejection_not_the_end_of_the_shard() -> None:
    ok = dialogue()
    ok.id = "ok"
    deep = json.loads(dialogue().to_json())
    deep["id"] = "deep"
    schema: dict = {"type": "object"}
    for _ in range(400):  # deeper than pydantic serializes
        schema = {"type": "object", "properties": {"x": schema}}
    deep["tools"][0]["parameters"] = schema
    config = Config.model_validate({"verify": {"judges": []}})
    ctx = ShardContext(config=config, run_id="r", gateway=None)  # type: ignore[arg-type]
    inputs = [json.loads(ok.to_json()), {"id": "broken", "messages": "not a list"}, deep]
    out = asyncio.run(VerifyStage().run(ShardSpec("verify", 0, ("in",)), inputs, ctx))
    assert [d.id for d in out.records] == ["ok"]  # type: ignore[attr-defined]
    assert {r.id: r.reasons for r in out.rejected} == {"broken": ["invalid_record"], "deep": ["record_too_deep"]}
    assert out.items_in == 3 and "Field required" in next(r.detail for r in out.rejected if r.id == "broken")


def test_the_stage_honours_disabled_rules() -> None:
    out = run_stage([dialogue(arguments='{"city": "Lyon", "days": 9}')], disabled=["call_argument_range"])
    assert len(out.records) == 1 and out.rejected == []


def test_the_stage_plan_refuses_unknown_rule_codes() -> None:
    config = Config.model_validate({"verify": {"disabled_rules": ["call_argument_invalid", "no_such_rule"]}})
    with pytest.raises(ConfigError, match="no_such_rule"):
        VerifyStage().plan(Planning(config, "r", {"dialogues": []}))
