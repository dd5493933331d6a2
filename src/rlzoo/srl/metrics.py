"""Measures of a learned state space against the ground truth (Raffin et al., 2018): KNN-MSE and GTC, and a plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.neighbors import NearestNeighbors


def knn_mse(
    states: np.ndarray, ground_truth: np.ndarray, k: int = 5, n_references: int | None = None, seed: int = 0
) -> float:
    """Mean squared ground-truth distance between reference frames and their ``k`` nearest neighbours in state
    space (the reference itself excluded), averaged over references, neighbours and ground-truth dimensions.
    Lower is better.

    :param states: ``(N, D)`` learned states.
    :param ground_truth: ``(N, G)`` ground truth of the same frames.
    :param k: neighbours per reference.
    :param n_references: references drawn without replacement (None: every frame).
    """
    n = len(states)
    if n <= k:
        raise ValueError(f"KNN-MSE with k={k} needs more than {k} frames, got {n}")
    rng = np.random.default_rng(seed)
    references = np.arange(n) if n_references is None or n_references >= n else rng.choice(n, n_references, False)
    neighbours = NearestNeighbors(n_neighbors=k + 1).fit(states)
    _, indices = neighbours.kneighbors(states[references])
    # Drop the reference itself (not always first when states coincide), else the farthest of the k + 1.
    kept = np.array([[j for j in row if j != ref][:k] for ref, row in zip(references, indices, strict=True)])
    errors = ground_truth[kept] - ground_truth[references][:, None, :]
    return float(np.mean(errors**2))


def gtc(states: np.ndarray, ground_truth: np.ndarray) -> np.ndarray:
    """Ground-truth correlation: for each ground-truth dimension, the largest absolute Pearson correlation with any
    state dimension (constant state dimensions count as 0; a constant ground-truth dimension gives NaN).

    :return: ``(G,)`` values in [0, 1].
    """
    s = _standardise(states.astype(np.float64))
    g = _standardise(ground_truth.astype(np.float64))
    correlation = np.abs(g.T @ s) / len(states)  # (G, D)
    result = correlation.max(axis=1) if correlation.shape[1] else np.zeros(len(g.T))
    result[np.ptp(ground_truth, axis=0) == 0] = np.nan
    return np.clip(result, 0.0, 1.0)


def linear_probe(states: np.ndarray, ground_truth: np.ndarray, episodes: np.ndarray, folds: int = 5) -> np.ndarray:
    """How linearly the states hold each ground-truth dimension, whichever state dimensions carry it (GTC looks at one
    dimension at a time): the Pearson correlation of cross-validated ridge predictions with the ground truth, the
    folds split by episode (a target seen in training is never predicted).

    :param episodes: ``(N,)`` episode index of every frame.
    :return: ``(G,)`` correlations; NaN for a constant dimension or fewer than 2 episodes.
    """
    from sklearn.linear_model import RidgeCV
    from sklearn.model_selection import GroupKFold, cross_val_predict

    n_groups = len(np.unique(episodes))
    if n_groups < 2:
        return np.full(ground_truth.shape[1], np.nan)
    model = RidgeCV(alphas=np.logspace(-2, 3, 6))
    predicted = cross_val_predict(model, states, ground_truth, groups=episodes, cv=GroupKFold(min(folds, n_groups)))
    result = np.array([_correlation(p, g) for p, g in zip(predicted.T, ground_truth.T, strict=True)])
    return np.clip(result, -1.0, 1.0)


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def _standardise(values: np.ndarray) -> np.ndarray:
    std = values.std(axis=0)
    return (values - values.mean(axis=0)) / np.where(std > 0, std, np.inf)


def plot_states(path: Path, states: np.ndarray, ground_truth: np.ndarray, names: list[str], title: str) -> None:
    """Scatter the states (their two principal components when there are more than two) coloured by each
    ground-truth dimension, one panel per dimension, into a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    centred = states - states.mean(axis=0)
    if states.shape[1] > 2:
        _, _, axes_t = np.linalg.svd(centred, full_matrices=False)
        points, labels = centred @ axes_t[:2].T, ("PC 1", "PC 2")
    elif states.shape[1] == 2:
        points, labels = centred, ("state 0", "state 1")
    else:
        points, labels = np.column_stack([centred[:, 0], np.zeros(len(states))]), ("state 0", "")
    figure, axes = plt.subplots(1, len(names), figsize=(3.0 * len(names), 3.3), squeeze=False)
    figure.subplots_adjust(left=0.06, right=0.98, bottom=0.14, top=0.82, wspace=0.3)  # tight_layout costs 0.3 s
    for axis, values, name in zip(axes[0], ground_truth.T, names, strict=True):
        axis.scatter(points[:, 0], points[:, 1], c=values, s=4, cmap="viridis")
        axis.set_title(f"colour: {name} (yellow: high)", fontsize=9)
        axis.set_xlabel(labels[0], fontsize=8)
        axis.set_ylabel(labels[1], fontsize=8)
        axis.tick_params(labelsize=7)
    figure.suptitle(title)
    figure.savefig(path, dpi=80)
    plt.close(figure)
