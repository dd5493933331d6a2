"""Aggregate statistics of the results table with rliable (Agarwal et al., 2021, "Deep RL at the edge of the
statistical precipice"): per row, the interquartile mean (IQM) of its per-seed scores with a 95 % stratified bootstrap
CI, the probability of improvement over the baseline row with its CI, the test return (mean ± SE over seeds), and a
performance profile per env and budget.

rliable is the optional extra ``stats`` (``pip install -e ".[stats]"``); without it the rliable cells stay empty and
:data:`MISSING_NOTE` says how to fill them. The scores are the table's own (one per seed, see
:func:`rlzoo.results.comparison.seed_scores`); with one env the stratified bootstrap resamples seeds.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from rlzoo.results.runs import Group

from rlzoo.results import verdicts


class Row(Protocol):
    """What the statistics read of a table row (:class:`rlzoo.results.comparison.Row`, which imports this module)."""

    @property
    def group(self) -> Group: ...

    @property
    def budget(self) -> int: ...

    @property
    def scores(self) -> tuple[float, ...]: ...

    @property
    def seeds(self) -> tuple[int, ...]: ...

    @property
    def is_baseline(self) -> bool: ...

    @property
    def n(self) -> int: ...


REPS = 2000  # bootstrap resamples
CONFIDENCE = 0.95
TEST_KEY = "test/mean_return"  # metrics.json of a finished run
SAMPLED_TEST_KEY = "test_sampled/mean_return"  # the same test episodes with sampled actions (sampled_test=true)
MISSING_NOTE = 'IQM, its CI and P(improvement) need rliable: pip install -e ".[stats]"'
CSV_HEADER = (
    "test_mean", "test_se", "test_seeds", "iqm", "iqm_ci_low", "iqm_ci_high",
    "p_improvement", "p_improvement_ci_low", "p_improvement_ci_high", "sampled_test_mean", "sampled_test_se",
    "test_iqm", "test_iqm_ci_low", "test_iqm_ci_high", "sampled_test_iqm", "sampled_test_iqm_ci_low",
    "sampled_test_iqm_ci_high", *verdicts.CSV_HEADER,
)  # fmt: skip


@dataclass(frozen=True)
class RowStats:
    """The rliable statistics and the test return of one row (NaN where undefined)."""

    test_scores: tuple[float, ...] = ()
    iqm: float = math.nan
    iqm_ci: tuple[float, float] = (math.nan, math.nan)
    improvement: float = math.nan  # P(a seed of this row scores above a seed of the baseline row)
    improvement_ci: tuple[float, float] = (math.nan, math.nan)
    sampled_scores: tuple[float, ...] = ()  # per seed: the test episodes with sampled actions (sampled_test=true)
    test_iqm: float = math.nan
    test_iqm_ci: tuple[float, float] = (math.nan, math.nan)
    sampled_iqm: float = math.nan
    sampled_iqm_ci: tuple[float, float] = (math.nan, math.nan)
    versus: verdicts.Comparison | None = None  # P(the verdict's reference > this row), per score, and its verdicts
    is_reference: bool = False  # this row is the verdict's reference

    @property
    def test_mean(self) -> float:
        return _mean(self.test_scores)

    @property
    def test_se(self) -> float:
        return _se(self.test_scores)

    @property
    def sampled_mean(self) -> float:
        return _mean(self.sampled_scores)

    @property
    def sampled_se(self) -> float:
        return _se(self.sampled_scores)


def _mean(scores: tuple[float, ...]) -> float:
    return float(np.mean(scores)) if scores else math.nan


def _se(scores: tuple[float, ...]) -> float:
    n = len(scores)
    return float(np.std(scores, ddof=1) / math.sqrt(n)) if n > 1 else math.nan


def rliable_installed() -> bool:
    """Whether the ``stats`` extra (rliable) can be imported."""
    return importlib.util.find_spec("rliable") is not None


def test_scores(row: Row, keys: Sequence[str] = (TEST_KEY,)) -> list[tuple[float, ...]]:
    """Per ``metrics.json`` key (:data:`TEST_KEY`, :data:`SAMPLED_TEST_KEY`), one test return per seed of ``row``
    (the mean over its finished runs with that seed); each run's file is read once."""
    by_seed: list[dict[int, list[float]]] = [defaultdict(list) for _ in keys]
    for run in row.group.scored_runs:
        metrics = Path(run.path) / "metrics.json"
        if run.seed in row.seeds and metrics.is_file():
            values = json.loads(metrics.read_text())
            for key, seeds in zip(keys, by_seed, strict=True):
                value = values.get(key)
                if value is not None and not math.isnan(float(value)):
                    seeds[run.seed].append(float(value))
    return [tuple(float(np.mean(seeds[seed])) for seed in sorted(seeds)) for seeds in by_seed]


def _baseline_of(row: Row, rows: Sequence[Row], baseline: str | None) -> Row | None:
    """The one baseline row with the same env and budget (and algorithm, or srl_model for an algorithm baseline)."""
    if baseline is None or row.is_baseline:
        return None
    by_algo = not any(r.group.srl_model == baseline for r in rows)

    def key(r: Row) -> tuple[Any, ...]:
        same = (r.group.srl_model, r.group.srl_variant) if by_algo else (r.group.algo, r.group.variant)
        return (r.group.env, r.budget, *same)

    matches = [r for r in rows if r.is_baseline and r.n and key(r) == key(row)]
    return matches[0] if len(matches) == 1 else None


def _interval(
    scores: dict[str, list[np.ndarray]], func: Callable[..., np.ndarray], seed: int, reps: int
) -> tuple[float, tuple[float, float]]:
    from rliable import library as rly

    with verdicts.seeded_bootstrap(seed):
        points, intervals = rly.get_interval_estimates(
            scores, func, reps=reps, confidence_interval_size=CONFIDENCE, random_state=np.random.RandomState(seed)
        )
    point, interval = points["x"], intervals["x"]
    return float(point[0]), (float(interval[0][0]), float(interval[1][0]))


def _iqm(scores: Sequence[float], seed: int, reps: int) -> tuple[float, tuple[float, float]]:
    """The IQM of per-seed scores with its 95 % stratified bootstrap CI (NaN without scores)."""
    from rliable import metrics

    if not scores:
        return math.nan, (math.nan, math.nan)
    column = np.asarray(scores, dtype=float)[:, None]  # (seeds, one task)
    return _interval({"x": [column]}, lambda x: np.array([metrics.aggregate_iqm(x)]), seed, reps)


def _reference_of(row: Row, rows: Sequence[Row], reference: str | None) -> Row | None:
    """The row of srl_model ``reference`` with the same env, budget and algorithm as ``row`` (None: none, or itself)."""
    if reference is None:
        return None
    key = (row.group.env, row.budget, row.group.algo, row.group.variant)
    matches = [
        r for r in rows
        if r.n and r.group.srl_model == reference and (r.group.env, r.budget, r.group.algo, r.group.variant) == key
    ]  # fmt: skip
    return matches[0] if len(matches) == 1 and matches[0] is not row else None


def row_stats(
    rows: Sequence[Row],
    baseline: str | None,
    reps: int = REPS,
    seed: int = 0,
    reference: str | None = None,
    confidence: float = CONFIDENCE,
) -> list[RowStats]:
    """The statistics of every row, in order (only the test return when rliable is missing).

    :param reference: an srl_model whose probability of improvement over each other row (same env, budget and
        algorithm), with its CI at ``confidence``, decides a verdict per score (:mod:`rlzoo.results.verdicts`).
    """
    installed = rliable_installed()
    scores = {id(row): test_scores(row, (TEST_KEY, SAMPLED_TEST_KEY)) for row in rows}
    result = []
    for row in rows:
        tests, sampled = scores[id(row)]
        if not installed or not row.n:
            result.append(RowStats(tests, sampled_scores=sampled))
            continue
        iqm, iqm_ci = _iqm(row.scores, seed, reps)
        improvement, improvement_ci = math.nan, (math.nan, math.nan)
        other = _baseline_of(row, rows, baseline)
        if other is not None:
            improvement, improvement_ci = verdicts.probability_of_improvement(
                row.scores, other.scores, CONFIDENCE, reps, seed
            )
        versus = None
        ref = _reference_of(row, rows, reference)
        if ref is not None:
            ref_tests, ref_sampled = scores[id(ref)]
            versus = verdicts.compare_scores(
                (ref.scores, ref_tests, ref_sampled), (row.scores, tests, sampled), confidence, reps, seed
            )
        result.append(
            RowStats(
                tests, iqm, iqm_ci, improvement, improvement_ci, sampled, *_iqm(tests, seed, reps),
                *_iqm(sampled, seed, reps), versus, reference is not None and row.group.srl_model == reference,
            )
        )  # fmt: skip
    return result


def _number(value: float, digits: int = 1) -> str:
    return "—" if math.isnan(value) else f"{value:.{digits}f}"


def has_sampled(stats: Sequence[RowStats]) -> bool:
    """Whether some row's runs played a sampled-action test (``sampled_test=true``): the table shows its column."""
    return any(s.sampled_scores for s in stats)


def header_cells(baseline: str | None, sampled: bool = False, reference: str | None = None) -> list[str]:
    """The columns the statistics add to the results table (``sampled``: the sampled-action test return too;
    ``reference``: P(reference > row) and the verdicts)."""
    return [
        "test return (mean ± SE)",
        *(["sampled test return (mean ± SE)"] if sampled else []),
        "IQM [95 % CI]",
        "test IQM [95 % CI]",
        *(["sampled test IQM [95 % CI]"] if sampled else []),
        *([f"P(> {baseline}) [95 % CI]"] if baseline is not None else []),
        *(verdicts.header(reference) if reference is not None else []),
    ]


def _iqm_cell(iqm: float, ci: tuple[float, float]) -> str:
    return "—" if math.isnan(iqm) else f"{iqm:.1f} [{ci[0]:.1f}, {ci[1]:.1f}]"


def row_cells(
    stats: RowStats, baseline: str | None, is_baseline: bool, sampled: bool = False, reference: str | None = None
) -> list[str]:
    """One row's cells under :func:`header_cells`."""
    cells = [
        f"{_number(stats.test_mean)} ± {_number(stats.test_se)}",
        *([f"{_number(stats.sampled_mean)} ± {_number(stats.sampled_se)}"] if sampled else []),
        _iqm_cell(stats.iqm, stats.iqm_ci),
        _iqm_cell(stats.test_iqm, stats.test_iqm_ci),
        *([_iqm_cell(stats.sampled_iqm, stats.sampled_iqm_ci)] if sampled else []),
    ]
    if baseline is not None:
        p_low, p_high = stats.improvement_ci
        value = f"{stats.improvement:.2f} [{p_low:.2f}, {p_high:.2f}]"
        cells.append("baseline" if is_baseline else "—" if math.isnan(stats.improvement) else value)
    if reference is not None:
        cells += verdicts.cells(stats.versus, stats.is_reference)
    return cells


def csv_cells(stats: RowStats) -> list[Any]:
    """One row's values under :data:`CSV_HEADER` (empty where undefined)."""
    values = [stats.test_mean, stats.test_se, None, stats.iqm, *stats.iqm_ci, stats.improvement, *stats.improvement_ci,
              stats.sampled_mean, stats.sampled_se, stats.test_iqm, *stats.test_iqm_ci, stats.sampled_iqm,
              *stats.sampled_iqm_ci]  # fmt: skip
    cells: list[Any] = ["" if v is None or math.isnan(v) else f"{v:.6g}" for v in values]
    cells[2] = len(stats.test_scores)
    return cells + verdicts.csv_cells(stats.versus)


CAPTION = (
    "train return: each seed's mean over its last {last} training episodes at the budget; test return: each seed's "
    "mean over its test episodes after training (sampled test return, runs with sampled_test=true: the same episodes "
    "with sampled actions); mean ± SE over seeds. IQM: interquartile mean of the seeds' train "
    "returns (test IQM: of their test returns), 95 % stratified bootstrap CI ({reps} resamples, rliable); "
    "P(> baseline): probability that a seed scores above a seed of the baseline (rliable's probability of "
    "improvement), with its 95 % CI. A verdict reads the CI of P(reference > row): above when it lies above 0.5, "
    "below when it lies below, not resolved when it contains 0.5."
)


def plot_profiles(rows: Sequence[Row], folder: Path, reps: int = REPS, seed: int = 0) -> list[Path]:
    """One performance-profile figure (fraction of seeds with a train return above τ, 95 % CI bands) per env at
    its largest budget: ``performance_profile_<env>.png`` in ``folder``; none without rliable."""
    if not rliable_installed():
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rliable import library as rly
    from rliable import plot_utils

    paths = []
    for env in sorted({r.group.env for r in rows if r.n}):
        budget = max(r.budget for r in rows if r.n and r.group.env == env)
        chosen = [r for r in rows if r.n and r.group.env == env and r.budget == budget]
        scores = {r.group.label: np.asarray(r.scores, dtype=float)[:, None] for r in chosen}
        every = np.concatenate([s.ravel() for s in scores.values()])
        taus = np.linspace(every.min() - 1e-6, every.max() + 1e-6, 101)
        np.random.seed(seed)  # create_performance_profile draws from numpy's global generator
        profiles, cis = rly.create_performance_profile(scores, taus, reps=reps)
        figure, axis = plt.subplots(figsize=(7, 4.5))
        plot_utils.plot_performance_profiles(
            profiles, taus, performance_profile_cis=cis, ax=axis, xlabel=r"train return $\tau$",
            ylabel=r"fraction of seeds with return $> \tau$",
        )  # fmt: skip
        axis.set_title(f"{env} at {budget:,} steps", fontsize=10)
        axis.legend(fontsize=7, loc="lower left")
        figure.tight_layout()
        path = folder / f"performance_profile_{_file_name(env)}.png"
        figure.savefig(path, dpi=100)
        plt.close(figure)
        paths.append(path)
    return paths


def _file_name(env: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in env)
