"""NDCG@k against values computed by hand (discount of rank i: 1/log2(i+1)), and the random
baseline against a simulation of random rankings."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from toolfactory.retrieval.metrics import ndcg_at_k, random_ndcg_at_k

D = [1 / math.log2(rank + 1) for rank in range(1, 11)]  # D[i]: discount of rank i + 1


def ranked(n: int) -> list[float]:
    """Scores that rank document i at rank i + 1."""
    return [float(n - i) for i in range(n)]


def test_the_only_relevant_api_first_scores_one() -> None:
    assert ndcg_at_k(ranked(5), {0}, 1) == pytest.approx(1.0)
    assert ndcg_at_k(ranked(5), {0}, 5) == pytest.approx(1.0)


def test_the_only_relevant_api_second() -> None:
    assert ndcg_at_k(ranked(5), {1}, 1) == 0.0
    assert ndcg_at_k(ranked(5), {1}, 5) == pytest.approx(0.6309298, abs=1e-6)  # (1/log2 3) / 1


def test_two_relevant_apis_at_ranks_one_and_three() -> None:
    assert ndcg_at_k(ranked(5), {0, 2}, 1) == pytest.approx(1.0)
    # DCG = 1 + 1/log2(4) = 1.5; ideal = 1 + 1/log2(3) = 1.6309298
    assert ndcg_at_k(ranked(5), {0, 2}, 5) == pytest.approx(1.5 / 1.6309298, abs=1e-6)
    assert ndcg_at_k(ranked(5), {0, 2}, 5) == pytest.approx(0.9197208, abs=1e-6)


def test_three_relevant_apis_one_of_them_below_the_cut() -> None:
    # ranks 2, 4 and 6 of 8: DCG@5 = D(2) + D(4); ideal@5 = D(1) + D(2) + D(3)
    assert ndcg_at_k(ranked(8), {1, 3, 5}, 5) == pytest.approx((D[1] + D[3]) / (D[0] + D[1] + D[2]))
    assert ndcg_at_k(ranked(8), {1, 3, 5}, 5) == pytest.approx(0.4981893, abs=1e-6)
    assert ndcg_at_k(ranked(8), {1, 3, 5}, 1) == 0.0


def test_no_relevant_api_retrieved_scores_zero() -> None:
    assert ndcg_at_k(ranked(8), {5, 6}, 1) == 0.0
    assert ndcg_at_k(ranked(8), {5, 6}, 5) == 0.0


def test_more_relevant_apis_than_k_the_ideal_fills_k_ranks() -> None:
    assert ndcg_at_k(ranked(10), set(range(7)), 5) == pytest.approx(1.0)
    # an irrelevant API first pushes the other six down: DCG = D(2..5); ideal = D(1..5)
    assert ndcg_at_k(ranked(10), set(range(1, 8)), 5) == pytest.approx(sum(D[1:5]) / sum(D[:5]))
    assert ndcg_at_k(ranked(10), set(range(1, 8)), 5) == pytest.approx(0.6608398, abs=1e-6)


def test_the_order_of_the_input_does_not_matter_only_the_scores() -> None:
    scores = [0.1, 0.9, 0.5, 0.7]  # ranking: 1, 3, 2, 0
    assert ndcg_at_k(scores, {2}, 5) == pytest.approx(D[2])


def test_tied_scores_share_their_mean_gain() -> None:
    # documents 0 and 1 tie for rank 1 and 2, one of them relevant: gain 1/2 at each rank
    assert ndcg_at_k([0.9, 0.9, 0.1], {1}, 1) == pytest.approx(0.5)
    assert ndcg_at_k([0.9, 0.9, 0.1], {1}, 5) == pytest.approx(0.5 * (1 + D[1]))
    assert ndcg_at_k([0.9, 0.9, 0.1], {0}, 5) == ndcg_at_k([0.9, 0.9, 0.1], {1}, 5)


def test_k_larger_than_the_corpus() -> None:
    assert ndcg_at_k([0.2, 0.8], {0}, 5) == pytest.approx(D[1])


def test_undefined_cases_are_refused() -> None:
    with pytest.raises(ValueError, match="without relevant"):
        ndcg_at_k(ranked(3), set(), 5)
    with pytest.raises(ValueError, match="at least 1"):
        ndcg_at_k(ranked(3), {0}, 0)


def test_random_baseline_by_hand_and_as_all_tied_scores() -> None:
    # 2 relevant of 12: each rank relevant with probability 1/6
    assert random_ndcg_at_k(2, 12, 1) == pytest.approx(1 / 6)
    assert random_ndcg_at_k(2, 12, 5) == pytest.approx(sum(D[:5]) / 6 / (D[0] + D[1]))
    # all-equal scores are a random ranking in expectation, which tie averaging computes
    assert ndcg_at_k([0.0] * 12, {3, 7}, 5) == pytest.approx(random_ndcg_at_k(2, 12, 5))


def test_random_baseline_matches_simulated_random_rankings() -> None:
    rng = random.Random(0)
    for n_relevant, n_documents, k in ((1, 10, 1), (2, 12, 5), (4, 9, 5)):
        relevant = set(range(n_relevant))
        trials = [ndcg_at_k([rng.random() for _ in range(n_documents)], relevant, k) for _ in range(4000)]
        assert float(np.mean(trials)) == pytest.approx(random_ndcg_at_k(n_relevant, n_documents, k), abs=0.02)


def test_agrees_with_scikit_learn_ndcg_score_which_toolbench_uses() -> None:
    metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn is an optional cross-check")
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(2, 30))
        scores = np.round(rng.random(n), 1)  # rounded, so that there are ties
        relevant = set(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False).tolist())
        truth = np.zeros(n)
        truth[list(relevant)] = 1
        for k in (1, 3, 5):
            assert ndcg_at_k(scores, relevant, k) == pytest.approx(metrics.ndcg_score([truth], [scores], k=k))
