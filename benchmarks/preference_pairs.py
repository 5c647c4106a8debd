"""Preference pairs per accepted dialogue, per recipe, and why the rejected sides were rejected.

    python -m benchmarks.preference_pairs [--recipes toolalpaca,toolllm,toolace] [--out PATH] [--set section.field=value …]

For each recipe, the quickstart (``toolfactory run`` with its embedded defaults: the offline
simulator, its content faults and behaviours) runs with that recipe alone into a fresh storage
root; then the run is exported as ``trl_preference`` and ``llamafactory_ranking``, once with real
attempts only and once with ``export.preference.synthesize`` on. Reported per recipe and format:
accepted dialogues, dialogues with at least one pair, pairs per accepted dialogue, pairs by source
(``rejected_record``, ``search_branch``, ``outvoted_sample``, ``corruption``) and by reason code.
The simulator's answers are not a real model's: the figures say how often each source yields a
pair under its faults, not how often a real model's attempts would.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json

FORMATS = ("trl_preference", "llamafactory_ranking")


def _run(root: Path, recipe: str, extra: list[str]) -> str:
    command = [sys.executable, "-m", "toolfactory.cli", "run", "--set", f"storage.root={root}",
               "--set", f"stats.path={root / 'stats.duckdb'}", "--set", f"tasks.recipes={{{recipe}: 1}}",
               "--set", "export.formats=[]"]
    for item in extra:
        command += ["--set", item]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"the {recipe} run failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    return sorted(p.name for p in (root / "runs").iterdir())[-1]


def _figures(root: Path, run_id: str, fmt: str, synthesize: bool, out: Path) -> dict[str, Any]:
    from toolfactory.config.export import PreferenceConfig
    from toolfactory.export import ExportOptions, export_run
    from toolfactory.storage import ObjectStore
    from toolfactory.config.storage import StorageConfig

    store = ObjectStore.open(StorageConfig(root=str(root)))
    summary = export_run(store, run_id, fmt, out, options=ExportOptions(preference=PreferenceConfig(synthesize=synthesize)))
    rows = [json.loads(line) for split in ("train", "validation", "test") for line in (out / f"{split}.jsonl").read_text().splitlines()]
    sources = Counter(row["pair_source"] for row in rows)
    reasons = Counter(reason for row in rows for reason in row["rejected_reasons"])
    accepted = summary["records"]
    return {"accepted": accepted, "with_pairs": summary["exported"], "pairs": len(rows),
            "pairs_per_accepted": round(len(rows) / accepted, 3) if accepted else 0.0,
            "synthesized": sum(row["synthesized"] for row in rows), "sources": dict(sources),
            "reasons": dict(reasons.most_common()), "skipped": summary["skipped"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", default="toolalpaca,toolllm,toolace")
    parser.add_argument("--out", default=str(RESULTS_DIR / "preference_pairs.json"))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE")
    args = parser.parse_args()
    results: dict[str, Any] = {"machine": machine_info(), "overrides": args.overrides, "recipes": {}}
    rows = []
    with tempfile.TemporaryDirectory(prefix="preference-pairs-") as tmp:
        for recipe in args.recipes.split(","):
            root = Path(tmp) / recipe
            started = time.perf_counter()
            run_id = _run(root, recipe, args.overrides)
            by_format: dict[str, Any] = {"run_seconds": round(time.perf_counter() - started, 1)}
            for fmt in FORMATS:
                for synthesize in (False, True):
                    label = f"{fmt}{'+synthesized' if synthesize else ''}"
                    figures = _figures(root, run_id, fmt, synthesize, Path(tmp) / "out" / recipe / label)
                    by_format[label] = figures
                    rows.append((recipe, label, figures["accepted"], figures["with_pairs"], figures["pairs"],
                                 figures["pairs_per_accepted"], figures["synthesized"],
                                 ", ".join(f"{k} {v}" for k, v in figures["sources"].items()) or "-"))
            results["recipes"][recipe] = by_format
    print(table(("recipe", "export", "accepted", "with pairs", "pairs", "pairs/accepted", "synthesized", "sources"), rows))
    for recipe, by_format in results["recipes"].items():
        for label, figures in by_format.items():
            if isinstance(figures, dict) and figures["reasons"]:
                print(f"{recipe} {label} reasons: " + ", ".join(f"{k} {v}" for k, v in figures["reasons"].items()))
    print(f"written: {write_json(args.out, results)}")


if __name__ == "__main__":
    main()
