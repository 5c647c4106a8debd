"""Running ToolEval over files of solution paths, as `toolfactory eval` does."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from toolfactory.formats import read
from toolfactory.formats.base import FormatError
from toolfactory.llm import LLMGateway
from toolfactory.models import Dialogue
from toolfactory.evaluation.tooleval import check_votes, instruction_of, pass_label, pass_rate, win_label, win_rate


def read_paths(path: str | Path, fmt: str) -> tuple[list[Dialogue], list[FormatError]]:
    paths: list[Dialogue] = []
    errors: list[FormatError] = []
    for item in read(path, fmt):
        (errors if isinstance(item, FormatError) else paths).append(item)  # type: ignore[arg-type]
    return paths, errors


async def evaluate(
    paths: list[Dialogue], gateway: LLMGateway, votes: int, against: list[Dialogue] | None = None
) -> dict[str, Any]:
    """Pass rate of `paths`; with `against`, the win rate of `paths` over the paths for the same
    instructions in `against` (matched by the instruction's text). A pair where one path passes
    and the other fails is decided by the labels alone (ToolEval A.5)."""
    check_votes(votes)
    passes = await asyncio.gather(*(pass_label(p, gateway, votes) for p in paths))
    report: dict[str, Any] = {"pass": pass_rate(passes), "paths": [asdict(r) for r in passes]}
    if against is not None:
        others = {instruction_of(d): d for d in against}
        pairs = [(p, others[instruction_of(p)], r.label) for p, r in zip(paths, passes) if instruction_of(p) in others]
        other_labels = await asyncio.gather(*(pass_label(q, gateway, votes) for _, q, _ in pairs))
        wins = await asyncio.gather(*(
            win_label(p, q, gateway, votes, labels=(label, other.label))
            for (p, q, label), other in zip(pairs, other_labels)
        ))
        report["win"] = {**win_rate(wins), "unpaired": len(paths) - len(pairs)}
        report["pairs"] = [asdict(w) for w in wins]
    return report


def write_report(report: dict[str, Any], out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "eval.json"
    target.write_text(json.dumps(report, indent=1, ensure_ascii=False))
    return target
