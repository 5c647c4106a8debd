"""Agreement of the judges: with injected labels, and one combined judge with the per-aspect judges.

    python -m benchmarks.judges [--pairs 40] [--votes 3] [--records 200] [--config FILE] [--set section.field=value …]

For each dialogue of the verifier's valid corpus that has a string argument, two labelled variants:
- grounded: the user's request states every argument value the calls use;
- hallucinated: the same request, but one call argument replaced by a value that appears nowhere
  in the conversation.
The `hallucination` judge of the model layer (k votes, majority) runs on both through the
configured LLM, and its agreement with the labels is reported. With the default offline simulator
the verdicts ignore the labels by construction, so the figure is near chance; the benchmark exists to be
pointed at a real judge (`--set llm.provider=openai-compatible --set llm.base_url=…`).

Combined against per-aspect (``verify.judge_call``): on the same `--records` dialogues of the
verifier's corpus (valid ones and the labelled pairs), every aspect is judged by the per-aspect
judges with every vote cast (the reference) and by one combined request per vote whose votes stop
once every majority is decided. Reported: the share of (record, aspect) decisions and of record
decisions (kept or not) that agree, and the judge requests per record of each. The simulator's
verdict on a question follows the dialogue and the question, not the request's wording
(`toolfactory/simulator/verdicts.py`), so there the agreement is that of a consistent judge;
the figure that tells whether a given model may answer all aspects at once comes from that model.
The same comparison runs on the released ToolBench DFSDT paths (every root-to-leaf path of the
answer trees under the shared data folder, when it is there), reported apart: dialogues a real
model wrote, with real API responses.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from flows.runtime import llm_endpoint
from benchmarks._common import REAL_DATA
from toolfactory.config import load_config
from toolfactory.formats import toolbench
from toolfactory.llm import LLMGateway, RequestCache, resolve_endpoint
from toolfactory.models import Dialogue
from benchmarks.corpus import valid_dialogues
from toolfactory.stages.verify.grounding import labelled_pair
from toolfactory.stages.verify.judges import ASPECTS, judge, judge_all
from toolfactory.storage import ObjectStore

async def measure(gateway: LLMGateway, pairs: list[tuple[Dialogue, Dialogue]], votes: int) -> dict[str, Any]:
    cases = [(d, True) for d, _ in pairs] + [(h, False) for _, h in pairs]
    judgements = await asyncio.gather(*(judge(d, "hallucination", gateway, votes) for d, _ in cases))
    counts = {"tp": 0, "fp": 0, "tn": 0, "fn": 0}  # positive = "hallucinated", the judge's fail
    vote_agreement = 0
    for (_, grounded), j in zip(cases, judgements):
        flagged = not j.passes
        key = ("fp" if flagged else "tn") if grounded else ("tp" if flagged else "fn")
        counts[key] += 1
        vote_agreement += sum(v.passes == grounded for v in j.votes)
    total = len(cases)
    return {
        **counts,
        "cases": total,
        "agreement": round((counts["tp"] + counts["tn"]) / total, 4),
        "vote_agreement": round(vote_agreement / (total * votes), 4),
        "precision": round(counts["tp"] / (counts["tp"] + counts["fp"]), 4) if counts["tp"] + counts["fp"] else None,
        "recall": round(counts["tp"] / (counts["tp"] + counts["fn"]), 4) if counts["tp"] + counts["fn"] else None,
    }


def released_dialogues() -> list[Dialogue]:
    """Every path of the released ToolBench answer trees; none without the shared data folder."""
    folder = REAL_DATA / "toolbench" / "answer" / "G1_answer"
    if not folder.is_dir():
        return []
    return [d for d in toolbench.read(folder, paths="all") if isinstance(d, Dialogue)]


async def combined_agreement(gateway: LLMGateway, records: list[Dialogue], votes: int) -> dict[str, Any]:
    aspects = list(ASPECTS)
    before = gateway.meter.role("judge")
    start = before.calls + before.cache_hits
    each = await asyncio.gather(*(judge_all(d, aspects, gateway, votes, "all", "per_aspect") for d in records))
    middle = gateway.meter.role("judge").calls + gateway.meter.role("judge").cache_hits
    once = await asyncio.gather(*(judge_all(d, aspects, gateway, votes, "decided", "combined") for d in records))
    end = gateway.meter.role("judge").calls + gateway.meter.role("judge").cache_hits
    pairs = [(a.passes, b.passes) for x, y in zip(each, once) for a, b in zip(x, y)]
    kept = [(all(j.passes for j in x), all(j.passes for j in y)) for x, y in zip(each, once)]
    return {
        "records": len(records),
        "aspect_agreement": round(sum(a == b for a, b in pairs) / len(pairs), 4),
        "record_agreement": round(sum(a == b for a, b in kept) / len(kept), 4),
        "kept_per_aspect": sum(a for a, _ in kept),
        "kept_combined": sum(b for _, b in kept),
        "requests_per_record_per_aspect": round((middle - start) / len(records), 2),
        "requests_per_record_combined": round((end - middle) / len(records), 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.judges", description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--votes", type=int, default=3)
    parser.add_argument("--records", type=int, default=200, help="records judged both ways (combined vs per aspect)")
    parser.add_argument("--config", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--out", default="benchmarks/results/judges.json")
    args = parser.parse_args(argv)
    config = load_config(args.config, args.overrides)
    pairs = [p for d in valid_dialogues(args.pairs * 2, seed=11) if (p := labelled_pair(d))][: args.pairs]

    records = [d for pair in pairs for d in pair] + valid_dialogues(args.records, seed=13)
    records = records[: args.records]
    released = released_dialogues()

    async def run(base_url: str | None) -> dict[str, Any]:
        cache = RequestCache(ObjectStore.open(config.storage))
        async with LLMGateway(resolve_endpoint(config.llm, base_url), config.llm, cache) as gateway:
            labelled = await measure(gateway, pairs, args.votes)
            result = {**labelled, "combined": await combined_agreement(gateway, records, args.votes)}
            if released:
                result["combined_released"] = await combined_agreement(gateway, released, args.votes)
            return result

    started = time.perf_counter()
    with llm_endpoint(config) as base_url:
        result = asyncio.run(run(base_url))
    result.update(
        judge_model=config.llm.roles["judge"].model,
        provider=config.llm.provider,
        votes=args.votes,
        pairs=len(pairs),
        wall_s=round(time.perf_counter() - started, 2),
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"hallucination judge ({result['provider']}, model {result['judge_model']}, {args.votes} votes) on {len(pairs)} labelled pairs:")
    print(f"  agreement {result['agreement']:.1%}  vote agreement {result['vote_agreement']:.1%}  "
          f"precision {result['precision']}  recall {result['recall']}  (tp {result['tp']} fp {result['fp']} tn {result['tn']} fn {result['fn']})")
    c = result["combined"]
    print(f"combined judge against per-aspect judges on {c['records']} records ({args.votes} votes):")
    print(f"  aspect decisions agree {c['aspect_agreement']:.2%}, record decisions agree {c['record_agreement']:.2%} "
          f"(kept {c['kept_per_aspect']} per aspect, {c['kept_combined']} combined); judge requests per record "
          f"{c['requests_per_record_per_aspect']} per aspect (every vote), {c['requests_per_record_combined']} combined (decided)")
    if "combined_released" in result:
        r = result["combined_released"]
        print(f"  on {r['records']} released ToolBench paths: aspect decisions agree {r['aspect_agreement']:.2%}, record "
              f"decisions agree {r['record_agreement']:.2%}; judge requests per record {r['requests_per_record_per_aspect']} "
              f"per aspect, {r['requests_per_record_combined']} combined")
    if config.llm.provider == "simulator":
        print("  (the simulator's verdicts ignore the labels, and follow only the dialogue and the question, so the\n"
              "   label agreement is near chance and the combined agreement is a consistent judge's by construction:\n"
              "   point --set llm.* at a real judge for meaningful figures)")
    print(f"results written to {args.out}")


if __name__ == "__main__":
    main()
