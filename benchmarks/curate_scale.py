"""Peak memory of curation as the run grows: the staged curate path against the single shard.

`python -m benchmarks.curate_scale [--sizes 10000,100000] [--part 1000] [--no-single] [--out PATH]`

For each size N, N synthetic accepted dialogues (templated requests over a fixed set of 300
functions, 2 % exact copies and 2 % reworded copies; no LLM) are written as verify parts of
`--part` records. Embeddings are the simulator's deterministic hashed bag of words, computed in
process (no HTTP). Then, each in a fresh process that runs all the shards of its stage in turn, as
a Ray worker does:

* **measure**: every verify part, one shard each;
* **select**:  the one fan-in shard over the measures;
* **curate**:  every verify part with its measures and the selection;
* **single** (unless `--no-single`): what the curate stage did before it was split, in one
  process: every dialogue loaded, deduplicated with the in-memory MinHash index, complexity,
  run-scope clusters and diversity subsets over them all.

Reported per stage: the process's peak RSS (VmHWM) and wall time; and the ratio of the
largest to the smallest size's peak, per stage (flat: about 1.0).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import resource
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from benchmarks._common import RESULTS_DIR, machine_info, table, write_json

FUNCTIONS = 300
DIM = 64
WORDS = ("weather forecast city tomorrow stock price company share flight ticket airport book hotel room "
         "night recipe dinner vegetarian song lyrics artist movie review rating news headline sport score "
         "translate sentence french currency convert euro dollar distance route drive walk calendar meeting "
         "schedule email send reminder timezone population country capital").split()


class LocalEmbeddings:
    """The gateway's `embed` with the simulator's deterministic embeddings, in process."""

    async def embed(self, texts: Sequence[str], *, model: str) -> list[list[float]]:
        from toolfactory.simulator.embeddings import embed

        return [embed(text, DIM) for text in texts]


def synthetic(n: int, seed: int = 0) -> list[Any]:
    from toolfactory.models import Dialogue, Function, Message, ToolCall

    rng = random.Random(seed)
    functions = [Function(name=f"api_{i}", description=" ".join(rng.sample(WORDS, 6)), parameters={"type": "object", "properties": {"q": {"type": "string"}}})
                 for i in range(FUNCTIONS)]
    out: list[Any] = []
    for i in range(n):
        tools = rng.sample(functions, 3)
        request = " ".join(rng.choices(WORDS, k=14)) + f" number {i}"
        calls = [ToolCall(id=f"c{i}", name=tools[0].name, arguments=f'{{"q": "{i}"}}')]
        out.append(Dialogue(id=f"d{i:07d}", task_id=f"t{i}", tools=tools, mode="single", messages=[
            Message(role="user", content=request), Message(role="assistant", content=None, tool_calls=calls),
            Message(role="tool", content='{"ok": true}', tool_call_id=f"c{i}", name=tools[0].name),
            Message(role="assistant", content=f"Here is what I found for {request}.")]))
    for j in range(n // 50):  # exact copies, and copies with one word changed
        original = out[rng.randrange(n)]
        out.append(original.model_copy(deep=True, update={"id": f"x{j:07d}"}))
        reworded = original.model_copy(deep=True, update={"id": f"y{j:07d}"})
        reworded.messages[0].content = (reworded.messages[0].content or "") + " please"
        out.append(reworded)
    return out


def _context(root: str) -> Any:
    from toolfactory.config import load_config
    from toolfactory.stages import ShardContext
    from toolfactory.storage import ObjectStore

    config = load_config(None, [f"storage.root={root}", "curate.clusters_scope=run", "curate.clusters=30"], environ={})
    return ShardContext(config=config, run_id="bench", gateway=LocalEmbeddings(), store=ObjectStore.open(config.storage))  # type: ignore[arg-type]


def _write(ctx: Any, path: str, records: Sequence[Any]) -> None:
    from toolfactory.storage.shards import encode_records, write_rows

    rows, _ = encode_records(records, "bench")
    write_rows(ctx.store, path, rows)


def _peak_rss_mb() -> float:
    """This process's own peak RSS: VmHWM, which starts afresh at exec (``ru_maxrss`` keeps the
    peak of the parent the process was forked from, here the one that built the dialogues)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _stage_worker(root: str, stage: str, parts: int) -> dict[str, Any]:
    """Run every shard of `stage` in this (fresh) process; its peak RSS and wall time."""
    from toolfactory.storage.shards import ShardPaths
    from toolfactory.stages import ShardSpec
    from toolfactory.stages.curate.stage import CurateStage, dataset_inputs
    from toolfactory.stages.measure.stage import MeasureStage
    from toolfactory.stages.select.stage import SelectStage

    ctx, started = _context(root), time.perf_counter()
    selection = ShardPaths("bench", "select", 0).main

    async def go() -> None:
        if stage == "select":
            measured = tuple(ShardPaths("bench", "measure", i).main for i in range(parts))
            out = await SelectStage().run(ShardSpec("select", 0, measured, {}), [], ctx)
            _write(ctx, selection, out.records)
            return
        for i in range(parts):
            if stage == "measure":
                out = await MeasureStage().run(ShardSpec("measure", i, ()), ctx.read(ShardPaths("bench", "verify", i).main), ctx)
            else:
                spec = ShardSpec("curate", i, dataset_inputs("bench", i, selection))
                out = await CurateStage().run(spec, [], ctx)  # it reads its inputs itself (streams_inputs)
            _write(ctx, ShardPaths("bench", stage, i).main, out.records)

    asyncio.run(go())
    return {"peak_rss_mb": _peak_rss_mb(), "wall_s": time.perf_counter() - started}


def _single_worker(root: str, parts: int) -> dict[str, Any]:
    """The curate stage as one shard over every dialogue (its steps, with the same library functions)."""
    from toolfactory.curation import (DialogueIndex, cluster_apis, deduplicate, dialogue_clusters, diversity_subsets,
                                      offered_functions, query_complexity, subsets)
    from toolfactory.models import Dialogue
    from toolfactory.storage.shards import ShardPaths

    ctx, started = _context(root), time.perf_counter()

    async def go() -> int:
        dialogues = sorted((Dialogue.model_validate(r) for i in range(parts) for r in ctx.read(ShardPaths("bench", "verify", i).main)),
                           key=lambda d: d.id)
        found = deduplicate(((f"bench/{d.id}", d) for d in dialogues), DialogueIndex())
        kept = [d for d in dialogues if f"bench/{d.id}" not in found.duplicates]
        values = await query_complexity(kept, ctx.gateway, "m")
        subsets(values, keys=[d.id for d in kept])
        clusters = await cluster_apis(offered_functions(kept), ctx.gateway, "m", 30, 0)
        diversity_subsets([dialogue_clusters(d, clusters) for d in kept], len(set(clusters.values())) or 1, 0)
        return len(kept)

    kept = asyncio.run(go())
    return {"peak_rss_mb": _peak_rss_mb(), "wall_s": time.perf_counter() - started, "kept": kept}


def _in_fresh_process(function: Any, *args: Any) -> dict[str, Any]:
    with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
        return pool.apply(function, args)  # type: ignore[no-any-return]


def run_size(n: int, part: int, single: bool) -> dict[str, Any]:
    from toolfactory.storage.shards import ShardPaths

    with tempfile.TemporaryDirectory(prefix="curate-scale-") as root:
        ctx, dialogues = _context(root), synthetic(n)
        random.Random(1).shuffle(dialogues)  # copies land in other parts than their originals
        parts = (len(dialogues) + part - 1) // part
        for i in range(parts):
            _write(ctx, ShardPaths("bench", "verify", i).main, dialogues[i * part:(i + 1) * part])
        del dialogues
        result: dict[str, Any] = {"dialogues": n, "with_copies": n + 2 * (n // 50), "parts": parts}
        for stage in ("measure", "select", "curate"):
            result[stage] = _in_fresh_process(_stage_worker, root, stage, parts)
        from toolfactory.storage.shards import read_records

        kept = sum(len(read_records(ctx.store, ShardPaths("bench", "curate", i).main)) for i in range(parts))
        result["kept"] = kept
        if single:
            result["single"] = _in_fresh_process(_single_worker, root, parts)
        return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--part", type=int, default=1000, help="dialogues per verify part")
    parser.add_argument("--no-single", action="store_true", help="skip the single-shard curate path")
    parser.add_argument("--out", default=str(RESULTS_DIR / "curate_scale.json"))
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    results = [run_size(n, args.part, not args.no_single) for n in sizes]
    stages = ["measure", "select", "curate", *([] if args.no_single else ["single"])]
    rows = [[r["dialogues"], r["parts"], r["kept"], *(f"{r[s]['peak_rss_mb']:.0f} MB / {r[s]['wall_s']:.0f} s" for s in stages)]
            for r in results]
    print(table(["dialogues", "parts", "kept", *(f"{s}: peak RSS / wall" for s in stages)], rows))
    ratios = {s: round(results[-1][s]["peak_rss_mb"] / results[0][s]["peak_rss_mb"], 2) for s in stages}
    print(f"peak RSS {sizes[-1]} / {sizes[0]}: " + ", ".join(f"{s} {ratio}" for s, ratio in ratios.items()))
    path = write_json(args.out, {"machine": machine_info(), "part": args.part, "results": results, "peak_ratio": ratios})
    print(f"written to {path}")


if __name__ == "__main__":
    main()
