"""Builds the referee set that `toolfactory check` puts to the judge role: dialogues over BFCL's
environments whose verdict execution gives, shipped with the package.

    python -m benchmarks.referee_set [--size 16] [--out toolfactory/catalog/referee_set.jsonl]

From BFCL's ``multi_turn_base`` entries (the installed ``bfcl-eval`` package), in file order, with
at most six ground-truth calls: the ground truth, executed on BFCL's environments through our
Python environment source, is a dialogue that passes (our execution layer accepts its replay);
one ground-truth call dropped, or one argument changed (:mod:`benchmarks.execution`'s
perturbations), is a dialogue that fails, kept only where both BFCL's own ``state_checker`` and
our execution layer reject it (the label is execution's, never a guess). Each user turn gets a
closing assistant sentence that claims the request is done (BFCL keeps no assistant text), so
a judge must read the calls to tell the two apart. Half pass and half fail.

Each line of the output: ``{"id", "origin", "passes", "dialogue"}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.execution import bfcl_instances, change_one, drop_one, load_entries
from toolfactory.formats.bfcl_multi_turn import execute, ground_truth_calls
from toolfactory.models import Dialogue, Message
from toolfactory.stages.verify.execution import ExecutionLayer

OUT = Path(__file__).resolve().parents[1] / "toolfactory" / "catalog" / "referee_set.jsonl"
MAX_CALLS = 6
CLOSING = "I have taken care of that for you."


def with_closings(dialogue: Dialogue) -> Dialogue:
    """Each user turn's calls followed by an assistant sentence saying the request is done."""
    out = dialogue.model_copy(deep=True)
    messages: list[Message] = []
    for i, message in enumerate(out.messages):
        if message.role == "user" and messages and messages[-1].role == "tool":
            messages.append(Message(role="assistant", content=CLOSING))
        messages.append(message)
        if i == len(out.messages) - 1 and message.role == "tool":
            messages.append(Message(role="assistant", content=CLOSING))
    out.messages = messages
    return out


async def build(size: int) -> list[dict[str, Any]]:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import state_checker

    layer = ExecutionLayer({})
    passing: list[dict[str, Any]] = []
    failing: list[dict[str, Any]] = []
    for entry in load_entries(None):
        if len(passing) >= size // 2 and len(failing) >= size - size // 2:
            break
        turns = ground_truth_calls(entry)
        if sum(len(t) for t in turns) > MAX_CALLS:
            continue
        dialogue = await execute(entry, turns)
        if await layer.verdicts(dialogue):
            continue  # the ground truth must replay
        ground = bfcl_instances(entry, dialogue, "toolfactory_referee_ground")
        if len(passing) < size // 2:
            passing.append({"id": entry["id"], "origin": "ground_truth", "passes": True, "dialogue": with_closings(dialogue)})
        kind, make = ("dropped_call", drop_one) if len(failing) % 2 == 0 else ("changed_argument", change_one)
        perturbed = make(dialogue)
        if perturbed is None or len(failing) >= size - size // 2:
            continue
        bfcl_rejects = not state_checker(bfcl_instances(entry, perturbed, f"toolfactory_referee_{kind}"), ground)["valid"]
        codes = {v.code for v in await layer.verdicts(perturbed)}
        if bfcl_rejects and "exec_state_mismatch" in codes:
            perturbed.id = f"{dialogue.id}:{kind}"
            failing.append({"id": perturbed.id, "origin": kind, "passes": False, "dialogue": with_closings(perturbed)})
        print(f"{entry['id']}: {len(passing)} passing, {len(failing)} failing", file=sys.stderr, flush=True)
    # What the judges read (tools and messages): the replay's states stay out of the package.
    return [{**row, "dialogue": row["dialogue"].model_dump(mode="json", exclude_none=True, exclude={"generation", "verdicts"})}
            for row in passing + failing]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.referee_set", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    rows = asyncio.run(build(args.size))
    Path(args.out).write_text("".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows))
    print(f"wrote {len(rows)} dialogues to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
