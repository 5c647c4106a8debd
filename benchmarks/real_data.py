"""The verifier's accuracy on data it did not make, and its end-to-end speed next to the rule layer's.

    python -m benchmarks.real_data [--data DIR] [--records N] [--repeats R] [--out PATH]

1. **Accuracy.** `toolfactory verify` (validity rules, no policy) on each released dataset under
   ``--data`` (default: the shared data folder next to the project) and on BFCL- and xLAM-style
   records built here from public function docs (dotted names, ``type: dict``, ``float``,
   ``tuple``, ``any``, array-item enums, optional defaults). Every record the rules reject is
   matched against :data:`EXPLANATIONS` and printed as a true defect of the data or a known limit;
   a rejection no explanation matches is printed as UNEXPLAINED (the figure to keep at 0).
2. **Speed.** N xLAM-sized records (:mod:`benchmarks.xlam_corpus`: 1 to 5 of 1,000 distinct APIs
   per record, 1 to 3 calls with values drawn per record, about 1.8 KB each) written as xLAM JSONL
   are verified end to end (reading, converting, checking, writing the report files) with
   :func:`~toolfactory.stages.verify.report.verify_file`, and the same records, already read,
   through the rule layer alone (:func:`~toolfactory.stages.verify.rules.check`), in one process
   pinned to one core; the two run alternately R times and the medians are reported with their
   ratio (the first, cold pass, which compiles each API's schema, is reported apart). Then,
   unpinned, end to end with ``--workers 1`` and ``--workers N`` (N = every core) alternately,
   reported per second, per worker, and per CPU-second (parent and worker processes' CPU time
   together: the figure a busy machine does not distort). Both measures run on corpora where
   every API is new too (``xlam_corpus.records(apis=None)``: no two records share a function, a
   fresh corpus for every pass), side by side with the recurring ones.

Writes ``benchmarks/results/real_data.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks import xlam_corpus
from benchmarks._common import RESULTS_DIR, machine_info, median, table, write_json
from toolfactory.formats import read
from toolfactory.models import Dialogue
from toolfactory.stages.verify.report import verify_file
from toolfactory.stages.verify.rules import check

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

# (dataset, rule code, pattern on the message) -> (kind, why). Kinds: "defect" (the data is wrong),
# "limit" (the data follows a convention a call-level check cannot honour).
EXPLANATIONS: list[tuple[str, str, str, str, str]] = [
    ("toolalpaca-golden", "call_arguments_not_json", r"", "limit",
     "golden answers chain steps with ${...} templates (the next step's input from the last result), not JSON"),
    ("toolalpaca-golden", "call_unknown_function", r"'getDetails'", "limit",
     "ToolAlpaca's 'getDetails' action asks the user for details; it is no API operation"),
    ("toolalpaca-golden", "call_unknown_function", r"'\[Optional\]", "limit",
     "ToolAlpaca marks an optional golden step with '[Optional]' before the name (its arguments are checked)"),
    ("toolalpaca-golden", "call_argument_enum", r"'' is not one of", "defect",
     "an optional enum parameter sent as the empty string, which the API's enum does not allow"),
    ("toolalpaca-golden", "call_missing_required", r"'query'", "defect",
     "AniAPI searchAnime called without its required 'query' (the golden answer passes 'filter' instead)"),
    ("toolalpaca-golden", "call_unknown_argument", r"'filter'", "defect",
     "AniAPI searchAnime has no 'filter' parameter"),
    ("toolbench-tree", "dialogue_no_final_answer", r"", "defect",
     "a search path that gave up (give_up_and_restart) or was abandoned: it ends without an answer"),
    ("toolbench-tree", "call_unknown_function", r"invalid_hallucination_function_name", "defect",
     "ToolBench's own marker for a hallucinated function name"),
    ("toolbench-tree", "call_unknown_function", r"", "defect",
     "the model called an API the query does not offer (authenticate_*, login): a hallucinated name"),
]

# BFCL-style function docs (the shapes of BFCL's simple/multiple/parallel categories) with calls.
BFCL_DOCS: list[dict[str, Any]] = [
    {"name": "math.factorial", "description": "Calculate the factorial of a number.",
     "parameters": {"type": "dict", "properties": {"number": {"type": "integer", "description": "The number."}}, "required": ["number"]}},
    {"name": "requests.get", "description": "Send a GET request to a URL.",
     "parameters": {"type": "dict", "properties": {
         "url": {"type": "string"}, "params": {"type": "dict", "properties": {}, "description": "Query parameters."},
         "timeout": {"type": "float", "default": 10.0}}, "required": ["url"]}},
    {"name": "calendar.schedule", "description": "Schedule events on weekdays.",
     "parameters": {"type": "dict", "properties": {
         "days": {"type": "array", "items": {"type": "string"}, "enum": ["Mon", "Tue", "Wed", "Thu", "Fri"]},
         "slot": {"type": "tuple", "items": {"type": "integer"}, "description": "(start hour, end hour)"},
         "note": {"type": "any", "description": "Anything to attach."}}, "required": ["days"]}},
    {"name": "geometry.circle_area", "description": "Area of a circle.",
     "parameters": {"type": "dict", "properties": {"radius": {"type": "float"}, "units": {"type": "string", "default": "cm"}},
                    "required": ["radius"]}},
]
BFCL_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("math.factorial", {"number": 5}),
    ("requests.get", {"url": "https://api.example.com/items", "params": {"page": 2}, "timeout": 5}),
    ("calendar.schedule", {"days": ["Mon", "Wed"], "slot": [9, 11], "note": {"room": "B2"}}),
    ("geometry.circle_area", {"radius": 2.5}),
    ("calendar.schedule", {"days": ["Fri"]}),
]
# xLAM-style docs: APIGen's flat {param: {type, description, default}} with Python type names.
XLAM_TOOLS: list[dict[str, Any]] = [
    {"name": "stock.quote", "description": "Latest quote of a ticker.",
     "parameters": {"symbol": {"type": "str", "description": "Ticker."}, "exchange": {"type": "str, optional", "default": "NASDAQ"}}},
    {"name": "weather_forecast", "description": "Forecast for a city.",
     "parameters": {"city": {"type": "str"}, "days": {"type": "int, optional", "default": 3}, "hourly": {"type": "bool", "default": False}}},
    {"name": "list_utils.merge", "description": "Merge two sorted lists.",
     "parameters": {"a": {"type": "List[int]"}, "b": {"type": "List[int]"}, "key": {"type": "Optional[str]", "default": None}}},
]
XLAM_CALLS: list[list[dict[str, Any]]] = [
    [{"name": "stock.quote", "arguments": {"symbol": "AAPL"}}],
    [{"name": "weather_forecast", "arguments": {"city": "Lyon", "days": 5}}, {"name": "stock.quote", "arguments": {"symbol": "MSFT", "exchange": "NYSE"}}],
    [{"name": "list_utils.merge", "arguments": {"a": [1, 3], "b": [2, 4]}}],
    [{"name": "weather_forecast", "arguments": {"city": "Oslo", "hourly": True}}],
]


def bfcl_file(folder: Path) -> Path:
    path = folder / "bfcl_style.jsonl"
    tools = [{"type": "function", "function": doc} for doc in BFCL_DOCS]
    with path.open("w") as out:
        for n, (name, arguments) in enumerate(BFCL_CALLS):
            call = {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            messages = [{"role": "user", "content": f"Request {n}"}, {"role": "assistant", "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": f"c{n}", "content": "{\"result\": \"ok\"}"},
                        {"role": "assistant", "content": "Done: the result is ok."}]
            out.write(json.dumps({"messages": messages, "tools": tools}) + "\n")
    return path


def xlam_records(n: int) -> list[dict[str, Any]]:
    return [{"id": i, "query": f"Request number {i}: {json.dumps(XLAM_CALLS[i % len(XLAM_CALLS)])[:60]}",
             "tools": json.dumps(XLAM_TOOLS), "answers": json.dumps(XLAM_CALLS[i % len(XLAM_CALLS)])} for i in range(n)]


def xlam_file(folder: Path, n: int, name: str = "xlam_style.jsonl") -> Path:
    path = folder / name
    path.write_text("".join(json.dumps(record) + "\n" for record in xlam_records(n)))
    return path


def explain(dataset: str, code: str, message: str) -> tuple[str, str]:
    for name, rule, pattern, kind, why in EXPLANATIONS:
        if name == dataset and rule == code and re.search(pattern, message):
            return kind, why
    return "UNEXPLAINED", message[:100]


def accuracy(data: Path, work: Path) -> list[dict[str, Any]]:
    datasets: list[tuple[str, Path, str, dict[str, Any]]] = [
        ("bfcl-style", bfcl_file(work), "openai", {}),
        ("xlam-style", xlam_file(work, len(XLAM_CALLS)), "xlam", {}),
    ]
    if (data / "toolbench").is_dir():
        answers = data / "toolbench/answer/G1_answer"
        datasets += [("toolbench-released", answers, "toolbench", {}), ("toolbench-tree", answers, "toolbench", {"paths": "all"})]
    if (data / "toolalpaca").is_dir():
        datasets.append(("toolalpaca-golden", data / "toolalpaca/eval_simulated.json", "toolalpaca", {}))
    out = []
    for name, path, fmt, options in datasets:
        folder = work / name
        report = verify_file(path, fmt, folder, **options)
        reasons: Counter[tuple[str, str, str]] = Counter()
        for line in (folder / "rejected.jsonl").read_text().splitlines():
            record = json.loads(line)
            for error in record["errors"]:
                reasons[(error["code"], *explain(name, error["code"], error["message"]))] += 1
        out.append({"dataset": name, "format": fmt, "records": report["records"], "parsed": report["parsed"],
                    "format_errors": report["format_errors"], "valid": report["accepted"], "share_valid": report["pass_rate"],
                    "warnings": report["warnings"],
                    "rejections": [{"code": c, "kind": k, "why": w, "findings": n} for (c, k, w), n in reasons.most_common()]})
    return out


def pin_one_core() -> set[int]:
    """Pin to one core; the cores there were."""
    cores = set(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {min(cores)})
    return cores


def new_api_files(work: Path, n: int, count: int) -> list[Path]:
    """`count` corpora of `n` records where no two records share an API, none sharing one with
    another (a seed each): every pass over one meets only functions it has not seen."""
    return [xlam_corpus.write(work / f"new-apis-{k}.jsonl", n, seed=1 + k, apis=None) for k in range(count)]


def speed(work: Path, n: int, repeats: int) -> dict[str, Any]:
    path = xlam_corpus.write(work / "speed.jsonl", n)
    fresh = new_api_files(work, n, repeats)
    start = time.perf_counter()
    verify_file(path, "xlam", work / "speed-cold")
    cold = n / (time.perf_counter() - start)
    dialogues = [item for item in read(path, "xlam") if isinstance(item, Dialogue)]
    end_to_end: list[float] = []
    rules_only: list[float] = []
    new_apis: list[float] = []
    for r in range(repeats):
        start = time.perf_counter()
        verify_file(path, "xlam", work / f"speed-{r}")
        end_to_end.append(n / (time.perf_counter() - start))
        start = time.perf_counter()
        for dialogue in dialogues:
            check(dialogue, policy=None)
        rules_only.append(len(dialogues) / (time.perf_counter() - start))
        start = time.perf_counter()
        verify_file(fresh[r], "xlam", work / f"new-apis-{r}")
        new_apis.append(n / (time.perf_counter() - start))
    e2e, rules, new = median(end_to_end), median(rules_only), median(new_apis)
    return {"records": n, "repeats": repeats, "end_to_end_per_s_per_core": round(e2e), "rules_only_per_s_per_core": round(rules),
            "ratio_end_to_end_to_rules": round(e2e / rules, 3), "cold_first_pass_per_s": round(cold),
            "bytes_per_record": round(path.stat().st_size / n),
            "new_apis_end_to_end_per_s_per_core": round(new), "ratio_new_apis_to_recurring": round(new / e2e, 3),
            "new_apis_bytes_per_record": round(fresh[0].stat().st_size / n)}


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def parallel_speed(work: Path, n: int, repeats: int, cores: set[int]) -> dict[str, Any]:
    """`--workers 1` and `--workers N` alternately, unpinned (worker processes are forked from this
    one), on the corpus whose APIs recur and on corpora of new APIs (a fresh one for every run)."""
    os.sched_setaffinity(0, cores)
    workers = len(cores)
    fresh = new_api_files(work, n, 2 * repeats)
    out: dict[str, Any] = {"workers": workers}
    for corpus in ("recurring", "new_apis"):
        rates: dict[int, list[float]] = {1: [], workers: []}
        cpu: dict[int, list[float]] = {1: [], workers: []}
        for r in range(repeats):
            for k, w in enumerate(rates):
                path = work / "speed.jsonl" if corpus == "recurring" else fresh[2 * r + k]
                cpu_before, start = _cpu_seconds(), time.perf_counter()
                verify_file(path, "xlam", work / f"parallel-{corpus}-{w}-{r}", workers=w)
                rates[w].append(n / (time.perf_counter() - start))
                cpu[w].append(n / (_cpu_seconds() - cpu_before))
        one, many = median(rates[1]), median(rates[workers])
        figures = {"end_to_end_per_s": round(many), "end_to_end_per_s_per_core": round(many / workers),
                   "per_cpu_second": round(median(cpu[workers])), "one_worker_per_s": round(one),
                   "one_worker_per_cpu_second": round(median(cpu[1])), "speed_up": round(many / one, 2)}
        if corpus == "recurring":
            out.update(figures)  # the figures' names before corpora of new APIs were measured too
        else:
            out["new_apis"] = figures
    out["load_average"] = round(os.getloadavg()[0], 2)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "real_data.json")
    args = parser.parse_args(argv)
    cores = pin_one_core()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        datasets = accuracy(args.data, work)
        timing = speed(work, args.records, args.repeats)
        timing["parallel"] = parallel_speed(work, args.records, args.repeats, cores)
    print(table(["dataset", "records", "parsed", "valid", "share valid", "format errors"],
                [[d["dataset"], d["records"], d["parsed"], d["valid"], f"{d['share_valid']:.1%}",
                  ", ".join(f"{k}={v}" for k, v in d["format_errors"].items()) or "-"] for d in datasets]))
    print()
    for d in datasets:
        for r in d["rejections"]:
            print(f"{d['dataset']:<20} {r['code']:<26} {r['findings']:>3}  {r['kind']:<11} {r['why']}")
    unexplained = sum(r["findings"] for d in datasets for r in d["rejections"] if r["kind"] == "UNEXPLAINED")
    print(f"\nunexplained rejections: {unexplained}")
    print(f"\nspeed on {timing['records']} xLAM-sized records ({timing['bytes_per_record']} bytes each), one core, median of "
          f"{timing['repeats']}: end to end {timing['end_to_end_per_s_per_core']}/s, rule layer alone "
          f"{timing['rules_only_per_s_per_core']}/s (ratio {timing['ratio_end_to_end_to_rules']}); "
          f"cold first pass {timing['cold_first_pass_per_s']}/s")
    print(f"every API new ({timing['new_apis_bytes_per_record']} bytes a record, no two records share a function): "
          f"end to end {timing['new_apis_end_to_end_per_s_per_core']}/s, {timing['ratio_new_apis_to_recurring']} of the "
          f"recurring APIs' rate")
    par = timing["parallel"]
    for label, figures in (("recurring APIs", par), ("every API new", par["new_apis"])):
        print(f"unpinned, {label}: --workers 1: {figures['one_worker_per_s']}/s; --workers {par['workers']}: "
              f"{figures['end_to_end_per_s']}/s (x{figures['speed_up']}), {figures['end_to_end_per_s_per_core']}/s per worker, "
              f"{figures['per_cpu_second']} per CPU-second (parent and workers; one worker: {figures['one_worker_per_cpu_second']})")
    print(f"load average {par['load_average']:.1f}")
    result = {"machine": machine_info(), "datasets": datasets, "unexplained": unexplained, "speed": timing}
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
