"""Precision and recall of the rule layer, per code, on a labelled corpus: valid dialogues
(:mod:`benchmarks.corpus`) plus their corruptions (:mod:`toolfactory.stages.verify.corruption`,
one injected fault each, naming the code expected to catch it).

``CO_OCCURRENCES`` lists, per kind of fault, the other codes that legitimately fire with it.
Used by ``python -m benchmarks.verifier`` and the corpus tests; no stage of a run scores rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from toolfactory.models import Dialogue, Verdict
from toolfactory.stages.verify.corruption import Corruption
from toolfactory.stages.verify.rules import check, record_rules

# Other codes that legitimately fire with a kind of fault (so they are not false positives).
CO_OCCURRENCES: dict[str, frozenset[str]] = {
    # A ToolLLM path stripped of every call has lost its Finish call too.
    "no_function_call": frozenset({"filter_search_not_finished"}),
    # A changed or added argument value is one nobody gave.
    **{name: frozenset({"arg_value_ungrounded", "arg_text_ungrounded"}) for name in (
        "wrong_type", "bool_as_number", "enum_violation", "pattern_violation", "format_violation", "out_of_range",
        "duplicate_item", "nested_wrong_type", "nested_out_of_range", "unknown_argument", "duplicate_argument")},
    # A blanked message may be the one that gave the values.
    "missing_field": frozenset({"arg_value_ungrounded", "arg_text_ungrounded"}),
}


@dataclass
class CodeScore:
    code: str
    severity: str
    tp: int = 0
    fp: int = 0
    fn: int = 0
    co_occurring: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else float("nan")


@dataclass
class Evaluation:
    scores: dict[str, CodeScore]
    valid: int
    corrupted: int
    by_kind: dict[str, int] = field(default_factory=dict)
    false_positives: list[tuple[str, str, Verdict]] = field(default_factory=list)  # (dialogue id, kind or "valid", verdict)
    misses: list[tuple[str, str]] = field(default_factory=list)  # (dialogue id, expected code)
    wrong_paths: list[tuple[str, str, list[str]]] = field(default_factory=list)  # (dialogue id, expected path, paths)


def evaluate(valid: Sequence[Dialogue], corrupted: Sequence[Corruption]) -> Evaluation:
    """Precision and recall per rule code on `valid` (no code expected) plus `corrupted`.

    A verdict is a true positive when its code is the corruption's expected code, a false
    positive when its code is neither expected nor a documented co-occurrence of that kind of
    fault. Warnings count like errors here.
    """
    scores = {code: CodeScore(code, registered.severity) for code, registered in record_rules().items()}
    result = Evaluation(scores, len(valid), len(corrupted))
    samples: list[tuple[Dialogue, str | None, str, str | None]] = [(d, None, "valid", None) for d in valid]
    samples += [(c.dialogue, c.code, c.kind, c.path) for c in corrupted]
    for dialogue, expected, kind_name, path in samples:
        verdicts = check(dialogue)
        fired = {v.code for v in verdicts}
        allowed = CO_OCCURRENCES.get(kind_name, frozenset())
        if expected is not None:
            result.by_kind[kind_name] = result.by_kind.get(kind_name, 0) + 1
            if expected in fired:
                scores[expected].tp += 1
                paths = [v.path for v in verdicts if v.code == expected]
                if path is not None and path not in paths:
                    result.wrong_paths.append((dialogue.id, path, paths))
            else:
                scores[expected].fn += 1
                result.misses.append((dialogue.id, expected))
        for code in fired - {expected}:
            if code in allowed:
                scores[code].co_occurring += 1
            else:
                scores[code].fp += 1
                result.false_positives.extend((dialogue.id, kind_name, v) for v in verdicts if v.code == code)
    return result


__all__ = ["CO_OCCURRENCES", "CodeScore", "Evaluation", "evaluate"]
