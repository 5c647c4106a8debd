"""LLM calls per accepted dialogue: where they go, and what each saving costs in decisions.

    python -m benchmarks.calls [--instructions-per-tool 10] [--tools 36] [--set section.field=value …]

The tasks, dialogues and verify stages run in one process on the seed catalog's tools, through
the real gateway against the simulator at 0 ms (the quickstart's content faults and behaviours),
on the same tasks for every variant, side by side:

* ``full``: every judge vote cast, dialogues generated to the end (the factory before);
* ``votes``: judge votes stop once each majority is decided (``verify.judge_stop: decided``);
* ``early``: and dialogues stop at the turn the rule layer is certain to reject
  (``dialogues.reject_early``);
* ``combined``: and one structured judge request per vote answers every aspect
  (``verify.judge_call: combined``).

For each: requests (endpoint or cache: the variants share one answer cache, so a request made
before costs the run nothing here but is still counted) per stage, per accepted dialogue, per
recipe; where the generating requests went (records accepted, dropped in the dialogues stage,
rejected by the rules, by the judges), and how many tasks end with the same decision as in
``full`` (accepted or not), and how the accepted sets overlap. Accepted = passed verify (the curate
stage's deduplication is left out: it spends no chat request).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from typing import Any

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json
from flows.runtime import llm_endpoint
from toolfactory.catalog import load_seed_catalog
from toolfactory.config import Config, load_config
from toolfactory.llm import Endpoint, LLMGateway, RequestCache, resolve_endpoint
from toolfactory.models import Dialogue, Task
from toolfactory.stages import ShardContext, ShardSpec
from toolfactory.stages.dialogues.stage import DialoguesStage
from toolfactory.stages.tasks.stage import TasksStage
from toolfactory.stages.verify.judges import first_wave, judge_requests
from toolfactory.stages.verify.stage import VerifyStage
from toolfactory.storage import ObjectStore

VARIANTS: dict[str, list[str]] = {
    "full": ["verify.judge_stop=all", "dialogues.reject_early=false"],
    "votes": ["verify.judge_stop=decided", "dialogues.reject_early=false"],
    "early": ["verify.judge_stop=decided", "dialogues.reject_early=true"],
    "combined": ["verify.judge_stop=decided", "dialogues.reject_early=true", "verify.judge_call=combined"],
}


def _requests(gateway: LLMGateway) -> int:
    totals = gateway.meter.totals()
    return int(totals["calls"] + totals["cache_hits"])


async def make_tasks(config: Config, endpoint: Endpoint, cache: RequestCache, tools: list[dict[str, Any]]) -> tuple[list[Task], int]:
    async with LLMGateway(endpoint, config.llm, cache) as gateway:
        ctx = ShardContext(config=config, run_id="bench-calls", gateway=gateway)
        out = await TasksStage().run(ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), tools, ctx)
        return [t for t in out.records if isinstance(t, Task)], _requests(gateway)


async def variant(config: Config, endpoint: Endpoint, cache: RequestCache, tasks: list[Task]) -> dict[str, Any]:
    async with LLMGateway(endpoint, config.llm, cache) as gateway:
        ctx = ShardContext(config=config, run_id="bench-calls", gateway=gateway)
        started = time.perf_counter()
        made = await DialoguesStage().run(ShardSpec("dialogues", 0, ()), [t.model_dump() for t in tasks], ctx)
        generating = _requests(gateway)
        dialogues = [d for d in made.records if isinstance(d, Dialogue)]
        checked = await VerifyStage().run(ShardSpec("verify", 0, ()), [d.model_dump() for d in dialogues], ctx)
        judging = _requests(gateway) - generating
        wall = time.perf_counter() - started
    task_of = {d.id: d.task_id for d in dialogues}
    accepted = {task_of[r.id] for r in checked.records}
    # where the generating requests went: per task, its dialogue's llm_calls and its outcome
    spent = {d.task_id: d.llm_calls for d in dialogues}
    outcome: dict[str, str] = {}
    for r in made.rejected:
        task = r.record.get("task") or {}
        spent[str(task.get("id"))] = int(r.record.get("llm_calls") or 0)
        outcome[str(task.get("id"))] = "dropped in dialogues"
    judged_requests = Counter[str]()
    opening = first_wave(config.verify.judge_votes) if config.llm.multiple_choices else 1
    for r in checked.rejected:
        d = Dialogue.model_validate(r.record)
        by_judge = any(code.startswith("judge_") for code in r.reasons)
        outcome[d.task_id] = "rejected by judges" if by_judge else "rejected by rules"
        judged_requests[outcome[d.task_id]] += judge_requests(d.judgements, config.verify.judge_call, opening)
    for r in checked.records:
        assert isinstance(r, Dialogue)
        outcome[r.task_id] = "accepted"
        judged_requests["accepted"] += judge_requests(r.judgements, config.verify.judge_call, opening)
    where: Counter[str] = Counter()
    for task_id, n in spent.items():
        where[outcome.get(task_id, "dropped in dialogues")] += n
    recipes = {t.id: t.recipe for t in tasks}
    by_recipe: dict[str, dict[str, Any]] = {}
    for recipe in sorted(set(recipes.values())):
        kept = sum(recipes[t] == recipe for t in accepted)
        used = sum(n for t, n in spent.items() if recipes.get(t) == recipe)
        used += checked.profile.get("llm_calls", Counter()).get(recipe, 0)
        by_recipe[recipe] = {"accepted": kept, "requests": used, "per_accepted": round(used / kept, 1) if kept else None}
    reasons = Counter(made.rejections())
    reasons.update(checked.rejections())
    return {
        "accepted": sorted(accepted),
        "generating": generating,
        "judging": judging,
        "wall_s": round(wall, 1),
        "generating_by_outcome": dict(where),
        "judging_by_outcome": dict(judged_requests),
        "by_recipe": by_recipe,
        "top_rejections": dict(reasons.most_common(8)),
        "dropped_in_dialogues": len(made.rejected),
        "dialogues": len(dialogues),
    }


def same_decisions(tasks: list[Task], a: set[str], b: set[str]) -> float:
    return sum((t.id in a) == (t.id in b) for t in tasks) / len(tasks) if tasks else 1.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calls", description=__doc__.splitlines()[0])
    parser.add_argument("--instructions-per-tool", type=int, default=10)
    parser.add_argument("--tools", type=int, default=36, help="seed catalog tools the tasks anchor on")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", default=str(RESULTS_DIR / "calls.json"))
    parser.add_argument("--config", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="toolfactory-bench-calls-")
    common = [f"storage.root={root}", "llm.simulator.latency_ms=0", "llm.simulator.latency_jitter_ms=0",
              f"tasks.instructions_per_tool={args.instructions_per_tool}", *args.overrides]
    tools = [t.model_dump() for t in load_seed_catalog()[: args.tools]]
    base = load_config(args.config, common)
    results: dict[str, Any] = {}
    with llm_endpoint(base) as base_url:
        endpoint = resolve_endpoint(base.llm, base_url)
        cache = RequestCache(ObjectStore.open(base.storage))
        tasks, task_requests = asyncio.run(make_tasks(base, endpoint, cache, tools))
        for name in args.variants.split(","):
            config = load_config(args.config, [*common, *VARIANTS[name]])
            results[name] = asyncio.run(variant(config, endpoint, cache, tasks))
            print(f"{name}: done in {results[name]['wall_s']} s", flush=True)
    reference = set(results[next(iter(results))]["accepted"])
    rows = []
    for name, r in results.items():
        accepted = set(r["accepted"])
        total = task_requests + r["generating"] + r["judging"]
        r["requests_per_accepted"] = round(total / len(accepted), 2) if accepted else None
        r["same_decisions"] = round(same_decisions(tasks, reference, accepted), 4)
        r["accepted_overlap"] = round(len(accepted & reference) / len(accepted | reference), 4) if accepted | reference else 1.0
        rows.append((name, len(accepted), task_requests, r["generating"], r["judging"], r["requests_per_accepted"],
                     f"{r['same_decisions']:.2%}", f"{r['accepted_overlap']:.2%}",
                     ", ".join(f"{k} {v['per_accepted']}" for k, v in r["by_recipe"].items())))
    print(f"{len(tasks)} tasks on {args.tools} catalog tools, simulator at 0 ms; requests = endpoint calls + cache hits")
    print(table(("variant", "accepted", "tasks", "generating", "judging", "per accepted", "same decisions",
                 "accepted overlap", "per accepted by recipe (dialogues+verify)"), rows))
    for name, r in results.items():
        print(f"{name}: generating by outcome {r['generating_by_outcome']}; judging by outcome {r['judging_by_outcome']}")
        print(f"{' ' * len(name)}  top rejections {r['top_rejections']}")
    write_json(args.out, {"benchmark": "calls", "machine": machine_info(), "tasks": len(tasks),
                          "task_requests": task_requests, "instructions_per_tool": args.instructions_per_tool,
                          "variants": {k: {**v, "accepted": len(v["accepted"])} for k, v in results.items()}})
    print(f"results written to {args.out}")


if __name__ == "__main__":
    main()
