"""Replay agreement: `toolfactory verify` from the record against `toolfactory verify --live`.

    python -m benchmarks.replay_agreement [--sources files,time] [--instructions 4] [--bfcl 30] [--ids ID,…] [--out PATH]

Two measurements:

1. **A real run.** A small run over executable sources (BFCL's file system as a Python
   environment, `mcp-server-time` over stdio: :mod:`benchmarks.executable_runs`) on a local
   Prefect and Ray with the simulator; every dialogue the dialogues stage made is exported as
   Dialogue JSONL and verified twice with the run's configuration: from the record (nothing runs)
   and live (every call replayed on fresh sessions). Agreement is the share of records whose
   verdict (accepted, or rejected with which `exec_*` codes) is the same both ways; every
   disagreement is listed with both sides' codes.
2. **BFCL's released multi-turn ground truths and their mutants** (`bfcl-eval`'s
   `multi_turn_base`, the first `--bfcl` entries). The ground truth is executed as the reader
   does (:mod:`toolfactory.formats.bfcl_multi_turn`), and for each entry two kinds of mutant are
   judged both ways:

   * *executed* mutants: the trajectory with one call dropped, or one argument changed (chosen
     from a hash of the id, as :mod:`benchmarks.execution` does), executed for real, so the
     record is honest about what ran, but held to the ground truth's target states (what the
     task asks). The record knows the final state its calls left; it does not know the state
     after each user turn, so a mutant whose only difference is a state in between (a booking
     made and then cancelled) needs a replay;
   * *edited* mutants: the ground truth's record with a call removed from the messages (or an
     argument changed in them) after the run, the record left as it was.

   Reported per kind: records both ways reject, only live, only the record, neither.

Writes ``benchmarks/results/replay_agreement.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json

SOURCES = ("files", "time")


def verdicts(report_dir: Path, ids: list[str]) -> dict[str, tuple[str, ...]]:
    """Each record's rejecting codes from a verify report folder (() for an accepted record)."""
    rejected = {line["id"]: tuple(line["codes"]) for line in map(json.loads, (report_dir / "rejected.jsonl").read_text().splitlines())}
    return {record_id: rejected.get(record_id, ()) for record_id in ids}


def execution_part(codes: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(code for code in codes if code.startswith("exec_"))


def agreement(record: dict[str, tuple[str, ...]], live: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """Records whose verdict is the same both ways (accepted, or rejected with the same exec_ codes)."""
    same = [i for i in record if bool(record[i]) == bool(live[i]) and execution_part(record[i]) == execution_part(live[i])]
    differ = [{"id": i, "from_record": list(record[i]), "live": list(live[i])} for i in record if i not in same]
    return {"records": len(record), "agree": len(same), "agreement": round(len(same) / len(record), 4) if record else None,
            "disagreements": differ}


def real_run(names: list[str], instructions: int, tmp: Path) -> dict[str, Any]:
    """Part 1 (see the module doc)."""
    from benchmarks.executable_runs import overrides, prefect_and_ray, run, source_entry
    from toolfactory.config import load_config, validate_config
    from toolfactory.models import Dialogue
    from toolfactory.stages.verify.report import verify_file
    from toolfactory.storage import ObjectStore
    from toolfactory.storage.shards import read_records

    tools: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        field, entry = source_entry(name, None)
        tools.setdefault(field, []).append(entry)
    root = tmp / "run"
    with prefect_and_ray():
        summary = run(overrides(root, instructions, tools))
    store = ObjectStore.open(load_config(None, [f"storage.root={root}"], environ={}).storage)
    prefix = f"runs/{summary['run_id']}/dialogues"
    made = [Dialogue.model_validate(r) for path in sorted(store.list(prefix)) if path.endswith(".parquet") and "/rejected" not in path
            for r in read_records(store, path)]
    executed = [d for d in made if (d.generation.get("execution") or {}).get("calls")]
    data = tmp / "executed.jsonl"
    data.write_text("".join(d.model_dump_json() + "\n" for d in executed))
    configured = validate_config({"tools": tools}).tools
    reports = {}
    for mode in ("record", "live"):
        reports[mode] = verify_file(data, "toolfactory", tmp / mode, execution=mode, tools=configured)  # type: ignore[arg-type]
    ids = [d.id for d in executed]
    found = agreement(verdicts(tmp / "record", ids), verdicts(tmp / "live", ids))
    return {"status": summary.get("status"), "dialogues": len(made), "executed": len(executed),
            "calls": sum(len(d.generation["execution"]["calls"]) for d in executed),
            "by_source": {mode: report["execution"]["sources"] for mode, report in reports.items()},
            "accepted": {mode: report["accepted"] for mode, report in reports.items()}, **found}


async def bfcl_rows(limit: int, ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Part 2 (see the module doc): per entry, each record's exec_ codes from the record and live."""
    from benchmarks.execution import calls_of, changed, load_entries, pick
    from toolfactory.formats.bfcl_multi_turn import execute, ground_truth_calls
    from toolfactory.models import Dialogue
    from toolfactory.stages.verify.execution import ExecutionLayer

    async def codes(dialogue: Dialogue) -> dict[str, list[str]]:
        out = {}
        for mode in ("record", "live"):
            out[mode] = sorted({v.code for v in await ExecutionLayer({}, mode=mode).verdicts(dialogue)})  # type: ignore[arg-type]
        return out

    def held_to(mutant: Dialogue, truth: Dialogue) -> Dialogue:
        execution = mutant.generation["execution"]
        for key in ("target_state", "target_turn_states"):
            execution[key] = json.loads(json.dumps(truth.generation["execution"][key]))
        return mutant

    rows: list[dict[str, Any]] = []
    entries = [e for e in load_entries(None) if e["id"] in ids] if ids else load_entries(limit)
    for entry in entries:
        plan = ground_truth_calls(entry)
        truth = await execute(entry, plan)
        row: dict[str, Any] = {"id": entry["id"], "ground_truth": await codes(truth)}
        where = [(t, i) for t, turn in enumerate(plan) for i in range(len(turn))]
        if where:
            t, i = where[pick(entry["id"] + "/drop", len(where))]
            dropped = [[c for j, c in enumerate(turn) if (u, j) != (t, i)] for u, turn in enumerate(plan)]
            row["executed_drop"] = await codes(held_to(await execute(entry, dropped), truth))
            index = calls_of(truth)[where.index((t, i))][0]
            edited = truth.model_copy(deep=True)
            del edited.messages[index:index + 2]
            row["edited_drop"] = await codes(edited)
        with_args = [(t, i) for t, i in where if plan[t][i][1]]
        if with_args:
            t, i = with_args[pick(entry["id"] + "/change", len(with_args))]
            name, arguments = plan[t][i]
            key = sorted(arguments)[pick(entry["id"] + "/argument", len(arguments))]
            other = {**arguments, key: changed(arguments[key])}
            plan_changed = [[(name, other) if (u, j) == (t, i) else c for j, c in enumerate(turn)] for u, turn in enumerate(plan)]
            row["executed_change"] = await codes(held_to(await execute(entry, plan_changed), truth))
            index = calls_of(truth)[where.index((t, i))][0]
            edited = truth.model_copy(deep=True)
            (edited.messages[index].tool_calls or [])[0].arguments = json.dumps(other, ensure_ascii=False)
            row["edited_change"] = await codes(edited)
        rows.append(row)
        print(f"bfcl {len(rows)}/{len(entries)} {entry['id']}", file=sys.stderr, flush=True)
    return rows


def bfcl_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("ground_truth", "executed_drop", "executed_change", "edited_drop", "edited_change"):
        counts: Counter[str] = Counter()
        only_live: Counter[str] = Counter()
        for row in rows:
            if kind not in row:
                continue
            record, live = bool(row[kind]["record"]), bool(row[kind]["live"])
            counts["both_reject" if record and live else "only_live" if live else "only_record" if record else "neither"] += 1
            if live and not record:
                only_live.update(row[kind]["live"])
        total = sum(counts.values())
        agree = counts["both_reject"] + counts["neither"]
        out[kind] = {"records": total, **{k: counts[k] for k in ("both_reject", "only_live", "only_record", "neither")},
                     "agreement": round(agree / total, 4) if total else None, "only_live_codes": dict(only_live.most_common())}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.replay_agreement", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", default=",".join(SOURCES), help="the run's sources, of: " + ", ".join(SOURCES) + " ('' skips the run)")
    parser.add_argument("--instructions", type=int, default=4, help="tasks.instructions_per_tool of the run")
    parser.add_argument("--bfcl", type=int, default=30, help="BFCL multi_turn_base entries (0 skips them)")
    parser.add_argument("--ids", default="", help="comma-separated BFCL entry ids instead of the first --bfcl")
    parser.add_argument("--out", default=str(RESULTS_DIR / "replay_agreement.json"))
    args = parser.parse_args(argv)
    os.environ.setdefault("OPENAI_API_KEY", "sk-simulator")  # the simulator takes any key
    data: dict[str, Any] = {"load_before": [round(x, 2) for x in os.getloadavg()]}
    names = [n for n in args.sources.split(",") if n]
    if names:
        with tempfile.TemporaryDirectory(prefix="tf-replay-agreement-") as tmp:
            data["run"] = real_run(names, args.instructions, Path(tmp))
        found = data["run"]
        print(f"run: {found['executed']} executed dialogues ({found['calls']} calls); record and live agree on "
              f"{found['agree']}/{found['records']} ({found['agreement']})")
        for row in found["disagreements"]:
            print(f"  {row['id']}: from the record {row['from_record'] or 'accepted'}, live {row['live'] or 'accepted'}")
        write_json(args.out, {**data, "machine": machine_info()})
    if args.bfcl or args.ids:
        rows = asyncio.run(bfcl_rows(args.bfcl, [i for i in args.ids.split(",") if i]))
        data["bfcl"] = {"entries": len(rows), "summary": bfcl_summary(rows), "rows": rows}
        keys = ["records", "both_reject", "only_live", "only_record", "neither", "agreement"]
        summary = data["bfcl"]["summary"]
        print(table(["kind", *keys], [[kind, *(summary[kind][k] for k in keys)] for kind in summary]))
        for kind, figures in summary.items():
            if figures["only_live_codes"]:
                print(f"  {kind}: only a replay finds {figures['only_live_codes']}")
    data["machine"] = machine_info()
    print(f"wrote {write_json(args.out, data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
