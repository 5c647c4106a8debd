"""API clusters (k-means over embeddings through the gateway and the simulator), their coverage,
and the equal-sized low/medium/high diversity subsets of ToolACE's ablation."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from toolfactory.curation import (
    DIVERSITY_LEVELS,
    cluster_apis,
    coverage,
    dialogue_clusters,
    diversity_subsets,
    function_key,
    offered_functions,
)
from toolfactory.models import Dialogue, Function
from benchmarks.corpus import valid_dialogues

from .helpers import MODEL, dialogue, function, with_gateway


def clusters_of(sim: Any, functions: list[Function], k: int = 30, seed: int = 0) -> dict[str, int]:
    return with_gateway(sim, lambda gateway: cluster_apis(functions, gateway, MODEL, k, seed))


@pytest.fixture(scope="module")
def corpus() -> list[Dialogue]:
    return valid_dialogues(300, seed=0)


@pytest.fixture(scope="module")
def corpus_clusters(sim: Any, corpus: list[Dialogue]) -> dict[str, int]:
    return clusters_of(sim, offered_functions(corpus))


def test_fewer_apis_than_k_make_one_cluster_each(sim: Any) -> None:
    functions = [function(f"fn_{i}", f"Does thing number {i} with {word}.") for i, word in enumerate("abcde")]
    clusters = clusters_of(sim, [*functions, functions[0].model_copy()])  # a repeat is one API
    assert len(clusters) == 5 and sorted(clusters.values()) == [0, 1, 2, 3, 4]
    assert clusters_of(sim, []) == {}


def test_labels_are_deterministic_for_a_seed_and_numbered_by_size(sim: Any, corpus: list[Dialogue], corpus_clusters: dict[str, int]) -> None:
    functions = offered_functions(corpus)
    assert len(functions) > 30 and set(corpus_clusters.values()) == set(range(30))
    assert clusters_of(sim, list(reversed(functions))) == corpus_clusters
    sizes = Counter(corpus_clusters.values())
    assert [sizes[c] for c in range(30)] == sorted(sizes.values(), reverse=True)


def test_a_dialogue_is_in_the_clusters_of_the_functions_it_calls() -> None:
    weather, stocks = function("get_weather", "Weather for a city."), function("get_quote", "A stock quote.")
    clusters = {function_key(weather): 0, function_key(stocks): 1}
    calling = dialogue("a", "Weather in Oslo?", [weather, stocks], [("get_weather", {"city": "Oslo"})])
    talking = dialogue("b", "What can you do?", [weather, stocks], mode="non_tool")
    assert dialogue_clusters(calling, clusters) == {0}
    assert dialogue_clusters(talking, clusters) == {0, 1}


def test_toolllm_finish_stands_for_no_api() -> None:
    from toolfactory.curation.records import FINISH
    from toolfactory.stages.dialogues.search import FINISH as SEARCH_FINISH, FINISH_FUNCTION

    weather = function("get_weather", "Weather for a city.")
    finished = dialogue("a", "Weather in Oslo?", [weather, FINISH_FUNCTION], [("get_weather", {"city": "Oslo"}), (FINISH, {})])
    assert FINISH == SEARCH_FINISH
    assert dialogue_clusters(finished, {function_key(weather): 0, function_key(FINISH_FUNCTION): 1}) == {0}
    assert offered_functions([finished]) == [weather]


def test_coverage_numbers_are_consistent(corpus: list[Dialogue], corpus_clusters: dict[str, int]) -> None:
    sets = [dialogue_clusters(d, corpus_clusters) for d in corpus]
    report = coverage(sets, 30)
    assert sum(report.records_per_cluster.values()) == sum(len(s) for s in sets)
    assert report.used == sum(1 for n in report.records_per_cluster.values() if n) == len(set().union(*sets))
    assert report.share == report.used / 30 and report.records_without_cluster == 0
    half = coverage(sets[:5], 30)
    assert half.used == len(set().union(*sets[:5])) < 30 and half.to_dict()["share"] == half.used / 30


def test_diversity_subsets_are_equal_sized_with_growing_coverage(corpus: list[Dialogue], corpus_clusters: dict[str, int]) -> None:
    sets = [dialogue_clusters(d, corpus_clusters) for d in corpus]
    chosen = diversity_subsets(sets, 30, seed=0)
    sizes = {level: len(indices) for level, indices in chosen.items()}
    assert len(set(sizes.values())) == 1 and sizes["low"] > 20
    used = {level: len(set().union(*(sets[i] for i in indices))) for level, indices in chosen.items()}
    assert used["low"] < used["medium"] < used["high"]
    assert used == {"low": 6, "medium": 14, "high": 30}  # measured: each level spans all its clusters
    for level, share in DIVERSITY_LEVELS.items():
        assert all(max(sets[i]) < round(share * 30) for i in chosen[level])
    assert diversity_subsets(sets, 30, seed=0) == chosen
    assert diversity_subsets(sets, 30, seed=1) != chosen


def test_diversity_subsets_honour_a_size_cap() -> None:
    rng = random.Random(0)
    sets = [frozenset(rng.sample(range(10), rng.randint(1, 3))) for _ in range(500)]
    chosen = diversity_subsets(sets, 10, seed=0, size=12)
    assert {len(indices) for indices in chosen.values()} == {12}
    assert diversity_subsets([frozenset({9})], 10, seed=0) == {"low": [], "medium": [], "high": []}


def test_coverage_refuses_a_cluster_beyond_k() -> None:
    with pytest.raises(ValueError, match="k=3"):
        coverage([frozenset({3})], 3)
