"""What a provider's prompt cache would serve of the quickstart, and what an accepted dialogue costs.

    python -m benchmarks.prompt_cache [--seeds 0,1,2] [--profile openai] [--cached-price 0.5]
                                      [--before PATH] [--out PATH] [--set section.field=value …]

Each seed is one ``toolfactory run`` of the quickstart (run and simulator seeded alike) into an
empty storage root, so the toolfactory's own answer cache serves nothing and every request reaches
the simulator, whose profile emulates its provider's prompt cache (``openai``: prompts of 1,024
tokens or more, hits in 128-token steps; the vLLM profiles: 16-token blocks) and reports
``usage.prompt_tokens_details.cached_tokens``. The figures come from the run's stats database.

Reported, summed over the seeds and divided by the accepted dialogues (the dataset's records):
per stage and role the prompt, cached and completion tokens, and the billed-equivalent tokens:
uncached prompt tokens + `--cached-price` × cached ones + completion tokens (0.5: the discount
OpenAI published with prompt caching). Also the share of the judges' prompt tokens the cache
served, and each recipe's acceptance rate (dataset records over the tasks written for it).

With `--before`, a results file of an earlier code is shown side by side: by default
`benchmarks/baselines/prompt_cache_before.json`, measured with the cache emulation and the
accounting but the prompts and scheduling of before (judge votes all sent at once, DFSDT going on
below calls the rules reject).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json
from benchmarks.quickstart import toolfactory_script

BASELINE = Path(__file__).resolve().parent / "baselines" / "prompt_cache_before.json"
RUN_TIMEOUT_S = 900
ATTEMPTS = 3  # a loaded machine can time out starting Prefect's temporary server: the run is tried again


def run_seed(seed: int, profile: str, root: Path, overrides: list[str]) -> dict[str, Any]:
    """One quickstart run; its usage per (stage, role), accepted records and acceptance per recipe."""
    command = [toolfactory_script(), "run", "--config", "configs/quickstart.yaml",
               "--set", f"storage.root={root}", "--set", f"run.seed={seed}", "--set", f"llm.simulator.seed={seed}",
               "--set", f"llm.simulator.profile={profile}"]
    for override in overrides:
        command += ["--set", override]
    started = time.perf_counter()
    for attempt in range(1, ATTEMPTS + 1):
        done = subprocess.run(command, check=False, cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S, env={**os.environ, "RAY_AUTH_MODE": "disabled",
                                   # Prefect's temporary server starts slowly on a loaded machine
                                   "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180"})
        if done.returncode == 0:
            break
        print(f"seed {seed}: toolfactory run failed ({done.returncode}), attempt {attempt} of {ATTEMPTS}:\n"
              f"{done.stderr[-2000:]}", flush=True)
        shutil.rmtree(root, ignore_errors=True)  # the next attempt starts from an empty root, as the first
    else:
        raise SystemExit(f"seed {seed}: toolfactory run failed {ATTEMPTS} times")
    with duckdb.connect(str(root / "stats.duckdb"), read_only=True) as con:
        usage = con.execute(
            """SELECT stage, role, sum(calls), sum(prompt_tokens), sum(coalesce(cached_prompt_tokens, 0)),
                      sum(completion_tokens)
               FROM llm_usage GROUP BY stage, role ORDER BY stage, role""").fetchall()
        accepted = con.execute("SELECT coalesce(sum(items_out), 0) FROM stage_metrics WHERE stage = 'curate'").fetchone()
        recipes = con.execute(
            """SELECT stage, value, sum(count) FROM profiles WHERE dimension = 'recipes' AND stage IN ('tasks', 'curate')
               GROUP BY stage, value""").fetchall()
    return {
        "seed": seed,
        "wall_s": round(time.perf_counter() - started, 1),
        "accepted": int(accepted[0]) if accepted else 0,
        "usage": [{"stage": s, "role": r, "calls": int(n), "prompt": int(p), "cached": int(k), "completion": int(c)}
                  for s, r, n, p, k, c in usage],
        "recipes": {f"{stage}/{recipe}": int(n) for stage, recipe, n in recipes},
    }


def summarize(seeds: list[dict[str, Any]], cached_price: float) -> dict[str, Any]:
    """The seeds pooled: tokens per accepted dialogue per (stage, role), billed-equivalent, judge share."""
    accepted = sum(s["accepted"] for s in seeds)
    cells: dict[str, dict[str, int]] = {}
    for seed in seeds:
        for row in seed["usage"]:
            cell = cells.setdefault(f"{row['stage']}/{row['role']}", {"calls": 0, "prompt": 0, "cached": 0, "completion": 0})
            for key in cell:
                cell[key] += row[key]
    per = max(accepted, 1)

    def billed(cell: dict[str, int]) -> float:
        return cell["prompt"] - cell["cached"] + cached_price * cell["cached"] + cell["completion"]

    rows = {name: {"calls": c["calls"] / per, "prompt": c["prompt"] / per, "cached": c["cached"] / per,
                   "completion": c["completion"] / per, "billed": billed(c) / per} for name, c in sorted(cells.items())}
    total = {key: sum(r[key] for r in rows.values()) for key in ("calls", "prompt", "cached", "completion", "billed")}
    judge = [c for name, c in cells.items() if name.endswith("/judge")]
    judge_prompt = sum(c["prompt"] for c in judge)
    tasks = {k.split("/", 1)[1]: 0 for seed in seeds for k in seed["recipes"] if k.startswith("tasks/")}
    kept = dict.fromkeys(tasks, 0)
    for seed in seeds:
        for key, n in seed["recipes"].items():
            stage, recipe = key.split("/", 1)
            (tasks if stage == "tasks" else kept)[recipe] = (tasks if stage == "tasks" else kept).get(recipe, 0) + n
    return {
        "accepted": accepted,
        "cached_price": cached_price,
        "per_accepted": rows,
        "total_per_accepted": total,
        "judge_cached_share": sum(c["cached"] for c in judge) / judge_prompt if judge_prompt else None,
        "acceptance_by_recipe": {r: kept.get(r, 0) / n for r, n in sorted(tasks.items()) if n},
    }


def _side_by_side(after: dict[str, Any], before: dict[str, Any] | None) -> str:
    names = sorted(set(after["per_accepted"]) | set((before or {}).get("per_accepted", {})))
    zero = {"prompt": 0.0, "cached": 0.0, "completion": 0.0, "billed": 0.0}
    rows = []
    for name in [*names, "total"]:
        now = after["total_per_accepted"] if name == "total" else after["per_accepted"].get(name, zero)
        row: list[Any] = [name, round(now["prompt"]), round(now["cached"]), round(now["completion"]), round(now["billed"])]
        if before is not None:
            then = before["total_per_accepted"] if name == "total" else before["per_accepted"].get(name, zero)
            row = [name, round(then["prompt"]), round(then["cached"]), round(then["billed"]), *row[1:]]
        rows.append(row)
    headers = ["stage/role", "prompt", "cached", "completion", "billed"]
    if before is not None:
        headers = ["stage/role", "before: prompt", "cached", "billed", "after: prompt", "cached", "completion", "billed"]
    return table(headers, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--profile", default="openai")
    parser.add_argument("--cached-price", type=float, default=0.5, help="a cached prompt token's price, in prompt tokens")
    parser.add_argument("--before", default=str(BASELINE), help="results of the earlier code, shown beside ('' for none)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "prompt_cache.json"))
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    seeds = []
    with tempfile.TemporaryDirectory(prefix="tf-prompt-cache-") as tmp:
        for seed in (int(s) for s in args.seeds.split(",")):
            seeds.append(run_seed(seed, args.profile, Path(tmp) / f"seed-{seed}", args.overrides))
            print(f"seed {seed}: {seeds[-1]['accepted']} accepted in {seeds[-1]['wall_s']} s", flush=True)
    summary = summarize(seeds, args.cached_price)
    before = json.loads(Path(args.before).read_text())["summary"] if args.before and Path(args.before).exists() else None
    print(f"\nper accepted dialogue, profile {args.profile}, {len(seeds)} seeds, {summary['accepted']} accepted; "
          f"billed = uncached prompt + {args.cached_price:g} x cached + completion tokens")
    print(_side_by_side(summary, before))
    share = summary["judge_cached_share"]
    print(f"\njudges' prompt tokens served from the cache: {share:.1%}" if share is not None else "\nno judge calls")
    recipes = sorted(set(summary["acceptance_by_recipe"]) | set((before or {}).get("acceptance_by_recipe", {})))
    print(table(["recipe", *(["before"] if before else []), "acceptance"],
                [[r, *([f"{before['acceptance_by_recipe'].get(r, 0):.1%}"] if before else []),
                  f"{summary['acceptance_by_recipe'].get(r, 0):.1%}"] for r in recipes]))
    if before is not None:
        ratio = summary["total_per_accepted"]["billed"] / before["total_per_accepted"]["billed"]
        print(f"\nbilled-equivalent tokens per accepted dialogue: {ratio:.0%} of before")
    out = write_json(args.out, {"machine": machine_info(), "profile": args.profile, "seeds": seeds, "summary": summary})
    print(f"results: {out}")


if __name__ == "__main__":
    main()
