"""Builds the evaluation sets shipped for decontamination: ToolBench's test queries and
ToolAlpaca's evaluation instructions, as ``toolfactory/curation/benchmarks/<set>.jsonl.gz``.

    python -m benchmarks.contamination_index --toolbench DIR_OR_FILE … --toolalpaca FILE …

``--toolbench``: ToolBench's test query files, ``G1_instruction.json`` … ``G3_instruction.json``
(a list of ``{query, query_id, api_list, "relevant APIs"}`` each): the ``data/test_instruction``
folder of ToolBench's data release, or StableToolBench's ``solvable_queries/test_instruction``
(the queries of that release its authors could still solve, with the same ids). Each query is an
item ``<file stem>/<query_id>`` naming the APIs it needs (``relevant APIs``).

``--toolalpaca``: ToolAlpaca's evaluation files, ``data/eval_simulated.json`` and
``data/eval_real.json`` (tools with ``Instructions`` and ``Golden_Answers``); default: the
``toolalpaca/eval_simulated.json`` of the papers' released data (``TOOLFACTORY_REAL_DATA``). Each
instruction is an item ``<file stem>/<tool>/<n>`` naming the actions of its golden answer.

Both are Apache-2.0, so the items are shipped as text (a few hundred kB), and the index is
computed from them where it is used; the output is deterministic (sorted, gzip without a
timestamp). ``PROVENANCE.md`` beside the files lists each input with its SHA-256.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any, Iterable

from benchmarks._common import REAL_DATA
from toolfactory.curation.evaluation_sets import SHIPPED, function_name

UPSTREAM = {
    "toolbench": ("ToolBench (ToolLLM, OpenBMB), test queries of G1_instruction, G1_category, G1_tool, "
                  "G2_instruction, G2_category and G3_instruction", "Apache-2.0",
                  "StableToolBench's `solvable_queries/test_instruction/*.json` "
                  "(https://github.com/THUNLP-MT/StableToolBench, commit 08ea700e07a53cfaf31fd7b222e823ff651619a4): "
                  "the solvable subset of ToolBench's released test queries, same query ids"),
    "toolalpaca": ("ToolAlpaca, evaluation sets (simulated and real APIs)", "Apache-2.0",
                   "`data/eval_simulated.json` and `data/eval_real.json` of https://github.com/tangqiaoyu/ToolAlpaca "
                   "(commit ab41a7d3401870a2e71a77d5a08a6a6e7787e9f8)"),
}


def _files(paths: Iterable[str]) -> list[Path]:
    out: list[Path] = []
    for name in paths:
        path = Path(name)
        out += sorted(path.glob("*.json")) if path.is_dir() else [path]
    return out


def toolbench_items(files: list[Path]) -> list[dict[str, Any]]:
    items = []
    for path in files:
        for query in json.loads(path.read_text(encoding="utf-8")):
            relevant = [pair[1] for pair in query.get("relevant APIs") or [] if len(pair) == 2]
            names = relevant or [api.get("api_name", "") for api in query.get("api_list") or []]
            items.append({"id": f"{path.stem}/{query['query_id']}", "turns": [query["query"]],
                          "functions": sorted({function_name(n) for n in names} - {""})})
    return items


def toolalpaca_items(files: list[Path]) -> list[dict[str, Any]]:
    items = []
    for path in files:
        for tool in json.loads(path.read_text(encoding="utf-8")):
            answers = tool.get("Golden_Answers") or []
            for n, instruction in enumerate(tool.get("Instructions") or []):
                steps = answers[n] if n < len(answers) and isinstance(answers[n], list) else []
                names = {function_name(str(step.get("Action", ""))) for step in steps if isinstance(step, dict)}
                items.append({"id": f"{path.stem}/{tool['Name']}/{n}", "turns": [instruction],
                              "functions": sorted(names - {""})})
    return items


def write_set(name: str, items: list[dict[str, Any]], out: Path) -> Path:
    path = out / f"{name}.jsonl.gz"
    text = "".join(json.dumps(item, ensure_ascii=False, sort_keys=True) + "\n" for item in sorted(items, key=lambda i: i["id"]))
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as gz:
        gz.write(text.encode("utf-8"))
    path.write_bytes(buffer.getvalue())
    return path


def provenance(inputs: dict[str, list[Path]], counts: dict[str, int], sizes: dict[str, int]) -> str:
    lines = ["# Evaluation sets shipped for decontamination", "",
             "Made by `python -m benchmarks.contamination_index` (see its docstring); read by",
             "`toolfactory/curation/evaluation_sets.py`. One JSON line per test item:",
             '`{"id", "turns": [user text], "functions": [normalised names of the functions it needs]}`.',
             "BFCL is not here: it is read from the installed bfcl-eval package.", ""]
    for name, files in inputs.items():
        what, licence, origin = UPSTREAM[name]
        lines += [f"## {name}.jsonl.gz", "", f"- what: {what}", f"- licence: {licence} (attribution kept here)",
                  f"- from: {origin}", f"- items: {counts[name]}; file: {sizes[name]:,} bytes", "",
                  "| input | SHA-256 |", "| --- | --- |"]
        lines += [f"| {path.name} | {hashlib.sha256(path.read_bytes()).hexdigest()} |" for path in files]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.contamination_index", description=__doc__.split("\n\n")[0])
    parser.add_argument("--toolbench", nargs="+", required=True, help="ToolBench test query files, or folders of them")
    parser.add_argument("--toolalpaca", nargs="+", default=[str(REAL_DATA / "toolalpaca" / "eval_simulated.json")])
    parser.add_argument("--out", default=str(SHIPPED))
    args = parser.parse_args(argv)
    inputs = {"toolbench": _files(args.toolbench), "toolalpaca": _files(args.toolalpaca)}
    missing = [str(path) for files in inputs.values() for path in files if not path.is_file()]
    if missing or not all(inputs.values()):
        sys.exit(f"input files not found: {', '.join(missing) or 'none given'}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    counts, sizes = {}, {}
    for name, read in (("toolbench", toolbench_items), ("toolalpaca", toolalpaca_items)):
        items = read(inputs[name])
        path = write_set(name, items, out)
        counts[name], sizes[name] = len(items), path.stat().st_size
        print(f"{path}: {len(items)} items, {sizes[name]:,} bytes")
    (out / "PROVENANCE.md").write_text(provenance(inputs, counts, sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
