"""Throughput of the tools stage's import path, per source format, on volumes built from real files.

    python -m benchmarks.imports [--rounds R] [--toolbench N] [--toolbench-examples N] [--toolalpaca N]
                                 [--openapi N] [--openai N] [--catalog N] [--no-pin] [--out PATH]

1. Builds one workload per format in a temporary folder, each replica renamed (tool names, and
   function names or operationIds) so that no two functions are equal, as in a real pool, and the
   definition checks' content cache never hits:
   ``toolbench`` (the tools of ToolBench's G1 query file, as a query file), ``toolbench+examples``
   (the same tools with a response example file each, whose schemas are the real examples', see
   ``SourceFile.response_examples``), ``toolalpaca`` (``eval_simulated.json``), ``openapi``
   (``tests/data/petshelter_openapi.yaml``, one file per document), ``openai`` (the seed
   catalog's functions as an OpenAI ``tools`` file) and ``catalog`` (the seed catalog, YAML).
2. Measures each format in a fresh process, pinned to one CPU unless ``--no-pin``. Each round
   times (``time.perf_counter``) ``read_sources`` (the driver: load, split, ids) and then
   ``import_items`` (a shard: conversion and definition checks; the real stage function, whose
   two steps are wrapped to add up their own time, so that the cost of the checks relative to
   conversion is measured side by side in one pass, under the same machine load). The checks'
   cache is emptied before each pass. Medians over R rounds are reported.
3. Peak RSS is ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of the format's process at the end,
   and its growth over the peak before the workload was read (which leaves the imports out).

Writes ``benchmarks/results/imports.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from benchmarks._common import REAL_DATA, RESULTS_DIR, machine_info, median, require_real_data, table, write_json

REPO = Path(__file__).resolve().parents[1]
G1_QUERIES = REAL_DATA / "toolbench" / "instruction" / "G1_query.json"
RESPONSE_EXAMPLES = REAL_DATA / "toolbench" / "response_examples"
TOOLALPACA = REAL_DATA / "toolalpaca" / "eval_simulated.json"
PETSHELTER = REPO / "tests" / "data" / "petshelter_openapi.yaml"

FORMATS = ("toolbench", "toolbench+examples", "toolalpaca", "openapi", "openai", "catalog")


# --- workloads --------------------------------------------------------------------------------


def _toolbench_tools(count: int) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(category, tool name, query-file api entries) of `count` renamed copies of G1's tools."""
    by_tool: dict[str, list[dict[str, Any]]] = {}
    for query in json.loads(G1_QUERIES.read_text()):
        for api in query["api_list"]:
            entries = by_tool.setdefault(api["tool_name"], [])
            if api["api_name"] not in {e["api_name"] for e in entries}:
                entries.append(api)
    originals = list(by_tool.items())
    tools = []
    for n in range(count):
        name, apis = originals[n % len(originals)]
        renamed = f"{name} {n:05d}"
        tools.append((apis[0]["category_name"], renamed, [{**api, "tool_name": renamed} for api in apis]))
    return tools


def _real_example_schemas() -> list[Any]:
    schemas = []
    for path in sorted(RESPONSE_EXAMPLES.glob("*/*.json")):
        try:
            schemas += [api["schema"] for api in json.loads(path.read_text())["api_list"] if api["schema"]]
        except (ValueError, KeyError):
            continue  # the released data holds one empty file
    return schemas


def build_toolbench(folder: Path, count: int, with_examples: bool) -> list[dict[str, Any]]:
    tools = _toolbench_tools(count)
    queries = [{"query": f"Use {name}.", "query_id": n, "api_list": apis} for n, (_, name, apis) in enumerate(tools)]
    path = folder / "G1_query_replicated.json"
    path.write_text(json.dumps(queries))
    if not with_examples:
        return [{"path": str(path), "format": "toolbench"}]
    from toolfactory.stages.tools.sources import _toolbench_standardize

    schemas = _real_example_schemas()
    examples = folder / "response_examples"
    for n, (category, name, apis) in enumerate(tools):
        target = examples / category / f"{_toolbench_standardize(name)}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        api_list = [{"name": api["api_name"], "schema": schemas[(n + i) % len(schemas)]} for i, api in enumerate(apis)]
        target.write_text(json.dumps({"api_list": api_list}))
    return [{"path": str(path), "format": "toolbench", "response_examples": str(examples)}]


def build_toolalpaca(folder: Path, count: int) -> list[dict[str, Any]]:
    originals = json.loads(TOOLALPACA.read_text())
    entries = []
    for n in range(count):
        entry = dict(originals[n % len(originals)])
        document = json.loads(entry["Documentation"])
        for operations in document.get("paths", {}).values():
            for op in operations.values():
                if isinstance(op, dict) and "operationId" in op:
                    op["operationId"] = f"{op['operationId']}_{n:05d}"
        entry["Name"] = f"{entry['Name']} {n:05d}"
        entry["Documentation"] = json.dumps(document)
        entries.append(entry)
    path = folder / "toolalpaca_replicated.json"
    path.write_text(json.dumps(entries))
    return [{"path": str(path), "format": "toolalpaca"}]


def build_openapi(folder: Path, count: int) -> list[dict[str, Any]]:
    original = yaml.safe_load(PETSHELTER.read_text())
    files = []
    for n in range(count):
        document = json.loads(json.dumps(original))
        document["info"]["title"] = f"{document['info']['title']} {n:05d}"
        for operations in document["paths"].values():
            for op in operations.values():
                op["operationId"] = f"{op['operationId']}_{n:05d}"
        path = folder / "openapi" / f"petshelter_{n:05d}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        files.append({"path": str(path), "format": "openapi"})
    return files


def build_openai(folder: Path, count: int) -> list[dict[str, Any]]:
    from toolfactory.catalog import load_seed_catalog

    functions = [fn for tool in load_seed_catalog() for fn in tool.functions]
    tools = []
    for n in range(count):
        spec = functions[n % len(functions)].openai_tool()
        spec["function"] = {**spec["function"], "name": f"{spec['function']['name']}_{n:05d}"}
        tools.append(spec)
    path = folder / "openai_tools.json"
    path.write_text(json.dumps({"tools": tools}))
    return [{"path": str(path), "format": "openai"}]


def build_catalog(folder: Path, count: int) -> list[dict[str, Any]]:
    from toolfactory.catalog import load_seed_catalog

    originals = [tool.model_dump(mode="json", exclude={"id"}) for tool in load_seed_catalog()]
    tools = []
    for n in range(count):
        tool = json.loads(json.dumps(originals[n % len(originals)]))
        tool["name"] = f"{tool['name']} {n:05d}"
        for fn in tool["functions"]:
            fn["name"] = f"{fn['name']}_{n:05d}"
        tools.append(tool)
    path = folder / "catalog_replicated.yaml"
    path.write_text(yaml.safe_dump({"tools": tools}, sort_keys=False, allow_unicode=True))
    return [{"path": str(path), "format": "catalog"}]


def build_workloads(folder: Path, sizes: dict[str, int]) -> dict[str, list[dict[str, Any]]]:
    return {
        "toolbench": build_toolbench(_made(folder / "toolbench"), sizes["toolbench"], with_examples=False),
        "toolbench+examples": build_toolbench(_made(folder / "toolbench_examples"), sizes["toolbench+examples"], with_examples=True),
        "toolalpaca": build_toolalpaca(_made(folder / "toolalpaca"), sizes["toolalpaca"]),
        "openapi": build_openapi(folder, sizes["openapi"]),
        "openai": build_openai(_made(folder / "openai"), sizes["openai"]),
        "catalog": build_catalog(_made(folder / "catalog"), sizes["catalog"]),
    }


def _made(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# --- one format, in its own process ----------------------------------------------------------


def _peak_rss_mb() -> float:
    # ru_maxrss survives fork and exec: the parent stays small (it imports no toolfactory and
    # builds the workloads in a child of its own), so that a child's figure is its own.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


class _Timed:
    """Wraps a function of the stage module to add up its time (and what it returns, for counts)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.seconds = 0.0
        self.calls = 0
        self.results: list[Any] = []

    def __call__(self, *args: Any) -> Any:
        start = time.perf_counter()
        try:
            result = self.fn(*args)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1
        self.results.append(result)
        return result

    def reset(self) -> None:
        self.seconds, self.calls, self.results = 0.0, 0, []


def measure(label: str, files: list[dict[str, Any]], rounds: int, pin: bool) -> dict[str, Any]:
    """Medians of `rounds` rounds of read_sources and import_items (see the module doc)."""
    from toolfactory.config import SourceFile, ToolsConfig
    from toolfactory.stages.tools import stage
    from toolfactory.definitions.validity import _function_problems
    from toolfactory.stages.tools.sources import read_sources

    cpu = None
    if pin and hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
    # This process is the benchmark's own: the stage's two steps are wrapped in place, so that one
    # pass of the real import_items gives its total and the split between them, side by side.
    convert = stage.convert = _Timed(stage.convert)  # type: ignore[assignment]
    check = stage.definition_problems = _Timed(stage.definition_problems)  # type: ignore[assignment]
    builtins_off = {name: False for name in ToolsConfig.model_fields if name.startswith("builtin_")}
    config = ToolsConfig(files=[SourceFile(**f) for f in files], **builtins_off)
    peak_before = _peak_rss_mb()
    read_s, import_s, convert_s, check_s = [], [], [], []
    items: list[Any] = []
    out: Any = None
    for _ in range(rounds):
        items, out = [], None  # one round's items and tools alive at a time, as in a shard
        convert.reset()
        check.reset()
        _function_problems.cache_clear()  # every function is new to a shard's process
        start = time.perf_counter()
        items = read_sources(config)
        read_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        out = stage.import_items(items)
        import_s.append(time.perf_counter() - start)
        if convert.calls != len(items) or check.calls == 0:
            raise SystemExit("import_items no longer calls stage.convert and stage.definition_problems: update the benchmark")
        convert_s.append(convert.seconds)
        check_s.append(check.seconds)
    n_items = len(items)
    n_tools = sum(len(tools) for tools in convert.results)
    n_functions = sum(len(tool.functions) for tools in convert.results for tool in tools)
    ratios = [c / v for c, v in zip(check_s, convert_s)]
    return {
        "format": label,
        "pinned_cpu": cpu,
        "files": len(files),
        "items": n_items,
        "tools": n_tools,
        "functions": n_functions,
        "accepted": len(out.records),
        "rejections": dict(out.rejections()),
        "returns_from_examples": sum(1 for tool in out.records if tool.provenance.get("returns_from") == "response_examples"),
        "stored_items_mb": round(sum(len(item.model_dump_json()) for item in items) / 2**20, 2),
        "read_s": round(median(read_s), 4),
        "import_s": round(median(import_s), 4),
        "convert_s": round(median(convert_s), 4),
        "check_s": round(median(check_s), 4),
        "read_items_per_s": round(n_items / median(read_s), 1),
        "import_items_per_s": round(n_items / median(import_s), 1),
        "import_tools_per_s": round(n_tools / median(import_s), 1),
        "import_functions_per_s": round(n_functions / median(import_s), 1),
        "end_to_end_tools_per_s": round(n_tools / median([r + i for r, i in zip(read_s, import_s)]), 1),
        "check_over_convert": round(median(ratios), 3),
        "check_over_convert_rounds": [round(r, 3) for r in ratios],
        "check_share_of_import": round(median([c / i for c, i in zip(check_s, import_s)]), 3),
        "convert_us_per_tool": round(1e6 * median(convert_s) / max(n_tools, 1), 1),
        "check_us_per_function": round(1e6 * median(check_s) / max(n_functions, 1), 1),
        "peak_rss_before_mb": round(peak_before, 1),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "peak_rss_growth_mb": round(_peak_rss_mb() - peak_before, 1),
        "rounds_s": {"read": read_s, "import": import_s, "convert": convert_s, "check": check_s},
    }


# --- report ----------------------------------------------------------------------------------


def report(results: list[dict[str, Any]], rounds: int) -> str:
    rows = [
        [r["format"], r["items"], r["tools"], r["functions"], r["accepted"], r["read_items_per_s"], r["import_items_per_s"],
         r["import_tools_per_s"], r["import_functions_per_s"], r["end_to_end_tools_per_s"], r["peak_rss_mb"], r["peak_rss_growth_mb"]]
        for r in results
    ]
    split = [
        [r["format"], r["convert_us_per_tool"], r["check_us_per_function"], r["check_over_convert"],
         f"{min(r['check_over_convert_rounds']):.1f}..{max(r['check_over_convert_rounds']):.1f}", r["check_share_of_import"]]
        for r in results
    ]
    pinned = results and results[0]["pinned_cpu"] is not None
    return "\n".join([
        f"import path (median of {rounds} rounds; a fresh process per format{', pinned to one CPU' if pinned else ''})",
        "",
        table(["format", "items", "tools", "functions", "accepted", "read items/s", "import items/s", "import tools/s",
               "import fn/s", "read+import tools/s", "peak RSS MB", "growth MB"], rows),
        "",
        "definition checks vs conversion, side by side in each import_items pass:",
        table(["format", "convert us/tool", "check us/fn", "check/convert", "rounds", "check share of import"], split),
    ])


def _in_fresh_process(fn: Callable[..., Any], *args: Any) -> Any:
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.imports", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--toolbench", type=int, default=1000, help="ToolBench tools (G1's tools, renamed copies)")
    parser.add_argument("--toolbench-examples", type=int, default=500, help="ToolBench tools with response examples")
    parser.add_argument("--toolalpaca", type=int, default=500, help="ToolAlpaca tools (eval_simulated, renamed copies)")
    parser.add_argument("--openapi", type=int, default=500, help="OpenAPI documents (petshelter, renamed copies)")
    parser.add_argument("--openai", type=int, default=2000, help="OpenAI tools (the seed catalog's functions)")
    parser.add_argument("--catalog", type=int, default=500, help="catalog tools (the seed catalog's, YAML)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin each format's process to one CPU")
    parser.add_argument("--out", default=str(RESULTS_DIR / "imports.json"))
    args = parser.parse_args(argv)
    require_real_data("toolbench/instruction", "toolbench/response_examples", "toolalpaca")
    sizes = {"toolbench": args.toolbench, "toolbench+examples": args.toolbench_examples, "toolalpaca": args.toolalpaca,
             "openapi": args.openapi, "openai": args.openai, "catalog": args.catalog}

    started = time.perf_counter()
    load_start = os.getloadavg()
    folder = Path(tempfile.mkdtemp(prefix="toolfactory-bench-imports-"))
    try:
        workloads = _in_fresh_process(build_workloads, folder, sizes)
        build_s = time.perf_counter() - started
        print(f"workloads built in {build_s:.1f} s under {folder}", file=sys.stderr)
        results = []
        for label in FORMATS:
            # A fresh process per format: its peak RSS is its own, and no cache carries over.
            result = _in_fresh_process(measure, label, workloads[label], args.rounds, not args.no_pin)
            print(f"{label}: {result['tools']} tools in {result['read_s'] + result['import_s']:.2f} s", file=sys.stderr)
            results.append(result)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(report(results, args.rounds))
    data = {
        "benchmark": "imports",
        "machine": machine_info(),
        "loadavg_start": [round(x, 2) for x in load_start],
        "params": {"rounds": args.rounds, "sizes": sizes, "pinned": not args.no_pin},
        "build_s": round(build_s, 2),
        "formats": results,
        "total_s": round(time.perf_counter() - started, 1),
    }
    path = write_json(args.out, data)
    print(f"\nwrote {path} (total {data['total_s']} s)")
    return data


if __name__ == "__main__":
    main()
