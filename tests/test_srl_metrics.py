"""KNN-MSE and GTC on cases whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from rlzoo.srl.metrics import gtc, knn_mse


def test_gtc_of_the_ground_truth_is_one_and_random_states_score_lower() -> None:
    rng = np.random.default_rng(0)
    truth = rng.uniform(0, 4, size=(500, 4))
    assert np.allclose(gtc(truth, truth), 1.0)
    # Any per-dimension affine map (and extra dimensions) keeps GTC at 1.
    scaled = np.column_stack([-3 * truth + 1, rng.normal(size=(500, 5))])
    assert np.allclose(gtc(scaled, truth), 1.0)
    mixed = truth @ rng.normal(size=(4, 4))  # each state dim mixes every ground-truth dim
    assert gtc(mixed, truth).mean() < 0.95
    noise = rng.normal(size=(500, 10))
    assert gtc(noise, truth).mean() < 0.2


def test_gtc_of_a_constant_ground_truth_dimension_is_nan() -> None:
    truth = np.column_stack([np.arange(10.0), np.full(10, 2.0)])
    result = gtc(np.column_stack([np.arange(10.0), np.zeros(10)]), truth)
    assert result[0] == pytest.approx(1.0) and np.isnan(result[1])


def test_knn_mse_hand_made() -> None:
    # States on a line; the ground truth of frame i is i; the k = 2 nearest neighbours of 0 are 1 and 2.
    states = np.array([[0.0], [1.0], [2.0], [10.0], [11.0], [12.0]])
    truth = np.array([[0.0], [1.0], [2.0], [3.0], [4.0], [5.0]])
    # 0 -> (1, 2): (1 + 4) / 2; 1 -> (0, 2): 1; 2 -> (1, 0): (1 + 4) / 2; same for 3, 4, 5 by symmetry.
    assert knn_mse(states, truth, k=2) == pytest.approx((2.5 + 1 + 2.5) / 3)


def test_knn_mse_of_the_ground_truth_is_the_smallest() -> None:
    rng = np.random.default_rng(1)
    truth = rng.uniform(0, 4, size=(400, 4))
    perfect = knn_mse(truth, truth)
    assert perfect < knn_mse(truth + rng.normal(scale=0.3, size=truth.shape), truth)
    assert perfect < knn_mse(rng.normal(size=(400, 4)), truth)
    assert knn_mse(truth, truth, n_references=50) < knn_mse(rng.normal(size=(400, 4)), truth, n_references=50)


def test_knn_mse_skips_the_reference_among_duplicates() -> None:
    states = np.zeros((6, 2))  # every frame at the same state: all are neighbours, self excluded
    truth = np.arange(6.0)[:, None]
    expected = np.mean([(truth[j] - truth[i]) ** 2 for i in range(6) for j in range(6) if j != i])
    assert knn_mse(states, truth, k=5) == pytest.approx(expected)
