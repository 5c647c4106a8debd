"""Precision and recall of every rule on a labelled corpus: valid dialogues built from the seed
catalog plus one single-fault corruption of each per applicable kind."""

from __future__ import annotations

import json

import pytest

from toolfactory.models import Dialogue
from benchmarks.corpus import SHAPES, valid_dialogues
from benchmarks.rule_scores import CO_OCCURRENCES, evaluate
from toolfactory.stages.verify.corruption import KINDS, Corruption, corrupt, corruptions
from toolfactory.stages.verify.rules import check, record_rules

VALID = 210  # 30 of each shape
SEED = 7


@pytest.fixture(scope="module")
def valid() -> list[Dialogue]:
    return valid_dialogues(VALID, seed=SEED)


@pytest.fixture(scope="module")
def corrupted(valid: list[Dialogue]) -> list[Corruption]:
    return [c for d in valid for c in corruptions(d, seed=SEED)]


def test_the_valid_corpus_is_varied(valid: list[Dialogue]) -> None:
    assert {d.id.rsplit("-", 1)[1] for d in valid} == set(SHAPES)
    calls = [sum(len(m.tool_calls or []) for m in d.messages) for d in valid]
    assert max(calls) == 5 and min(calls) == 0
    assert len({d.tools[0].name for d in valid}) > 30


def test_every_valid_dialogue_passes_every_rule(valid: list[Dialogue]) -> None:
    failing = {d.id: [(v.code, v.path, v.message) for v in check(d)] for d in valid}
    assert {k: v for k, v in failing.items() if v} == {}


def test_every_kind_of_fault_is_exercised(corrupted: list[Corruption]) -> None:
    counts = {name: sum(1 for c in corrupted if c.kind == name) for name in KINDS}
    assert min(counts.values()) >= 5, counts
    assert {code for code, _ in KINDS.values()} == set(record_rules())  # every rule of a record alone is measured


def test_recall_and_precision_are_total_per_rule(valid: list[Dialogue], corrupted: list[Corruption]) -> None:
    result = evaluate(valid, corrupted)
    assert result.misses == []
    assert [(i, k, v.code, v.path, v.message) for i, k, v in result.false_positives] == []
    for code, score in result.scores.items():
        assert score.tp > 0, code
        assert score.recall == 1.0 and score.precision == 1.0, (code, score)


def test_argument_faults_are_reported_at_the_exact_path(valid: list[Dialogue], corrupted: list[Corruption]) -> None:
    with_path = [c for c in corrupted if c.path is not None]
    assert len(with_path) > 1000
    assert evaluate([], with_path).wrong_paths == []


def test_documented_co_occurrences_are_the_only_other_codes(corrupted: list[Corruption]) -> None:
    for c in corrupted:
        others = {v.code for v in check(c.dialogue)} - {c.code}
        assert others <= CO_OCCURRENCES.get(c.kind, frozenset()), (c.dialogue.id, c.detail, others)


def test_each_rule_can_be_disabled(corrupted: list[Corruption]) -> None:
    seen: set[str] = set()
    for c in corrupted:
        if c.code in seen:
            continue
        seen.add(c.code)
        assert c.code not in {v.code for v in check(c.dialogue, frozenset({c.code}))}
    assert seen == set(record_rules())


def test_corruption_is_deterministic_and_leaves_the_original_alone(valid: list[Dialogue]) -> None:
    # (model_dump, not JSON: an injected lone surrogate cannot be encoded as UTF-8)
    original = valid[1].model_dump()
    first = [(c.kind, c.dialogue.model_dump()) for c in corruptions(valid[1], seed=3)]
    second = [(c.kind, c.dialogue.model_dump()) for c in corruptions(valid[1], seed=3)]
    assert first == second and valid[1].model_dump() == original
    assert [c.dialogue.model_dump() for c in corruptions(valid[1], seed=4)] != [j for _, j in first]


def test_an_inapplicable_fault_is_skipped_not_faked(valid: list[Dialogue]) -> None:
    non_tool = next(d for d in valid if d.mode == "non_tool")
    assert corrupt(non_tool, "unknown_function") is None
    assert corrupt(non_tool, "no_function_call") is None
    single = next(d for d in valid if sum(len(m.tool_calls or []) for m in d.messages) == 1)
    assert corrupt(single, "duplicate_call_id") is None
    no_finish = next(d for d in valid if "Finish" not in {f.name for f in d.tools})
    assert corrupt(no_finish, "search_not_finished") is None
    no_enum = next(d for d in valid if d.mode != "non_tool" and "enum" not in json.dumps([f.parameters for f in d.tools]))
    assert corrupt(no_enum, "enum_violation") is None


def test_a_corruption_unpacks_as_dialogue_and_code(valid: list[Dialogue]) -> None:
    made = corrupt(valid[0], "unknown_function", seed=1)
    assert made is not None
    corrupted, code = made.pair()
    assert code == "call_unknown_function" and corrupted.id.endswith("~unknown_function")
