"""Agreement of the hallucination judge with injected labels (issue: the verifier's own accuracy).

    python -m benchmarks.judges [--pairs 40] [--votes 3] [--config FILE] [--set section.field=value …]

For each dialogue of the verifier's valid corpus that has a string argument, two labelled variants:
- grounded: the user's request states every argument value the calls use;
- hallucinated: the same request, but one call argument replaced by a value that appears nowhere
  in the conversation.
The `hallucination` judge of the model layer (k votes, majority) runs on both through the
configured LLM, and its agreement with the labels is reported. With the default offline simulator
the verdicts are random by construction, so the figure is near chance; the benchmark exists to be
pointed at a real judge (`--set llm.provider=openai-compatible --set llm.base_url=…`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from flows.runtime import llm_endpoint
from toolfactory.config import load_config
from toolfactory.llm import LLMGateway, RequestCache, resolve_endpoint
from toolfactory.models import Dialogue
from toolfactory.stages.verify.corpus import valid_dialogues
from toolfactory.stages.verify.grounding import labelled_pair
from toolfactory.stages.verify.judges import judge
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.judges", description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--votes", type=int, default=3)
    parser.add_argument("--config", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--out", default="benchmarks/results/judges.json")
    args = parser.parse_args(argv)
    config = load_config(args.config, args.overrides)
    pairs = [p for d in valid_dialogues(args.pairs * 2, seed=11) if (p := labelled_pair(d))][: args.pairs]

    async def run(base_url: str | None) -> dict[str, Any]:
        cache = RequestCache(ObjectStore.open(config.storage))
        async with LLMGateway(resolve_endpoint(config.llm, base_url), config.llm, cache) as gateway:
            return await measure(gateway, pairs, args.votes)

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
    if config.llm.provider == "simulator":
        print("  (the simulator's verdicts are random: point --set llm.* at a real judge for a meaningful figure)")
    print(f"results written to {args.out}")


if __name__ == "__main__":
    main()
