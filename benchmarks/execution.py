"""The verifier's execution layer on BFCL's own multi-turn ground truths, against BFCL's checker.

    python -m benchmarks.execution [--limit N] [--concurrency C] [--out PATH]

For each entry of BFCL's ``multi_turn_base`` category (all 200 unless ``--limit``):

1. its ground-truth calls are executed on BFCL's environments through our Python environment
   source (:mod:`toolfactory.formats.bfcl_multi_turn`) and kept as a dialogue whose target state
   is the state they leave; that state is compared with the one BFCL's own executor
   (``execute_multi_turn_func_call``) leaves;
2. the dialogue goes through the execution layer (a replay in fresh runner processes): it must pass;
3. two perturbations of the trajectory, each judged by BFCL's own ``state_checker`` (the final
   instances of the perturbed calls against those of the ground truth) and by our layer (its
   recorded results are the ground truth's, so the sources are not held to them: the state
   decides): one ground-truth call dropped, and one argument changed. The call and the argument
   are chosen from a hash of the entry's id (reproducible). The confusion counts are reported:
   both reject / only BFCL / only us / neither; and the same for BFCL's ``multi_turn_checker``
   (the state and the results after every turn) against any ``exec_*`` rejection of the layer,
   which compares the state after every turn too (``target_turn_states``).

Writes ``benchmarks/results/execution.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.util
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, machine_info, write_json
from toolfactory.executable.runner import snapshot
from toolfactory.formats.bfcl_multi_turn import execute, ground_truth_calls
from toolfactory.models import Dialogue
from toolfactory.stages.verify.execution import ExecutionLayer

CATEGORY = "BFCL_v4_multi_turn_base.json"


def bfcl_data() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("this benchmark needs bfcl-eval: pip install --no-deps bfcl-eval==2026.3.23")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def load_entries(limit: int | None) -> list[dict[str, Any]]:
    data = bfcl_data()
    answers = {a["id"]: a["ground_truth"] for a in map(json.loads, (data / "possible_answer" / CATEGORY).read_text().splitlines())}
    entries = [{**e, "ground_truth": answers[e["id"]]} for e in map(json.loads, (data / CATEGORY).read_text().splitlines())]
    return entries[:limit] if limit else entries


def pick(key: str, n: int) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % n


def changed(value: Any) -> Any:
    """Another value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.5
    if isinstance(value, str):
        return value + "_x"
    if isinstance(value, list):
        return value[:-1] if value else ["x"]
    if isinstance(value, dict):
        return {}
    return "x"


def calls_of(dialogue: Dialogue) -> list[tuple[int, str, dict[str, Any]]]:
    return [(i, c.name, json.loads(c.arguments)) for i, m in enumerate(dialogue.messages) for c in m.tool_calls or []]


def not_held_to_results(dialogue: Dialogue) -> Dialogue:
    copy = dialogue.model_copy(deep=True)
    for spec in copy.generation["execution"]["environments"].values():
        spec["deterministic"] = False
    return copy


def drop_one(dialogue: Dialogue) -> Dialogue | None:
    calls = calls_of(dialogue)
    if not calls:
        return None
    index = calls[pick(dialogue.id + "/drop", len(calls))][0]
    copy = not_held_to_results(dialogue)
    del copy.messages[index:index + 2]  # the call and its answer
    return copy


def change_one(dialogue: Dialogue) -> Dialogue | None:
    calls = [c for c in calls_of(dialogue) if c[2]]
    if not calls:
        return None
    index, _, arguments = calls[pick(dialogue.id + "/change", len(calls))]
    key = sorted(arguments)[pick(dialogue.id + "/argument", len(arguments))]
    copy = not_held_to_results(dialogue)
    call = (copy.messages[index].tool_calls or [])[0]
    call.arguments = json.dumps({**arguments, key: changed(arguments[key])}, ensure_ascii=False)
    return copy


def turn_texts(entry: dict[str, Any], dialogue: Dialogue) -> list[list[str]]:
    """The dialogue's calls as BFCL's call text, per turn of `entry` (the turn of the last user
    message before each call)."""
    turn_of = [t for t, question in enumerate(entry["question"]) for m in question if isinstance(m, dict)]
    turns: list[list[str]] = [[] for _ in entry["question"]]
    users = 0
    for message in dialogue.messages:
        users += message.role == "user"
        for call in message.tool_calls or []:
            arguments = json.loads(call.arguments)
            turns[turn_of[max(users - 1, 0)]].append(f"{call.name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})")
    return turns


def bfcl_instances(entry: dict[str, Any], dialogue: Dialogue, run: str) -> dict[str, Any]:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    texts = [f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})" for _, name, arguments in calls_of(dialogue)]
    _, instances = execute_multi_turn_func_call(texts, entry["initial_config"], entry["involved_classes"], run, entry["id"])
    return instances


async def one(entry: dict[str, Any]) -> dict[str, Any]:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker, state_checker

    layer = ExecutionLayer({})
    started = time.perf_counter()
    dialogue = await execute(entry, ground_truth_calls(entry))
    read_seconds = time.perf_counter() - started
    ground = bfcl_instances(entry, dialogue, "toolfactory_ground")
    truth = turn_texts(entry, dialogue)
    target = dialogue.generation["execution"]["target_state"]
    same_as_bfcl = sorted(target) == sorted(ground) and all(target[c] == snapshot(i) for c, i in ground.items())
    started = time.perf_counter()
    ground_codes = sorted({v.code for v in await layer.verdicts(dialogue)})
    replay_seconds = time.perf_counter() - started
    out: dict[str, Any] = {"id": entry["id"], "calls": len(calls_of(dialogue)), "classes": len(entry["involved_classes"]),
                           "state_equals_bfcl": same_as_bfcl, "ground_truth_codes": ground_codes,
                           "read_seconds": round(read_seconds, 2), "replay_seconds": round(replay_seconds, 2)}
    for kind, make in (("drop", drop_one), ("change", change_one)):
        perturbed = make(dialogue)
        if perturbed is None:
            continue
        bfcl_rejects = not state_checker(bfcl_instances(entry, perturbed, f"toolfactory_{kind}"), ground)["valid"]
        # BFCL's own multi-turn checker: the state and the results after every turn.
        turns = multi_turn_checker([[turn] for turn in turn_texts(entry, perturbed)], truth, entry, "multi_turn_base",
                                   f"toolfactory_turns_{kind}")
        codes = sorted({v.code for v in await layer.verdicts(perturbed)})
        out[kind] = {"bfcl_rejects": bfcl_rejects, "codes": codes, "we_reject": "exec_state_mismatch" in codes,
                     "bfcl_turns_rejects": not turns["valid"], "bfcl_turns_error": turns.get("error_type"),
                     "we_reject_any": bool(codes)}
    return out


async def run_all(entries: list[dict[str, Any]], concurrency: int, timeout: float) -> list[dict[str, Any]]:
    slots = asyncio.Semaphore(concurrency)
    done = 0

    async def bounded(entry: dict[str, Any]) -> dict[str, Any]:
        nonlocal done
        try:
            async with slots:  # the timeout counts from the entry's start, not its wait for a slot
                row = await asyncio.wait_for(one(entry), timeout)
        except TimeoutError:
            row = {"id": entry["id"], "stuck": True}
        except Exception as exc:  # noqa: BLE001 - reported with the entry, the others go on
            row = {"id": entry["id"], "stuck": True, "error": f"{type(exc).__name__}: {exc}"[:300]}
        done += 1
        print(f"{done}/{len(entries)} {entry['id']}{' stuck' if row.get('stuck') else ''}", file=sys.stderr, flush=True)
        return row

    return list(await asyncio.gather(*(bounded(entry) for entry in entries)))


def confusion(rows: list[dict[str, Any]], kind: str, bfcl_key: str = "bfcl_rejects", our_key: str = "we_reject") -> dict[str, int]:
    counts: Counter[str] = Counter()
    for row in rows:
        if kind in row:
            bfcl, us = row[kind][bfcl_key], row[kind][our_key]
            counts["both_reject" if bfcl and us else "only_bfcl" if bfcl else "only_us" if us else "neither"] += 1
    return {key: counts[key] for key in ("both_reject", "only_bfcl", "only_us", "neither")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N entries (default: all 200)")
    parser.add_argument("--concurrency", type=int, default=4, help="entries in flight at once")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one entry may take")
    parser.add_argument("--out", default=str(RESULTS_DIR / "execution.json"))
    args = parser.parse_args()
    entries = load_entries(args.limit)
    started = time.perf_counter()
    everything = asyncio.run(run_all(entries, args.concurrency, args.timeout))
    seconds = time.perf_counter() - started
    rows = [row for row in everything if not row.get("stuck")]
    passed = sum(not row["ground_truth_codes"] for row in rows)
    summary = {
        "entries": len(everything),
        "stuck_entries": [row["id"] for row in everything if row.get("stuck")],
        "judged_entries": len(rows),
        "ground_truth_pass_rate": round(passed / len(rows), 4) if rows else 0.0,
        "ground_truth_rejections": dict(Counter(code for row in rows for code in row["ground_truth_codes"])),
        "target_state_equals_bfcl_executor": sum(row["state_equals_bfcl"] for row in rows),
        "drop_one_call": confusion(rows, "drop"),
        "change_one_argument": confusion(rows, "change"),
        # BFCL's multi_turn_checker (state and results after every turn) against any exec_* rejection
        "drop_one_call_per_turn": confusion(rows, "drop", "bfcl_turns_rejects", "we_reject_any"),
        "change_one_argument_per_turn": confusion(rows, "change", "bfcl_turns_rejects", "we_reject_any"),
        "calls": sum(row["calls"] for row in rows),
        "seconds": round(seconds, 1),
        "concurrency": args.concurrency,
        "median_read_seconds": sorted(row["read_seconds"] for row in rows)[len(rows) // 2] if rows else 0.0,
        "median_replay_seconds": sorted(row["replay_seconds"] for row in rows)[len(rows) // 2] if rows else 0.0,
    }
    print(json.dumps(summary, indent=1))
    write_json(Path(args.out), {"machine": machine_info(), "summary": summary, "entries": rows})


if __name__ == "__main__":
    main()
