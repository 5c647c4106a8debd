"""The rule catalogue lists every rule of the verifier's registry, with its severity and kind."""

from __future__ import annotations

from .helpers import generator
from toolfactory.formats import NOT_APPLICABLE_REASONS, REASONS
from toolfactory.stages.verify.judges import ASPECTS
from toolfactory.stages.verify.rules import RULES


def test_every_rule_has_its_row():
    page = generator("rule_catalogue").page()
    missing = [code for code, rule in RULES.items() if f"| `{code}` | {rule.severity} | {rule.kind} |" not in page]
    assert missing == [] and len(RULES) > 25


def test_every_judge_aspect_and_reader_reason_is_listed():
    page = generator("rule_catalogue").page()
    codes = [f"judge_{aspect}" for aspect in ASPECTS] + sorted(REASONS)
    assert [c for c in codes if f"| `{c}` |" not in page] == []


def test_every_reader_reason_is_explained():
    reasons = generator("rule_catalogue").reader_reasons()
    assert set(reasons) == set(REASONS) and all(reasons.values())


def test_rules_a_format_skips_are_listed_with_the_reason():
    page = generator("rule_catalogue").page()
    rows = [f"| `{fmt}` | `{rule}` | {why} |" for fmt, reasons in NOT_APPLICABLE_REASONS.items() for rule, why in reasons.items()]
    assert rows and [r for r in rows if r not in page] == []
