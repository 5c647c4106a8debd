"""Accuracy and throughput of the verify stage's rule layer.

    python -m benchmarks.verifier [--valid N] [--seed S] [--repeats R] [--no-pin] [--profile] [--out PATH]

1. Builds a labelled corpus: N valid dialogues from the seed catalog
   (:func:`benchmarks.corpus.valid_dialogues`) plus one single-fault corruption of
   each per applicable kind (:mod:`toolfactory.stages.verify.corruption`), and prints precision
   and recall per rule code (a documented co-occurrence is neither a hit nor a false positive).
2. Measures the rule layer's throughput in dialogues per second on one core (the process is
   pinned to one CPU unless ``--no-pin``) over the dialogues with at most five calls: every
   repetition runs ``check`` over all of them, timed with ``time.perf_counter``; the median of
   R repetitions is reported (first a cold pass with empty validator caches, reported apart).
   Also reported: the same including ``Dialogue.model_validate`` of the stored dict (what the
   stage does per record), and the rate per number of calls.

Writes ``benchmarks/results/verifier.json``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time
from collections import Counter
from typing import Any, Sequence

from benchmarks._common import RESULTS_DIR, machine_info, median, table, write_json
from toolfactory.models import Dialogue
from benchmarks.corpus import valid_dialogues
from benchmarks.rule_scores import evaluate
from toolfactory.stages.verify.corruption import KINDS, corruptions
from toolfactory.stages.verify.rules import RULES, check
from toolfactory.stages.verify.rules import function_facts

TARGET_PER_SECOND = 5000.0
MAX_CALLS = 5


def calls(dialogue: Dialogue) -> int:
    return sum(len(m.tool_calls or []) for m in dialogue.messages)


def pin_one_core() -> int | None:
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def rate(dialogues: Sequence[Dialogue], repeats: int) -> tuple[float, list[float]]:
    """Median dialogues/second of `check` over `dialogues`, and every repetition's rate."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for dialogue in dialogues:
            check(dialogue)
        rates.append(len(dialogues) / (time.perf_counter() - start))
    return median(rates), rates


def rate_with_parsing(records: Sequence[dict[str, Any]], repeats: int) -> float:
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for record in records:
            check(Dialogue.model_validate(record))
        rates.append(len(records) / (time.perf_counter() - start))
    return median(rates)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--valid", type=int, default=300, help="valid dialogues (each gets ~19 corruptions)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one pass")
    parser.add_argument("--out", default=str(RESULTS_DIR / "verifier.json"))
    args = parser.parse_args(argv)

    cpu = None if args.no_pin else pin_one_core()
    start = time.perf_counter()
    valid = valid_dialogues(args.valid, seed=args.seed)
    corrupted = [c for d in valid for c in corruptions(d, seed=args.seed)]
    build_s = time.perf_counter() - start
    kinds = Counter(c.kind for c in corrupted)
    print(f"corpus: {len(valid)} valid + {len(corrupted)} corrupted dialogues "
          f"({len(kinds)} of {len(KINDS)} fault kinds applied), built in {build_s:.1f} s")

    # -- accuracy ----------------------------------------------------------------------------
    result = evaluate(valid, corrupted)
    rows = []
    for code, score in result.scores.items():
        injected = sorted(k for k, (c, _) in KINDS.items() if c == code)
        rows.append([code, score.severity, score.tp + score.fn, score.tp, score.fp, score.fn, score.co_occurring,
                     score.precision, score.recall, ", ".join(injected)])
    print()
    print(table(["rule code", "severity", "faults", "TP", "FP", "FN", "co-occ", "precision", "recall", "fault kinds"], rows))
    if result.false_positives or result.misses or result.wrong_paths:
        print(f"\nfalse positives: {len(result.false_positives)}, misses: {len(result.misses)}, wrong paths: {len(result.wrong_paths)}")
        for dialogue_id, kind, verdict in result.false_positives[:10]:
            print(f"  FP {dialogue_id} ({kind}): {verdict.code} at {verdict.path}: {verdict.message}")
        for dialogue_id, code in result.misses[:10]:
            print(f"  FN {dialogue_id}: expected {code}")

    # -- throughput --------------------------------------------------------------------------
    workload = [d for d in [*valid, *(c.dialogue for c in corrupted)] if calls(d) <= MAX_CALLS]
    valid_workload = [d for d in valid if calls(d) <= MAX_CALLS]
    function_facts.clear()
    start = time.perf_counter()
    for dialogue in workload:
        check(dialogue)
    cold = len(workload) / (time.perf_counter() - start)
    all_rate, all_rates = rate(workload, args.repeats)
    valid_rate, _ = rate(valid_workload, args.repeats)
    records = [d.model_dump() for d in valid_workload if d.messages]
    parsed_rate = rate_with_parsing(records, max(3, args.repeats // 2))
    by_calls = []
    for n in range(MAX_CALLS + 1):
        group = [d for d in workload if calls(d) == n]
        if group:
            by_calls.append([n, len(group), rate(group, 3)[0]])
    verdict = "meets" if all_rate >= TARGET_PER_SECOND else "MISSES"
    print()
    print(f"throughput on {'CPU ' + str(cpu) if cpu is not None else 'an unpinned process'} "
          f"({len(workload)} dialogues with <= {MAX_CALLS} calls, {len(RULES)} rules, median of {args.repeats}):")
    print(table(["workload", "dialogues", "dialogues/s"], [
        ["labelled corpus (valid + corrupted)", len(workload), all_rate],
        ["valid only", len(valid_workload), valid_rate],
        ["valid, incl. Dialogue.model_validate", len(records), parsed_rate],
        ["first pass, cold validator cache", len(workload), cold],
    ]))
    print()
    print(table(["calls", "dialogues", "dialogues/s"], by_calls))
    print(f"\ntarget >= {TARGET_PER_SECOND:.0f} dialogues/s: {verdict} ({all_rate:.0f}/s, "
          f"{1e6 / all_rate:.0f} us per dialogue; repetitions {min(all_rates):.0f}..{max(all_rates):.0f}/s)")

    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for dialogue in workload:
            check(dialogue)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(20)
        print(out.getvalue())

    data = {
        "benchmark": "verifier",
        "machine": machine_info(),
        "params": {"valid": args.valid, "seed": args.seed, "repeats": args.repeats, "pinned_cpu": cpu, "max_calls": MAX_CALLS},
        "corpus": {"valid": len(valid), "corrupted": len(corrupted), "kinds": dict(sorted(kinds.items())), "build_s": round(build_s, 2)},
        "accuracy": {
            code: {"severity": s.severity, "tp": s.tp, "fp": s.fp, "fn": s.fn, "co_occurring": s.co_occurring,
                   "precision": None if s.tp + s.fp == 0 else round(s.precision, 4),
                   "recall": None if s.tp + s.fn == 0 else round(s.recall, 4)}
            for code, s in result.scores.items()
        },
        "false_positives": len(result.false_positives),
        "misses": len(result.misses),
        "wrong_paths": len(result.wrong_paths),
        "throughput": {
            "target_per_s": TARGET_PER_SECOND,
            "meets_target": all_rate >= TARGET_PER_SECOND,
            "corpus_per_s": round(all_rate, 1),
            "corpus_repetitions_per_s": [round(r, 1) for r in all_rates],
            "valid_per_s": round(valid_rate, 1),
            "valid_with_model_validate_per_s": round(parsed_rate, 1),
            "cold_first_pass_per_s": round(cold, 1),
            "by_calls": {str(n): round(r, 1) for n, _, r in by_calls},
            "dialogues": len(workload),
        },
    }
    path = write_json(args.out, data)
    print(f"wrote {path}")
    return data


if __name__ == "__main__":
    main()
