"""Self-consistency with and without early stopping, side by side (ToolACE §2.2.2).

    python -m benchmarks.self_consistency [--tools 12] [--samples 3] [--latency-ms 20] [--obedience 0.9]
                                          [--set section.field=value …]

The toolace tasks of the first `--tools` catalog tools are made once; their dialogues are then
made twice through the real gateway against the simulator (cache off, the quickstart's faults and
behaviours, and `--obedience`: how often the simulator follows a mode the prompt states):
sampling every one of `--samples` decisions, and stopping as soon as the vote is
decided. Reported for each: dialogues kept by the dialogues stage and by the verify stage's rule
layer, decisions sampled, LLM calls of the stage, calls per kept dialogue, wall time; and the
share of tasks whose outcome (kept or dropped, and the messages when kept) is the same in both.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from flows.runtime import llm_endpoint
from toolfactory.catalog import load_seed_catalog
from toolfactory.config import Config, load_config
from toolfactory.llm import Endpoint, LLMGateway, resolve_endpoint
from toolfactory.models import Dialogue, Task
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.dialogues.stage import DialoguesStage
from toolfactory.stages.tasks.stage import TasksStage
from toolfactory.stages.verify.rules import check, errors


async def run(config: Config, endpoint: Endpoint, tasks: list[Task] | None, tools: list[dict[str, Any]]) -> tuple[list[Task], StageOutput, dict[str, Any]]:
    async with LLMGateway(endpoint, config.llm) as gateway:
        ctx = ShardContext(config=config, run_id="bench-sc", gateway=gateway)
        if tasks is None:
            made = await TasksStage().run(ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), tools, ctx)
            tasks = [t for t in made.records if isinstance(t, Task)]
        before = gateway.meter.totals()["calls"]
        started = time.perf_counter()
        out = await DialoguesStage().run(ShardSpec("dialogues", 0, ()), [t.model_dump() for t in tasks], ctx)
        wall = time.perf_counter() - started
        calls = gateway.meter.totals()["calls"] - before
    dialogues = [d for d in out.records if isinstance(d, Dialogue)]
    kept = [d for d in dialogues if not errors(check(d))]
    return tasks, out, {
        "tasks": len(tasks),
        "dialogues": len(dialogues),
        "kept_by_rules": len(kept),
        "inconsistent": out.rejections().get("dialogue_inconsistent_decision", 0),
        "decisions_sampled": sum(d.generation.get("decision_samples", 0) for d in dialogues),
        "decisions_planned": sum(d.generation.get("decision_samples_planned", 0) for d in dialogues),
        "llm_calls": calls,
        "calls_per_kept": round(calls / len(kept), 2) if kept else None,
        "wall_s": round(wall, 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.self_consistency", description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=12)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--obedience", type=float, default=0.9)
    parser.add_argument("--out", default="benchmarks/results/self_consistency.json")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="toolfactory-bench-sc-")
    common = [f"storage.root={root}", "llm.cache=false", f"llm.simulator.latency_ms={args.latency_ms}",
              "llm.simulator.latency_jitter_ms=0", f"llm.simulator.obedience={args.obedience}", "tasks.recipes={toolace: 1}", f"dialogues.self_consistency={args.samples}",
              *args.overrides]
    tools = [t.model_dump() for t in load_seed_catalog()[: args.tools]]
    results: dict[str, dict[str, Any]] = {}
    outputs: dict[str, StageOutput] = {}
    tasks: list[Task] | None = None
    for name, early in (("every sample", False), ("early stop", True)):
        config = load_config(None, [*common, f"dialogues.self_consistency_early_stop={str(early).lower()}"])
        with llm_endpoint(config) as base_url:
            tasks, outputs[name], results[name] = asyncio.run(run(config, resolve_endpoint(config.llm, base_url), tasks, tools))
    full = {r.id: r for r in outputs["every sample"].records}
    full_drop = {r.id for r in outputs["every sample"].rejected}
    same = 0
    for record in outputs["early stop"].records:
        other = full.get(record.id)
        same += isinstance(record, Dialogue) and isinstance(other, Dialogue) and record.messages == other.messages
    same += sum(r.id in full_drop for r in outputs["early stop"].rejected)
    agreement = round(same / len(tasks), 4) if tasks else None
    report = {"benchmark": "self_consistency", "samples": args.samples, "latency_ms": args.latency_ms, "runs": results,
              "same_outcome_share": agreement}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"{'':<13} {'tasks':>6} {'dlgs':>5} {'kept':>5} {'inconsistent':>12} {'sampled/planned':>16} {'calls':>7} "
          f"{'calls/kept':>10} {'wall s':>7}")
    for name, r in results.items():
        print(f"{name:<13} {r['tasks']:>6} {r['dialogues']:>5} {r['kept_by_rules']:>5} {r['inconsistent']:>12} "
              f"{str(r['decisions_sampled']) + '/' + str(r['decisions_planned']):>16} {r['llm_calls']:>7} "
              f"{str(r['calls_per_kept']):>10} {r['wall_s']:>7}")
    saved = results["every sample"]["llm_calls"] - results["early stop"]["llm_calls"]
    print(f"calls saved: {saved} ({saved / max(results['every sample']['llm_calls'], 1):.0%}); "
          f"same outcome for {agreement:.1%} of the tasks" if agreement is not None else "no tasks")
    print(f"results written to {args.out}")


if __name__ == "__main__":
    main()
