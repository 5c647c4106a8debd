"""Dialogue generation by recipe, and DFSDT against ReAct@N (ToolLLM §2.3).

    python -m benchmarks.recipes [--tools 12] [--seeds 1] [--latency-ms 50] [--react-n 3] [--obedience 0.9]
                                 [--profiles openai,vllm-hermes,…] [--set section.field=value …]

Part 1, per provider profile and recipe: the tasks and dialogues stages run on the first
`--tools` catalog tools, through the real gateway against the simulator in that profile (its
response shapes, with the client settings the profile needs: `simulator.profiles.CLIENT_SETTINGS`)
at a fixed latency (jitter 0, the quickstart's content faults and behaviours, and `--obedience`:
how often the simulator follows a mode the prompt states). Reported: dialogues per second of
the dialogues stage, the share of tasks kept, LLM calls and tokens per kept dialogue over both
stages (kept = passing the verify stage's rule layer; judges are not run), and why the others
were dropped. The recipes run side by side in one process, so the ratios between them hold on a
noisy machine even when the absolute rates do not. With `--obedience 0.9` the toolace recipe's
multi-mode steering is exercised: it should keep at least half of its tasks. `--seeds N` repeats
part 1 with run and simulator seeds 1..N and reports the pooled counts: a share of 16 tasks moves
by 0.1 with one record, so the toolace figure is read over N × 2 × `--tools` tasks.

Part 2, solution search: the same toolllm instructions are solved by DFSDT (`--children` tries per
node) and by ReAct@N (up to N independent ReAct chains, each with new samples, until one gives
an answer). The simulator gives up on a fraction of branches (it picks Finish's `return_type` at
random), so both have failures to recover from. Reported: solved instructions and LLM calls per
solved instruction.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from toolfactory.catalog import load_seed_catalog
from flows.runtime import llm_endpoint
from toolfactory.config import Config, load_config
from toolfactory.llm import Endpoint, LLMGateway, resolve_endpoint
from toolfactory.models import Dialogue, Function, Task, ToolCall
from toolfactory.simulator.profiles import CLIENT_SETTINGS, client_overrides
from toolfactory.stages import ShardContext, ShardSpec
from toolfactory.stages.dialogues.agents import execute
from toolfactory.stages.dialogues.search import opening_messages, solve
from toolfactory.stages.dialogues.stage import DialoguesStage
from toolfactory.stages.tasks.stage import TasksStage
from toolfactory.stages.verify.rules import check, errors

RECIPES = ("toolalpaca", "toolllm", "toolace")


async def by_recipe(base: Config, endpoint: Endpoint, recipe: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    config = base.model_copy(update={"tasks": base.tasks.model_copy(update={"recipes": {recipe: 1.0}})})
    async with LLMGateway(endpoint, config.llm) as gateway:
        ctx = ShardContext(config=config, run_id=f"bench-{recipe}", gateway=gateway)
        tasks = await TasksStage().run(ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), tools, ctx)
        calls_before = gateway.meter.totals()["calls"]
        started = time.perf_counter()
        dialogues = await DialoguesStage().run(ShardSpec("dialogues", 0, ()), [t.model_dump() for t in tasks.records], ctx)
        wall = time.perf_counter() - started
        totals = gateway.meter.totals()
        dialogue_calls = totals["calls"] - calls_before
    kept = [d for d in dialogues.records if isinstance(d, Dialogue) and not errors(check(d))]
    dropped: Counter[str] = Counter(dialogues.rejections())
    for d in dialogues.records:
        if isinstance(d, Dialogue):
            dropped.update(v.code for v in errors(check(d)))
    return {
        "recipe": recipe,
        "tasks": len(tasks.records),
        "dialogues": len(dialogues.records),
        "kept": len(kept),
        "dialogue_stage_calls": dialogue_calls,
        "calls": totals["calls"],
        "tokens": totals["prompt_tokens"] + totals["completion_tokens"],
        "llm_failures": Counter(sum((Counter(u.failures) for u in gateway.meter.by_role.values()), Counter())),
        "wall_s": wall,
        "drops": dropped,
        "modes": Counter(d.mode for d in kept),
    }


COUNTS = ("tasks", "dialogues", "kept", "dialogue_stage_calls", "calls", "tokens", "wall_s")
TALLIES = ("llm_failures", "drops", "modes")


def pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One recipe's runs (one per seed) as one row: counts summed, ratios of the sums."""
    total: dict[str, Any] = {key: sum(run[key] for run in runs) for key in COUNTS}
    tallies = {key: sum((run[key] for run in runs), Counter()) for key in TALLIES}
    kept, tasks = total["kept"], total["tasks"]
    return {
        "recipe": runs[0]["recipe"],
        "seeds": len(runs),
        **{key: total[key] for key in ("tasks", "dialogues", "kept", "dialogue_stage_calls")},
        "dialogues_per_s": round(total["dialogues"] / total["wall_s"], 2) if total["wall_s"] else None,
        "kept_share_of_tasks": round(kept / tasks, 2) if tasks else None,
        "kept_share_by_seed": [round(run["kept"] / run["tasks"], 2) if run["tasks"] else None for run in runs],
        "calls_per_kept": round(total["dialogue_stage_calls"] / kept, 2) if kept else None,
        "all_calls_per_kept": round(total["calls"] / kept, 2) if kept else None,
        "tokens_per_kept": round(total["tokens"] / kept) if kept else None,
        "llm_failures": dict(tallies["llm_failures"]),
        "wall_s": round(total["wall_s"], 2),
        "top_drops": dict(tallies["drops"].most_common(5)),
        "modes": dict(tallies["modes"]),
    }


async def search_comparison(config: Config, endpoint: Endpoint, tasks: list[Task], react_n: int, children: int) -> dict[str, Any]:
    results: dict[str, dict[str, Any]] = {}
    async with LLMGateway(endpoint, config.llm) as gateway:
        ctx = ShardContext(config=config, run_id="bench-search", gateway=gateway)

        async def run(task: Task, method: str, offset: int) -> tuple[bool, int]:
            async def chat(messages: list[dict[str, Any]], *, tools: list[dict[str, Any]], sample: int) -> dict[str, Any]:
                return await gateway.chat("assistant", messages, tools=tools, tool_choice="auto", sample=sample + offset)

            async def run_call(function: Function, call: ToolCall) -> str:
                body, _ = await execute(function, call, ctx)
                return json.dumps(body)

            functions = [fn for tool in task.tools for fn in tool.functions]
            result = await solve(opening_messages(task.instruction, task.tools), functions, chat=chat, execute=run_call,
                                 method=method, max_depth=6, max_children=children, max_calls=60)  # type: ignore[arg-type]
            return result.finish_type == "give_answer", result.llm_calls

        async def dfsdt(task: Task) -> tuple[bool, int]:
            return await run(task, "dfsdt", 0)

        async def react_at_n(task: Task) -> tuple[bool, int]:
            spent = 0
            for attempt in range(react_n):
                solved, calls = await run(task, "react", attempt * 1000)
                spent += calls
                if solved:
                    return True, spent
            return False, spent

        for name, method in (("dfsdt", dfsdt), (f"react@{react_n}", react_at_n)):
            outcomes = await asyncio.gather(*(method(t) for t in tasks))
            solved = sum(ok for ok, _ in outcomes)
            calls = sum(c for _, c in outcomes)
            results[name] = {"instructions": len(tasks), "solved": solved, "calls": calls,
                             "calls_per_solved": round(calls / solved, 2) if solved else None}
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recipes", description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=1, help="part 1 with seeds 1..N, counts pooled")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--react-n", type=int, default=3)
    parser.add_argument("--children", type=int, default=3)
    parser.add_argument("--instructions", type=int, default=24)
    parser.add_argument("--obedience", type=float, default=0.9)
    parser.add_argument("--profiles", default=",".join(CLIENT_SETTINGS))
    parser.add_argument("--no-search", action="store_true", help="skip part 2")
    parser.add_argument("--out", default="benchmarks/results/recipes.json")
    parser.add_argument("--config", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="toolfactory-bench-recipes-")
    common = [f"storage.root={root}", "llm.cache=false", f"llm.simulator.latency_ms={args.latency_ms}",
              "llm.simulator.latency_jitter_ms=0", f"llm.simulator.obedience={args.obedience}"]
    catalog = load_seed_catalog()
    tools = [t.model_dump() for t in catalog[: args.tools]]
    recipes: list[dict[str, Any]] = []
    for profile in args.profiles.split(","):
        runs: dict[str, list[dict[str, Any]]] = {recipe: [] for recipe in RECIPES}
        for seed in range(1, args.seeds + 1):
            seeded = [f"run.seed={seed}", f"llm.simulator.seed={seed}"] if args.seeds > 1 else []
            profiled = load_config(args.config, [*common, *client_overrides(profile), *seeded, *args.overrides])
            with llm_endpoint(profiled) as base_url:
                endpoint = resolve_endpoint(profiled.llm, base_url)
                for recipe in RECIPES:
                    runs[recipe].append(asyncio.run(by_recipe(profiled, endpoint, recipe, tools)))
        recipes += [{"profile": profile, **pooled(runs[recipe])} for recipe in RECIPES]
    config = load_config(args.config, [*common, *args.overrides])
    search: dict[str, Any] = {}
    if not args.no_search:
        with llm_endpoint(config) as base_url:
            endpoint = resolve_endpoint(config.llm, base_url)
            weather = [t for t in catalog if t.category in ("Weather", "Travel")]
            instructions = [Task(id=f"s{k}", tools=weather[k % len(weather): k % len(weather) + 2] or weather[:2],
                                 instruction=f"Plan a trip to city number {k}: check the weather and find flights.",
                                 recipe="toolllm", mode="open") for k in range(args.instructions)]
            search = asyncio.run(search_comparison(config, endpoint, instructions, args.react_n, args.children))
    report = {"benchmark": "recipes", "provider": config.llm.provider, "latency_ms": args.latency_ms, "tools": args.tools,
              "seeds": args.seeds,
              "obedience": args.obedience, "recipes": recipes, "search": search}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"{'profile':<20} {'recipe':<11} {'tasks':>6} {'dlgs':>5} {'kept':>5} {'kept/task':>9} {'dlg/s':>7} "
          f"{'calls/kept':>11} {'all calls/kept':>15} {'tokens/kept':>12}  top drops")
    for r in recipes:
        print(f"{r['profile']:<20} {r['recipe']:<11} {r['tasks']:>6} {r['dialogues']:>5} {r['kept']:>5} "
              f"{str(r['kept_share_of_tasks']):>9} {r['dialogues_per_s']:>7} {str(r['calls_per_kept']):>11} "
              f"{str(r['all_calls_per_kept']):>15} {str(r['tokens_per_kept']):>12}  {r['top_drops']}"
              + (f"  by seed {r['kept_share_by_seed']}" if args.seeds > 1 else ""))
    for name, s in search.items():
        print(f"{name:<11} solved {s['solved']}/{s['instructions']}  calls {s['calls']}  calls/solved {s['calls_per_solved']}")
    if config.llm.provider == "simulator":
        print("note: the simulator ends a chain with text and calls Finish only when the diversity prompt of a\n"
              "re-expanded node names it, so ReAct (no re-expansion) never finishes here; point --set llm.* at a\n"
              "real model to compare the two searches")
    print(f"results written to {args.out}")


if __name__ == "__main__":
    main()
