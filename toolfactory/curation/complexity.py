"""Query-level and dataset-level complexity (ToolACE §4.2), and the easy/medium/hard subsets of
its complexity ablation (§5.3.2).

Query level (eq. 1): a query far from the descriptions of the tools it uses needs more reasoning
to pick them, so complexity = 1 − cosine(e_q, e_t), in [0, 2] (0: the query restates the tool).
e_q embeds the first user message; e_t is the normalized mean of the unit embeddings of the
``"name: description"`` texts of the functions the dialogue calls (the offered ones when it calls
none, see :mod:`.records`). The mean rather than one embedding of the concatenated texts:
each function is embedded once per run however many records use it, the order of the calls does
not matter, and a long tool set is not cut at the embedding model's input limit (512 tokens for
the BGE model the paper uses).

Levels (the easy / medium / hard subsets of §5.3.2) are by rank, so that each holds its quantile's
share of the records: see :func:`subsets`.

Dataset level: the mix of dialogue modes and of single- vs multi-turn dialogues, and
:func:`steer`, which down-samples a run toward target mode proportions (ToolACE raises the share
of parallel and multi-turn data, §4.2.2).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import TYPE_CHECKING, Callable, Literal, Mapping, Sequence

import numpy as np

from toolfactory.curation.embeddings import EMBEDDING_BATCH, embed_texts
from toolfactory.curation.records import function_text, query, used_functions
from toolfactory.models import Dialogue

if TYPE_CHECKING:
    from toolfactory.llm import LLMGateway

Level = Literal["easy", "medium", "hard"]


async def query_complexity(
    dialogues: Sequence[Dialogue], gateway: LLMGateway, model: str, *, batch_size: int = EMBEDDING_BATCH
) -> list[float]:
    """Eq. 1 for every dialogue, in order; NaN for one without a user query or functions.

    Queries and function texts are embedded together, each distinct text once, `batch_size`
    texts per request."""
    queries = [query(d).strip() for d in dialogues]
    tool_texts = [[function_text(fn) for fn in used_functions(d)] for d in dialogues]
    vectors = await embed_texts(gateway, [*queries, *(t for texts in tool_texts for t in texts)], model=model, batch_size=batch_size)
    values: list[float] = []
    for text, texts in zip(queries, tool_texts, strict=True):
        if not text or not texts:
            values.append(math.nan)
            continue
        tools = np.mean([vectors[t] for t in texts], axis=0)
        norm = float(np.linalg.norm(tools))
        cosine = float(vectors[text] @ tools) / norm if norm else 0.0
        values.append(min(2.0, max(0.0, 1.0 - cosine)))
    return values


def subsets(
    values: Sequence[float], quantiles: tuple[float, float] = (1 / 3, 2 / 3), *, keys: Sequence[str] | None = None
) -> list[Level | None]:
    """easy / medium / hard by rank: the finite values are ordered (ties by `keys`, e.g. the record
    ids, else by position), and the first ``round(n·low)`` are easy, those up to
    ``round(n·high)`` medium, the rest hard. By rank rather than by comparing with the quantile
    values, so the levels have the sizes the quantiles ask for (near-equal thirds by default) even
    when many values are equal, as embeddings of templated queries often are — a cut by value put
    every tie on one side (18/1/9 for 28 records). Equal values may so get different levels; which
    one is fixed by the keys, not by chance. NaN gets None."""
    low, high = quantiles
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"quantiles must satisfy 0 <= low <= high <= 1, got {quantiles}")
    if keys is not None and len(keys) != len(values):
        raise ValueError(f"keys must match values one to one, got {len(keys)} keys for {len(values)} values")
    finite = [i for i, v in enumerate(values) if not math.isnan(v)]
    ranked = sorted(finite, key=lambda i: (values[i], keys[i] if keys is not None else "", i))
    easy, medium = round(len(ranked) * low), round(len(ranked) * high)
    labels: list[Level | None] = [None] * len(values)
    for rank, i in enumerate(ranked):
        labels[i] = "easy" if rank < easy else "medium" if rank < medium else "hard"
    return labels


def _shares(labels: Sequence[str]) -> dict[str, float]:
    counts = Counter(labels)
    return {label: counts[label] / len(labels) for label in sorted(counts)}


def mode_mix(dialogues: Sequence[Dialogue]) -> dict[str, float]:
    """The share of each dialogue mode (the mode the messages show)."""
    return _shares([d.mode for d in dialogues])


def turns(dialogue: Dialogue) -> Literal["single_turn", "multi_turn"]:
    """Multi-turn when the user speaks more than once (a follow-up or an answer to a question)."""
    return "multi_turn" if sum(m.role == "user" for m in dialogue.messages) > 1 else "single_turn"


def turn_mix(dialogues: Sequence[Dialogue]) -> dict[str, float]:
    return _shares([turns(d) for d in dialogues])


def _mode(dialogue: Dialogue) -> str:
    return dialogue.mode


def steer(
    dialogues: Sequence[Dialogue],
    targets: Mapping[str, float],
    seed: int,
    *,
    key: Callable[[Dialogue], str] = _mode,
) -> list[Dialogue]:
    """The largest subset whose mix of `key` (the mode by default) matches `targets`.

    Targets are renormalized over the groups present in `dialogues` with a positive target (a
    group that is absent cannot be matched); groups with no or a zero target are dropped whole.
    The total kept is the largest n with n·t_g ≤ count_g for every such group g, so the scarcest
    group relative to its target is kept whole; quotas n·t_g are rounded down, and the leftover
    records go to the largest remainders. Each group is sampled with its own
    ``random.Random(f"{seed}:{group}")`` from its records ordered by id, so the choice depends on
    the seed and the records, not on their order; the kept records keep their input order."""
    if any(share < 0 for share in targets.values()):
        raise ValueError(f"targets must not be negative, got {dict(targets)}")
    groups: dict[str, list[int]] = {}
    for i, dialogue in enumerate(dialogues):
        groups.setdefault(key(dialogue), []).append(i)
    wanted = {g: targets[g] for g in sorted(groups) if targets.get(g, 0) > 0}
    total_share = sum(wanted.values())
    if not wanted:
        return []
    shares = {g: t / total_share for g, t in wanted.items()}
    n = min(math.floor(len(groups[g]) / t + 1e-9) for g, t in shares.items())
    quotas = {g: math.floor(n * t + 1e-9) for g, t in shares.items()}
    by_remainder = sorted(shares, key=lambda g: (-(n * shares[g] - quotas[g]), g))
    for g in by_remainder[: n - sum(quotas.values())]:
        quotas[g] = min(len(groups[g]), quotas[g] + 1)
    kept: list[int] = []
    for g, quota in quotas.items():
        members = sorted(groups[g], key=lambda i: (dialogues[i].id, i))
        kept += random.Random(f"{seed}:{g}").sample(members, quota)
    return [dialogues[i] for i in sorted(kept)]
