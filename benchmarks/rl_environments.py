"""RL environments against the verifier's execution layer, on BFCL's multi-turn ground truths.

    python -m benchmarks.rl_environments [--limit N] [--concurrency C] [--out PATH]

For each entry of BFCL's ``multi_turn_base`` category (the first ``--limit``, default 50):

1. its ground-truth calls are executed on BFCL's classes (:mod:`toolfactory.formats.bfcl_multi_turn`)
   and the record becomes a verifiable task (:func:`toolfactory.rl.tasks.task_of_record`);
2. three trajectories are played by a replay policy over HTTP
   (:mod:`toolfactory.rl.replay_policy`): the ground truth, one call dropped, one argument
   changed (the perturbations of ``benchmarks.execution``, chosen from a hash of the entry's id);
3. each is run by each installed framework's own machinery: verifiers' ``evaluate`` over the
   environment its ``load_environment`` makes, and skyrl-gym's environment made by
   ``skyrl_gym.make`` and driven through SkyRL's agent-loop protocol
   (:func:`toolfactory.rl.skyrl_env.rollout`); every call runs on the real classes;
4. the framework's reward is compared with the execution layer's verdict on the same trajectory
   as a record (``ExecutionLayer.verdicts``: 1 when it passes, 0 when any ``exec_*`` rule fails).

Reported per framework and trajectory kind: rollouts run, mean reward, agreement with the
layer, seconds. Writes ``benchmarks/results/rl_environments.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, machine_info, write_json
from benchmarks.execution import change_one, drop_one, load_entries
from toolfactory.formats.bfcl_multi_turn import execute, ground_truth_calls
from toolfactory.models import Dialogue
from toolfactory.rl.replay_policy import ReplayPolicy, plan_of_dialogue, serve
from toolfactory.rl.tasks import task_of_record
from toolfactory.stages.verify.execution import ExecutionLayer

KINDS = ("ground_truth", "drop", "change")
KEY = "TOOLFACTORY_RL_BENCH_KEY"


async def prepare(entries: list[dict[str, Any]], concurrency: int) -> list[dict[str, Any]]:
    """Per entry: its task, and per kind the trajectory's plan and the layer's reward."""
    layer = ExecutionLayer({})
    slots = asyncio.Semaphore(concurrency)

    async def one(entry: dict[str, Any]) -> dict[str, Any]:
        async with slots:
            dialogue = await execute(entry, ground_truth_calls(entry))
            variants: dict[str, Dialogue | None] = {"ground_truth": dialogue, "drop": drop_one(dialogue), "change": change_one(dialogue)}
            row: dict[str, Any] = {"id": entry["id"], "task": task_of_record(dialogue), "kinds": {}}
            for kind, variant in variants.items():
                if variant is None:
                    continue
                codes = sorted({v.code for v in await layer.verdicts(variant)})
                row["kinds"][kind] = {"plan": plan_of_dialogue(variant), "layer_reward": 0.0 if codes else 1.0, "layer_codes": codes}
            return row

    return list(await asyncio.gather(*(one(e) for e in entries)))


def summarise(rows: list[dict[str, Any]], rewards: dict[tuple[str, str], float], seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {"seconds": round(seconds, 1), "rollouts": len(rewards)}
    for kind in KINDS:
        pairs = [(rewards[(r["id"], kind)], r["kinds"][kind]["layer_reward"]) for r in rows if (r["id"], kind) in rewards]
        out[kind] = {"rollouts": len(pairs), "mean_reward": round(sum(p for p, _ in pairs) / len(pairs), 4) if pairs else None,
                     "layer_mean_reward": round(sum(q for _, q in pairs) / len(pairs), 4) if pairs else None,
                     "agreement": round(sum(p == q for p, q in pairs) / len(pairs), 4) if pairs else None,
                     "disagreements": [r["id"] for r in rows if (r["id"], kind) in rewards
                                       and rewards[(r["id"], kind)] != r["kinds"][kind]["layer_reward"]]}
    return out


def batches(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """`rows` in batches whose tasks' first user messages differ: the replay policy knows a task by
    it, and verifiers runs a batch's rollouts at once (BFCL's base category repeats one)."""
    out: list[list[dict[str, Any]]] = []
    for row in rows:
        first = row["task"].user_turns[0]
        target = next((b for b in out if all(r["task"].user_turns[0] != first for r in b)), None)
        if target is None:
            out.append(target := [])
        target.append(row)
    return out


def run_verifiers(rows: list[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    import verifiers as vf
    from verifiers.types import ClientConfig

    os.environ.setdefault(KEY, "unused")
    rewards: dict[tuple[str, str], float] = {}
    policy = ReplayPolicy()
    started = time.perf_counter()
    with serve(policy) as url:
        client = ClientConfig(api_base_url=url, api_key_var=KEY, max_retries=0)
        for batch in batches(rows):
            env = vf.load_environment("toolfactory.rl.verifiers_env", tasks=[r["task"].to_json() for r in batch])
            for kind in KINDS:
                ids = set()
                for row in batch:
                    if kind in row["kinds"]:
                        policy.add(row["task"].user_turns[0], row["kinds"][kind]["plan"])
                        ids.add(row["id"])
                results = env.evaluate_sync(client, "replay", num_examples=-1, max_concurrent=concurrency)
                for output in results["outputs"]:
                    task_id = output["info"]["task_id"]
                    if task_id in ids:
                        rewards[(task_id, kind)] = float(output["reward"])
    return summarise(rows, rewards, time.perf_counter() - started)


def run_skyrl(rows: list[dict[str, Any]]) -> dict[str, Any]:
    from openai import OpenAI

    from toolfactory.rl.skyrl_env import dataset_row, rollout

    rewards: dict[tuple[str, str], float] = {}
    policy = ReplayPolicy(text_calls=True)
    started = time.perf_counter()
    with serve(policy) as url:
        client = OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
        for row in rows:
            for kind, variant in row["kinds"].items():
                policy.add(row["task"].user_turns[0], variant["plan"])
                rewards[(row["id"], kind)] = rollout(dataset_row(row["task"]), client, "replay").reward
    return summarise(rows, rewards, time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=50, help="the first N entries (0: all 200)")
    parser.add_argument("--concurrency", type=int, default=4, help="rollouts in flight at once (verifiers) and entries prepared at once")
    parser.add_argument("--out", default=str(RESULTS_DIR / "rl_environments.json"))
    args = parser.parse_args()
    entries = load_entries(args.limit or None)
    started = time.perf_counter()
    rows = asyncio.run(prepare(entries, args.concurrency))
    summary: dict[str, Any] = {"entries": len(rows), "prepare_seconds": round(time.perf_counter() - started, 1),
                               "layer_ground_truth_pass": sum(r["kinds"]["ground_truth"]["layer_reward"] for r in rows)}
    frameworks = {"verifiers": lambda: run_verifiers(rows, args.concurrency), "skyrl_gym": lambda: run_skyrl(rows)}
    for name, run in frameworks.items():
        module = "verifiers" if name == "verifiers" else "skyrl_gym"
        if importlib.util.find_spec(module) is None:
            summary[name] = "not installed (pip install toolfactory[rl])"
            continue
        summary[name] = run()
        print(f"{name}: {summary[name]['rollouts']} rollouts in {summary[name]['seconds']} s", file=sys.stderr, flush=True)
    print(json.dumps(summary, indent=1))
    write_json(Path(args.out), {"machine": machine_info(), "summary": summary})


if __name__ == "__main__":
    main()
