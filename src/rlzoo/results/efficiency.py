"""Sample-efficiency curves (Agarwal et al., 2021, rliable's ``plot_sample_efficiency_curve``): per table row, the
IQM over its seeds of the training return at steps along the budget, with 95 % stratified bootstrap CIs.

A seed's training return at step ``s`` is the table's score there: the mean of its last 100 training episodes that
ended by ``s`` (:meth:`rlzoo.results.runs.RunResult.score`), so the curve's last point is the row's own train IQM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlzoo.results import verdicts
from rlzoo.results.stats import CONFIDENCE, REPS, Row

POINTS = 25  # steps on a curve, evenly spaced up to the budget


@dataclass(frozen=True)
class EfficiencyCurve:
    """One row's curve: at each of ``steps``, the IQM of its seeds' training returns and its CI."""

    label: str
    steps: np.ndarray
    iqm: np.ndarray
    low: np.ndarray
    high: np.ndarray
    seeds: int


def seed_returns(row: Row, steps: np.ndarray, last: int = 100) -> np.ndarray:
    """(seeds, steps): each seed's training return at each step (the mean over its runs that reached the budget)."""
    table = []
    for seed in row.seeds:
        runs = [run for run in row.group.scored_runs if run.seed == seed and run.reached >= row.budget]
        table.append([np.mean([run.score(int(step), last) for run in runs]) for step in steps])
    return np.asarray(table, dtype=float)


def iqm_over_steps(
    scores: np.ndarray, reps: int = REPS, seed: int = 0
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """The IQM over seeds at each step of ``scores`` (seeds, steps) with its 95 % stratified bootstrap CI (rliable's
    ``get_interval_estimates``, the seeds resampled once per resample for every step)."""
    from rliable import library as rly
    from scipy.stats import trim_mean

    def iqm(x: np.ndarray) -> np.ndarray:
        return np.asarray(trim_mean(x[:, 0, :], proportiontocut=0.25, axis=0))  # rliable's aggregate_iqm per step

    with verdicts.seeded_bootstrap(seed):
        points, intervals = rly.get_interval_estimates(
            {"x": scores[:, None, :]}, iqm, reps=reps, confidence_interval_size=CONFIDENCE,
            random_state=np.random.RandomState(seed),
        )  # fmt: skip
    return points["x"], (intervals["x"][0], intervals["x"][1])


def efficiency_curves(
    rows: Sequence[Row], points: int = POINTS, reps: int = REPS, seed: int = 0, last: int = 100
) -> list[EfficiencyCurve]:
    """The curve of every row with scores, on one grid of ``points`` steps up to the rows' largest budget (rows of
    one env and budget, as the store's table holds)."""
    scored = [row for row in rows if row.n]
    if not scored:
        return []
    budget = max(row.budget for row in scored)
    steps = np.linspace(budget / points, budget, points).round().astype(np.int64)
    curves = []
    for row in scored:
        iqm, (low, high) = iqm_over_steps(seed_returns(row, steps, last), reps, seed)
        curves.append(EfficiencyCurve(row.group.srl_model, steps, iqm, low, high, row.n))
    return curves


def plot_efficiency(curves: Sequence[EfficiencyCurve], path: Path, title: str) -> Path:
    """One figure of the curves (IQM and its 95 % CI band per row, rliable's plot), written to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rliable import plot_utils

    figure, axis = plt.subplots(figsize=(7, 4.5))
    plot_utils.plot_sample_efficiency_curve(
        curves[0].steps / 1000, {c.label: c.iqm for c in curves}, {c.label: np.stack([c.low, c.high]) for c in curves},
        [c.label for c in curves], xlabel="agent steps (thousands)", ylabel="train return IQM (last 100 episodes)",
        ax=axis, labelsize="medium", ticklabelsize="small",
    )  # fmt: skip
    axis.set_title(title, fontsize=10)
    axis.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
