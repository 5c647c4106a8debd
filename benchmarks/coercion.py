"""Near-miss argument types coerced before executable calls run: how often, on what.

    python -m benchmarks.coercion [--no-demo] [--demo-root PATH] [--out PATH]

Counts coerced values per thousand calls (:mod:`toolfactory.executable.coercion`) on:

1. **BFCL's ground truth**: every ground-truth call of BFCL's four multi-turn categories (the
   installed ``bfcl_eval`` package data, read with :mod:`toolfactory.formats.bfcl_multi_turn`),
   coerced against its function's documented parameters. Ground truth is well typed, so this
   should be about 0; the calls that do not fit their parameters are reported too (coercion must
   leave them alone unless they are near misses).
2. **Near misses injected** into those calls the way models err, one argument per call and
   kind, chosen from a hash of the entry and the call: a number written as a string (``5`` →
   ``"5"``), a boolean as a string (``"true"``, or ``"True"`` as Python writes it), one value
   for an array of one; and, as controls that are no near misses and must stay rejected, a
   fraction for an integer (``"5.5"``), ``"yes"``/``"no"`` for a boolean, and several values
   joined in one string for an array. Per kind: the injected calls that broke the schema, those
   coercion turned back into exactly the ground truth (caught), into something else, or left as
   they were (the call stays the 400).
3. **The demo**: ``toolfactory run --config configs/quickstart.yaml`` in a temporary storage root
   (about a minute; ``--demo-root`` reads a run already made there, ``--no-demo`` skips it), then
   its dialogues' ``generation["execution"]["calls"]`` (kept and rejected records) and the
   ``arg_coerced_*`` counts of ``toolfactory stats``: coerced values per thousand executed calls.

Writes ``benchmarks/results/coercion.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json
from benchmarks.execution import bfcl_data
from toolfactory.executable.coercion import coerce, validator
from toolfactory.formats.base import Malformed
from toolfactory.formats.bfcl_multi_turn import functions_of, ground_truth_calls, owners

CATEGORIES = ("base", "long_context", "miss_func", "miss_param")
REPO = Path(__file__).resolve().parents[1]
DEMO_TIMEOUT_S = 600

Call = tuple[dict[str, Any], dict[str, Any]]  # (the function's parameters, the arguments)


def ground_truth(category: str) -> Iterator[tuple[str, Call]]:
    """(a key naming the call, (its function's parameters, its arguments)) of every ground-truth call."""
    data = bfcl_data()
    name = f"BFCL_v4_multi_turn_{category}.json"
    answers = {a["id"]: a["ground_truth"] for a in map(json.loads, (data / "possible_answer" / name).read_text().splitlines())}
    for entry in map(json.loads, (data / name).read_text().splitlines()):
        entry["ground_truth"] = answers[entry["id"]]
        classes = list(entry.get("involved_classes") or [])
        owner = owners(classes)
        schemas = {fn.name: fn.parameters for cls in classes for fn in functions_of(cls)}
        try:
            turns = ground_truth_calls(entry)
        except Malformed as exc:
            print(f"{entry['id']}: {exc}", file=sys.stderr)
            continue
        for t, turn in enumerate(turns):
            for i, (function, arguments) in enumerate(turn):
                if function in owner and function in schemas:
                    yield f"{entry['id']}/{t}/{i}", (schemas[function], arguments)


def coerced_values(calls: list[Call]) -> dict[str, Any]:
    """How many of `calls` break their schema, and the values coercion changes, by kind."""
    kinds: Counter[str] = Counter()
    invalid = with_coercion = 0
    for schema, arguments in calls:
        invalid += not validator(schema).is_valid(arguments)
        found = coerce(schema, arguments)
        with_coercion += bool(found.coercions)
        kinds.update(c.kind for c in found.coercions)
    total = sum(kinds.values())
    return {"calls": len(calls), "calls_breaking_the_schema": invalid, "calls_coerced": with_coercion,
            "coerced_values": total, "by_kind": dict(sorted(kinds.items())),
            "coerced_per_1000_calls": round(1000 * total / len(calls), 2) if calls else None}


# Injections: (the parameter's schema, the value) -> the erring value, or None when it does not apply.
Injection = Callable[[dict[str, Any], Any, int], Any]


def _types(schema: dict[str, Any]) -> set[str]:
    declared = schema.get("type")
    return {declared} if isinstance(declared, str) else set(declared) if isinstance(declared, list) else set()


def _number_as_string(schema: dict[str, Any], value: Any, _: int) -> Any:
    if _types(schema) & {"integer", "number"} and isinstance(value, (int, float)) and not isinstance(value, bool):
        return json.dumps(value)
    return None


def _boolean_as_string(schema: dict[str, Any], value: Any, draw: int) -> Any:
    if "boolean" in _types(schema) and isinstance(value, bool):
        return str(value) if draw % 2 else json.dumps(value)  # "True" as Python writes it, or "true"
    return None


def _one_value_for_an_array(schema: dict[str, Any], value: Any, _: int) -> Any:
    return value[0] if "array" in _types(schema) and isinstance(value, list) and len(value) == 1 else None


def _fraction_for_an_integer(schema: dict[str, Any], value: Any, _: int) -> Any:
    return f"{value}.5" if "integer" in _types(schema) and isinstance(value, int) and not isinstance(value, bool) else None


def _yes_or_no(schema: dict[str, Any], value: Any, _: int) -> Any:
    return ("yes" if value else "no") if "boolean" in _types(schema) and isinstance(value, bool) else None


def _joined_values(schema: dict[str, Any], value: Any, _: int) -> Any:
    if "array" in _types(schema) and isinstance(value, list) and len(value) > 1:
        return ", ".join(map(str, value))
    return None


NEAR_MISSES: dict[str, Injection] = {"number": _number_as_string, "boolean": _boolean_as_string,
                                     "array": _one_value_for_an_array}
CONTROLS: dict[str, Injection] = {"fraction_for_integer": _fraction_for_an_integer, "yes_no_for_boolean": _yes_or_no,
                                  "joined_for_array": _joined_values}


def inject(key: str, call: Call, kind: str, injection: Injection) -> dict[str, Any] | None:
    """`call`'s arguments with one argument erring by `injection` (one chosen from a hash of
    `key` among those it applies to), or None when it applies to none."""
    schema, arguments = call
    properties = schema.get("properties") or {}
    draw = int(hashlib.sha256(f"{key}/{kind}".encode()).hexdigest(), 16)
    options = [(name, erring) for name, value in arguments.items() if isinstance(properties.get(name), dict)
               and (erring := injection(properties[name], value, draw)) is not None]
    if not options:
        return None
    name, erring = options[draw % len(options)]
    return {**arguments, name: erring}


def injected(keyed: list[tuple[str, Call]], kind: str, injection: Injection) -> dict[str, Any]:
    """What coercion makes of the valid ground-truth calls with one argument erring by `injection`."""
    outcomes: Counter[str] = Counter()
    values = 0
    for key, (schema, arguments) in keyed:
        if not validator(schema).is_valid(arguments):
            continue  # ground truth that breaks its schema already: no clean comparison
        erring = inject(key, (schema, arguments), kind, injection)
        if erring is None:
            continue
        if validator(schema).is_valid(erring):
            outcomes["still_valid"] += 1  # the schema does not tell: no error to fix
            continue
        found = coerce(schema, erring)
        values += len(found.coercions)
        if not found.coercions:
            outcomes["left_rejected"] += 1
        elif json.dumps(found.arguments, sort_keys=True) == json.dumps(arguments, sort_keys=True):
            outcomes["caught"] += 1
        else:
            outcomes["coerced_otherwise"] += 1
    broken = outcomes["caught"] + outcomes["coerced_otherwise"] + outcomes["left_rejected"]
    return {"injected_breaking_the_schema": broken, **{k: outcomes[k] for k in ("caught", "coerced_otherwise", "left_rejected",
                                                                                "still_valid")},
            "coerced_values": values, "coerced_per_1000_calls": round(1000 * values / broken, 1) if broken else None}


def demo(root: Path, run: bool) -> dict[str, Any]:
    """Run the demo into `root` (when `run`), then count its executed calls and coerced values."""
    tf = str(Path(sys.executable).with_name("toolfactory"))
    seconds = None
    if run:
        started = time.perf_counter()
        done = subprocess.run([tf, "run", "--config", str(REPO / "configs" / "quickstart.yaml"), "--set", f"storage.root={root}"],
                              capture_output=True, text=True, cwd=root, timeout=DEMO_TIMEOUT_S)
        seconds = round(time.perf_counter() - started, 1)
        if done.returncode not in (0, 1):
            sys.exit(f"the demo run exited with {done.returncode}: {done.stderr[-2000:]}")
    runs = sorted((root / "runs").glob("*/dialogues"), key=lambda p: p.stat().st_mtime)
    if not runs:
        sys.exit(f"no run under {root}")
    folder = runs[-1]
    executed: list[dict[str, Any]] = []
    answered_400 = 0
    for part in sorted(folder.glob("part-*.parquet")):
        for row in pq.read_table(part, columns=["record"]).to_pylist():
            record = json.loads(row["record"])
            calls = ((record.get("generation") or {}).get("execution") or {}).get("calls") or []
            executed += calls
            names = {str(c.get("name")) for c in calls}
            answered_400 += sum(1 for m in record.get("messages") or [] if m.get("role") == "tool" and m.get("name") in names
                                and (m.get("content") or "").startswith('{"status_code": 400'))
    for part in sorted((folder / "rejected").glob("*.parquet")):
        for row in pq.read_table(part, columns=["record"]).to_pylist():
            rejected = json.loads(row["record"])
            executed += (((rejected.get("record") or {}).get("execution")) or {}).get("calls") or []
    kinds = Counter(str(c.get("kind")) for call in executed for c in call.get("coercions") or [])
    run_id = folder.parent.name
    stats = json.loads(subprocess.run([tf, "stats", run_id, "--json", "--set", f"storage.root={root}"], check=True,
                                      capture_output=True, text=True, cwd=root).stdout)
    profile = next((s.get("profile") or {} for s in stats["stages"] if s["stage"] == "dialogues"), {})
    total = sum(kinds.values())
    return {
        "run_id": run_id, "run_seconds": seconds, "executed_calls": len(executed),
        "calls_coerced": sum(bool(call.get("coercions")) for call in executed),
        "coerced_values": total, "by_kind": dict(sorted(kinds.items())),
        "coerced_per_1000_executed_calls": round(1000 * total / len(executed), 2) if executed else None,
        "executable_calls_answered_400_in_kept_dialogues": answered_400,
        "stats": {dimension: counts for dimension, counts in sorted(profile.items())
                  if dimension.startswith("arg_coerced_") or dimension == "executed_calls_by_source"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-demo", action="store_true", help="skip the demo run")
    parser.add_argument("--demo-root", default=None, help="read the latest run of this storage root instead of running the demo")
    parser.add_argument("--out", default=str(RESULTS_DIR / "coercion.json"))
    args = parser.parse_args()
    started = time.perf_counter()
    keyed = {category: list(ground_truth(category)) for category in CATEGORIES}
    everything = [item for calls in keyed.values() for item in calls]
    truth = {category: coerced_values([call for _, call in calls]) for category, calls in keyed.items()}
    truth["all"] = coerced_values([call for _, call in everything])
    near = {kind: injected(everything, kind, injection) for kind, injection in {**NEAR_MISSES, **CONTROLS}.items()}
    bfcl_seconds = round(time.perf_counter() - started, 1)
    demo_result = None
    if not args.no_demo:
        if args.demo_root:
            demo_result = demo(Path(args.demo_root), run=False)
        else:
            with tempfile.TemporaryDirectory(prefix="toolfactory-coercion-") as folder:
                demo_result = demo(Path(folder), run=True)
    print(table(["BFCL ground truth", "calls", "break schema", "coerced calls", "coerced values", "per 1000 calls"],
                [(c, r["calls"], r["calls_breaking_the_schema"], r["calls_coerced"], r["coerced_values"], r["coerced_per_1000_calls"])
                 for c, r in truth.items()]))
    print()
    print(table(["injected", "breaking", "caught", "otherwise", "left 400", "still valid", "per 1000 calls"],
                [(k, r["injected_breaking_the_schema"], r["caught"], r["coerced_otherwise"], r["left_rejected"], r["still_valid"],
                  r["coerced_per_1000_calls"]) for k, r in near.items()]))
    if demo_result is not None:
        print()
        print(f"demo {demo_result['run_id']}: {demo_result['executed_calls']} executed calls, {demo_result['coerced_values']} "
              f"coerced values ({demo_result['coerced_per_1000_executed_calls']} per 1000), "
              f"{demo_result['executable_calls_answered_400_in_kept_dialogues']} executable calls answered with the 400; "
              f"stats: {demo_result['stats']}")
    write_json(Path(args.out), {"machine": machine_info(), "bfcl_seconds": bfcl_seconds, "bfcl_ground_truth": truth,
                                "injected": near, "demo": demo_result})


if __name__ == "__main__":
    main()
