"""The judges measured against execution: the referee's figures per recipe and judge quality, and
the judge requests that execution saves.

    python -m benchmarks.referee [--recipes toolalpaca,toolllm,toolace] [--scrutiny 0,0.9] [--instructions 8]
                                 [--judge-call combined|per_aspect] [--out PATH]

Each run has one recipe and executable sources only (BFCL's file system, a Python environment, and
`mcp-server-time` over stdio), so most of its dialogues really ran and the verify stage refers a
sample of them, with a labelled corruption of each accepted one, to the judges
(:mod:`toolfactory.stages.verify.referee`). The simulator is the judge; `llm.simulator.judge_scrutiny`
is the chance that a verdict follows a careful reading of the dialogue instead of a draw, so the
two levels are a poor and a better judge: the agreement the referee measures should move with it.
`verify.referee_share` is 1 by default here (every executed dialogue refereed) for larger counts.

Each configuration runs twice: with `verify.execution_answers` at its default (the aspects
execution answers are not voted on where it decided) and with it empty (every aspect voted), to
give the judge requests per accepted dialogue with and without the skipped aspects. A dialogue
the referee draws is asked every aspect, so that comparison is made with the referee off
(`--referee-share 0 --referee-min 0`).

Writes ``benchmarks/results/referee.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json
from benchmarks.executable_runs import overrides, prefect_and_ray, run, source_entry
from toolfactory.stages import DATASET_STAGE
from toolfactory.stages.base import CALLS_BY_RECIPE
from toolfactory.stages.verify.referee import ALL, REFEREE, by_origin, figures

RECIPES = ("toolalpaca", "toolllm", "toolace")


def referee_figures(summary: dict[str, Any]) -> dict[str, Any]:
    stages = {s["stage"]: s for s in summary.get("stages", [])}
    verify = stages.get("verify", {})
    counts = verify.get("profile", {}).get(REFEREE, {})
    rows = [f.to_dict() for f in figures(counts)]
    accepted = int(stages.get(DATASET_STAGE, {}).get("items_out") or 0)
    judge_requests = sum(verify.get("profile", {}).get(CALLS_BY_RECIPE, {}).values())
    judge = (summary.get("cost_by_role") or {}).get("judge") or {}
    return {
        "status": summary.get("status"),
        "accepted": accepted,
        "verify_in": verify.get("items_in"),
        "replayed": verify.get("profile", {}).get("execution_replayed", {}).get("dialogues", 0),
        "refereed": by_origin(counts),
        "overall": next((r for r in rows if r["aspect"] == ALL), None),
        "aspects": [r for r in rows if r["aspect"] != ALL],
        "judge_requests_deciding": judge_requests,
        "judge_requests_per_accepted": round(judge_requests / accepted, 3) if accepted else None,
        # Every judge request of the run (the referee's included), in tokens per accepted dialogue.
        "judge_tokens_per_accepted": round((judge.get("prompt_tokens", 0) + judge.get("completion_tokens", 0)) / accepted)
        if accepted else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.referee", description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", default=",".join(RECIPES))
    parser.add_argument("--scrutiny", default="0,0.9", help="llm.simulator.judge_scrutiny levels, comma-separated")
    parser.add_argument("--instructions", type=int, default=8, help="tasks.instructions_per_tool of every run")
    parser.add_argument("--judge-call", default="combined", choices=("combined", "per_aspect"), help="verify.judge_call")
    parser.add_argument("--referee-share", type=float, default=1.0,
                        help="verify.referee_share (1: every executed dialogue; 0 with --referee-min 0: no referee, "
                             "for the judge requests with and without the skipped aspects alone)")
    parser.add_argument("--referee-min", type=int, default=3, help="verify.referee_min")
    parser.add_argument("--out", default=str(RESULTS_DIR / "referee.json"))
    args = parser.parse_args(argv)
    recipes = [r for r in args.recipes.split(",") if r]
    levels = [float(x) for x in args.scrutiny.split(",") if x]
    os.environ.setdefault("OPENAI_API_KEY", "sk-simulator")
    tools: dict[str, list[dict[str, Any]]] = {}
    for name in ("files", "time"):
        field, entry = source_entry(name, None)
        tools.setdefault(field, []).append(entry)
    rows: list[dict[str, Any]] = []
    data: dict[str, Any] = {"load_before": [round(x, 2) for x in os.getloadavg()], "instructions_per_tool": args.instructions,
                            "sources": ["files (BFCL GorillaFileSystem)", "time (mcp-server-time)"], "runs": rows}
    with tempfile.TemporaryDirectory(prefix="tf-referee-") as tmp, prefect_and_ray():
        for recipe in recipes:
            for level in levels:
                for answers in ("default", "none"):
                    root = Path(tmp) / f"{recipe}-{level}-{answers}"
                    argv_run = overrides(root, args.instructions, tools) + [
                        f'tasks.recipes={{"{recipe}": 1.0}}', f"llm.simulator.judge_scrutiny={level}",
                        f"verify.referee_share={args.referee_share}", f"verify.referee_min={args.referee_min}",
                        "run.min_accepted=0", f"verify.judge_call={args.judge_call}",
                        *(["verify.execution_answers=[]"] if answers == "none" else [])]
                    began = time.perf_counter()
                    summary = run(argv_run)
                    row = {"recipe": recipe, "judge_call": args.judge_call, "judge_scrutiny": level, "execution_answers": answers,
                           "wall_s": round(time.perf_counter() - began, 1), **referee_figures(summary)}
                    rows.append(row)
                    print(f"{recipe} scrutiny={level} execution_answers={answers}: {row['status']}, "
                          f"agreement {(row['overall'] or {}).get('agreement')}", flush=True)
                    write_json(args.out, {**data, "machine": machine_info()})
    keys = ["recipe", "judge_scrutiny", "execution_answers", "accepted", "replayed", "records", "agreement",
            "false_accepts", "false_rejects", "judge_requests_per_accepted", "judge_tokens_per_accepted"]
    print(table(keys, [[row.get(k, (row["overall"] or {}).get(k)) for k in keys] for row in rows]))
    data["machine"] = machine_info()
    print(f"wrote {write_json(args.out, data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
