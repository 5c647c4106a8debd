"""Turn-level loss masks per recipe: how many assistant turns of the dataset are masked, and why.

    python -m benchmarks.turn_masks [--recipes toolalpaca,toolllm,toolace] [--root PATH] [--out PATH]

For each recipe, the quickstart (``toolfactory run --config configs/quickstart.yaml``) with all of
its tool sets given to that recipe and ``dialogues.on_disagreement=mask`` (so that ToolACE's
disagreeing samples are kept as masked turns rather than dropped), each in a storage root of its
own (``--root``: under it, one folder per recipe, reused when it already holds a run; by default
a temporary folder). From the run:

* the curate stage's profile (``toolfactory stats --json``): assistant turns ``trained`` /
  ``masked`` and masked turns by reason, as the stage counted them;
* the dataset (``curate/`` shards) read back: records, records with a masked turn, the same
  counts recomputed from the messages (they must agree with the profile);
* the run's OpenAI export: assistant messages written with ``"weight": 0`` (must equal the
  masked turns of the records exported).

Writes ``benchmarks/results/turn_masks.json`` and prints a table. The simulator answers every
request, so the figures show the mechanism on simulated data, not the rates of a real model.
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

import pyarrow.parquet as pq

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json
from toolfactory.curation import turn_masks
from toolfactory.models import Dialogue

REPO = Path(__file__).resolve().parents[1]
RECIPES = ("toolalpaca", "toolllm", "toolace")
RUN_TIMEOUT_S = 1800


def run(root: Path, recipe: str) -> float | None:
    """Run the quickstart for `recipe` in `root` unless a run is already there; its wall time."""
    if list((root / "runs").glob("*/curate")):
        return None
    root.mkdir(parents=True, exist_ok=True)
    tf = str(Path(sys.executable).with_name("toolfactory"))
    started = time.perf_counter()
    done = subprocess.run([tf, "run", "--config", str(REPO / "configs" / "quickstart.yaml"),
                           "--set", f"storage.root={root}", "--set", f"tasks.recipes={{{recipe}: 1.0}}",
                           "--set", "dialogues.on_disagreement=mask"],
                          capture_output=True, text=True, cwd=root, timeout=RUN_TIMEOUT_S)
    if done.returncode not in (0, 1):
        sys.exit(f"the {recipe} run exited with {done.returncode}: {done.stderr[-2000:]}")
    return round(time.perf_counter() - started, 1)


def measure(root: Path) -> dict[str, Any]:
    folder = sorted((root / "runs").glob("*/curate"), key=lambda p: p.stat().st_mtime)[-1].parent
    records = [Dialogue.model_validate(json.loads(row["record"])) for part in sorted(folder.glob("curate/part-*.parquet"))
               for row in pq.read_table(part, columns=["record"]).to_pylist()]
    turns: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    with_mask = 0
    for record in records:
        found = turn_masks.counts(record)
        turns.update(found[turn_masks.TURNS])
        reasons.update(found[turn_masks.PROFILE])
        with_mask += bool(found[turn_masks.PROFILE])
    tf = str(Path(sys.executable).with_name("toolfactory"))
    stats = json.loads(subprocess.run([tf, "stats", folder.name, "--json", "--set", f"storage.root={root}"], check=True,
                                      capture_output=True, text=True, cwd=root).stdout)
    profile = next((s.get("profile") or {} for s in stats["stages"] if s["stage"] == "curate"), {})
    weights = Counter()
    for path in sorted((folder / "export" / "openai").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            for message in json.loads(line)["messages"]:
                if message["role"] == "assistant":
                    weights["weight_0" if message.get("weight") == 0 else "trained"] += 1
    return {"run_id": folder.name, "records": len(records), "records_with_masked_turn": with_mask,
            "assistant_turns": dict(turns), "masked_by_reason": dict(reasons.most_common()),
            "curate_profile": {k: profile.get(k, {}) for k in (turn_masks.TURNS, turn_masks.PROFILE)},
            "openai_export": dict(weights)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipes", default=",".join(RECIPES))
    parser.add_argument("--root", type=Path, default=None, help="one storage root per recipe under it (kept)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "turn_masks.json")
    args = parser.parse_args(argv)
    base = args.root or Path(tempfile.mkdtemp(prefix="turn-masks-"))
    results: dict[str, Any] = {}
    for recipe in args.recipes.split(","):
        seconds = run(base / recipe, recipe)
        results[recipe] = {"run_seconds": seconds, **measure(base / recipe)}
        print(f"{recipe}: {json.dumps(results[recipe])}", flush=True)
    rows = []
    for recipe, r in results.items():
        trained, masked = r["assistant_turns"].get("trained", 0), r["assistant_turns"].get("masked", 0)
        share = f"{100 * masked / (trained + masked):.1f}%" if trained + masked else "-"
        rows.append([recipe, r["records"], r["records_with_masked_turn"], trained + masked, masked, share,
                     ", ".join(f"{k} {v}" for k, v in r["masked_by_reason"].items()) or "-",
                     r["openai_export"].get("weight_0", 0)])
    print(table(["recipe", "records", "with a masked turn", "assistant turns", "masked", "share", "reasons", "openai weight 0"], rows))
    write_json(args.out, {"machine": machine_info(), "results": results})


if __name__ == "__main__":
    main()
