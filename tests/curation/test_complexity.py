"""Query-level complexity (ToolACE eq. 1) through the real gateway and the simulator over HTTP;
easy/medium/hard subsets; the mode mix and steering it."""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from toolfactory.curation import function_text, mode_mix, query, query_complexity, steer, subsets, turn_mix, used_functions
from toolfactory.models import Dialogue
from toolfactory.simulator.embeddings import embed
from benchmarks.corpus import valid_dialogues

from .helpers import MODEL, dialogue, embedding_requests, function, with_gateway

WEATHER = function("get_weather", "Current weather and a three-day forecast for a city.")
STOCKS = function("get_quote", "Real-time stock quote for a ticker symbol.")
DIM = 64  # the simulator's default embedding dimension


def complexity(sim: Any, dialogues: list[Dialogue], batch_size: int = 128) -> list[float]:
    return with_gateway(sim, lambda gateway: query_complexity(dialogues, gateway, MODEL, batch_size=batch_size))


def test_values_lie_in_0_2_and_distinct_texts_go_in_batches(sim: Any) -> None:
    corpus = valid_dialogues(300, seed=0)
    texts = {query(d) for d in corpus} | {function_text(fn) for d in corpus for fn in used_functions(d)}
    before = embedding_requests(sim)
    values = complexity(sim, corpus, batch_size=16)
    assert len(values) == 300 and all(0.0 <= v <= 2.0 for v in values)
    assert embedding_requests(sim) - before == math.ceil(len(texts) / 16)
    assert len(set(values)) > 100  # not a constant


def test_each_distinct_text_is_embedded_once_128_to_a_request(sim: Any) -> None:
    corpus = valid_dialogues(300, seed=2)
    texts = [query(d) for d in corpus] + [function_text(fn) for d in corpus for fn in used_functions(d)]

    async def work(gateway: Any) -> int:
        await query_complexity(corpus, gateway, MODEL)
        return gateway.meter.role("embedding").calls

    distinct = len(set(texts))
    assert 128 < distinct < len(texts) / 2  # repeated texts, more than one request's worth
    assert with_gateway(sim, work) == math.ceil(distinct / 128)


def test_a_query_that_restates_its_tool_has_complexity_zero(sim: Any) -> None:
    restating = dialogue("same", function_text(WEATHER), [WEATHER, STOCKS], [("get_weather", {"city": "Oslo"})])
    unrelated = dialogue("far", "Please book me a table for two tonight", [WEATHER], [("get_weather", {"city": "Oslo"})])
    same, far = complexity(sim, [restating, unrelated])
    assert same == pytest.approx(0.0, abs=1e-9)
    assert far > 0.5


def _unit(text: str) -> np.ndarray:
    return np.asarray(embed(text, DIM))


def test_the_tool_side_is_the_mean_of_the_called_functions_embeddings(sim: Any) -> None:
    request = "What is the weather in Oslo and how is the AAPL stock doing?"
    both = dialogue("both", request, [WEATHER, STOCKS], [("get_weather", {"city": "Oslo"}), ("get_quote", {"symbol": "AAPL"})])
    offered = dialogue("none", request, [WEATHER, STOCKS], mode="non_tool")  # no call: the offered ones
    one = dialogue("one", request, [WEATHER, STOCKS], [("get_quote", {"symbol": "AAPL"})])
    values = complexity(sim, [both, offered, one])
    mean = (_unit(function_text(WEATHER)) + _unit(function_text(STOCKS))) / 2
    expected = 1 - float(_unit(request) @ mean / np.linalg.norm(mean))
    assert values[0] == pytest.approx(expected, abs=1e-6)
    assert values[1] == pytest.approx(expected, abs=1e-6)
    assert values[2] == pytest.approx(1 - float(_unit(request) @ _unit(function_text(STOCKS))), abs=1e-6)


def test_a_dialogue_without_a_query_gets_nan(sim: Any) -> None:
    silent = dialogue("silent", "", [WEATHER])
    assert math.isnan(complexity(sim, [silent])[0])


def test_subsets_follow_the_quantiles() -> None:
    values = [float(v) for v in random.Random(0).sample(range(300), 300)]
    labels = subsets(values)
    assert Counter(labels) == {"easy": 100, "medium": 100, "hard": 100}
    by_label = {label: [v for v, lab in zip(values, labels) if lab == label] for label in ("easy", "medium", "hard")}
    assert max(by_label["easy"]) < min(by_label["medium"]) and max(by_label["medium"]) < min(by_label["hard"])
    assert Counter(subsets(values, (0.5, 0.9))) == {"easy": 150, "medium": 120, "hard": 30}


def test_ties_are_split_into_near_equal_thirds_by_key() -> None:
    # the shape that split 18/1/9 by value: most queries at one complexity
    values = [0.2] * 18 + [0.5] + [0.8] * 9
    keys = [f"record-{n:02d}" for n in range(len(values))]
    labels = subsets(values, keys=keys)
    assert Counter(labels) == {"easy": 9, "medium": 10, "hard": 9}
    # ties are broken by key, not by position: reversing the input gives each record the same level
    back = subsets(values[::-1], keys=keys[::-1])
    assert dict(zip(keys[::-1], back)) == dict(zip(keys, labels))
    assert [labels[keys.index(k)] for k in sorted(keys)[:9]] == ["easy"] * 9


def test_a_lower_value_never_gets_a_harder_level_and_nan_gets_none() -> None:
    values = [0.9, 0.1, math.nan, 0.5, 0.1, 0.3]
    labels = subsets(values, keys=list("abcdef"))
    order = {"easy": 0, "medium": 1, "hard": 2}
    ranked = sorted((v, order[lab]) for v, lab in zip(values, labels) if lab is not None)
    assert [lab for _, lab in ranked] == sorted(lab for _, lab in ranked)
    assert labels[2] is None and Counter(labels) == {"easy": 2, "medium": 1, "hard": 2, None: 1}
    with pytest.raises(ValueError, match="quantiles"):
        subsets([0.1], (0.8, 0.2))


def test_mode_and_turn_mix_are_shares_of_the_records() -> None:
    corpus = valid_dialogues(70, seed=0)
    counts = Counter(d.mode for d in corpus)
    assert mode_mix(corpus) == {mode: n / 70 for mode, n in sorted(counts.items())}
    multi = sum(1 for d in corpus if sum(m.role == "user" for m in d.messages) > 1)
    assert multi and turn_mix(corpus) == {"multi_turn": multi / 70, "single_turn": (70 - multi) / 70}


def _skewed() -> list[Dialogue]:
    counts = {"single": 600, "parallel": 100, "dependent": 50, "non_tool": 30, "missing_params": 20}
    return [
        dialogue(f"{mode}-{i:03d}", f"request {i}", [WEATHER], mode=mode) for mode, n in counts.items() for i in range(n)
    ]


TARGETS = {"single": 0.4, "parallel": 0.3, "dependent": 0.2, "non_tool": 0.1}


def test_steer_hits_the_target_proportions_of_a_skewed_mix() -> None:
    kept = steer(_skewed(), TARGETS, seed=0)
    # The largest n with n·t ≤ count: dependent binds (50 / 0.2 = 250); missing_params has no target.
    assert Counter(d.mode for d in kept) == {"single": 100, "parallel": 75, "dependent": 50, "non_tool": 25}
    assert mode_mix(kept) == pytest.approx({m: TARGETS[m] for m in sorted(TARGETS)})


def test_steer_is_deterministic_for_a_seed_and_independent_of_input_order() -> None:
    records = _skewed()
    first = [d.id for d in steer(records, TARGETS, seed=3)]
    shuffled = random.Random(1).sample(records, len(records))
    assert [d.id for d in steer(records, TARGETS, seed=3)] == first
    assert sorted(d.id for d in steer(shuffled, TARGETS, seed=3)) == sorted(first)
    assert [d.id for d in steer(records, TARGETS, seed=4)] != first
    assert first == [d.id for d in records if d.id in set(first)]  # input order kept


def test_steer_renormalizes_over_the_modes_present() -> None:
    records = [r for r in _skewed() if r.mode in ("single", "parallel")]
    kept = steer(records, {"single": 0.25, "parallel": 0.25, "dependent": 0.5}, seed=0)
    assert Counter(d.mode for d in kept) == {"single": 100, "parallel": 100}
    assert steer(records, {"dependent": 1.0}, seed=0) == []
