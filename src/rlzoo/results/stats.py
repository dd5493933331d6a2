"""Aggregate statistics of the results table with rliable (Agarwal et al., 2021, "Deep RL at the edge of the
statistical precipice"): per row and per score (:data:`rlzoo.results.scores.SCORES`), its values per seed (mean ± SE),
their interquartile mean (IQM) with a 95 % stratified bootstrap CI and that IQM as a percentage of a reference row's;
the probability of improvement over the baseline row with its CI; a performance profile per env and budget.

rliable is the optional extra ``stats`` (``pip install -e ".[stats]"``); without it the rliable cells stay empty and
:data:`MISSING_NOTE` says how to fill them. The training return is the table's own score (one per seed,
see :func:`rlzoo.results.comparison.seed_scores`); with one env the stratified bootstrap resamples seeds.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from rlzoo.results.runs import Group

from rlzoo.errors import Refused
from rlzoo.results import verdicts
from rlzoo.results.scores import SCORES, TRAIN, Score, metric_scores, verdict_scores
from rlzoo.rundir import RunDir


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
STATS_INSTALL = 'pip install -e ".[stats]"'
MISSING_NOTE = f"IQM, its CI and P(improvement) need rliable: {STATS_INSTALL}"
IQM_TITLE = "IQM [95 % CI]"


@dataclass(frozen=True)
class ScoreStats:
    """One score of one row: its value per seed, their IQM with its CI, and that IQM as a percentage of the IQM of
    the reference representation's row with its CI (NaN where undefined)."""

    values: tuple[float, ...] = ()
    iqm: float = math.nan
    iqm_ci: tuple[float, float] = (math.nan, math.nan)
    relative: float = math.nan
    relative_ci: tuple[float, float] = (math.nan, math.nan)

    @property
    def mean(self) -> float:
        return float(np.mean(self.values)) if self.values else math.nan

    @property
    def se(self) -> float:
        n = len(self.values)
        return float(np.std(self.values, ddof=1) / math.sqrt(n)) if n > 1 else math.nan


@dataclass(frozen=True)
class RowStats:
    """The statistics of one row: per score of :data:`rlzoo.results.scores.SCORES`, and on the training return
    P(improvement) over the baseline row and P(reference > row) per verdict score (NaN where undefined)."""

    scores: Mapping[str, ScoreStats] = field(default_factory=dict)
    improvement: float = math.nan  # P(a seed of this row scores above a seed of the baseline row)
    improvement_ci: tuple[float, float] = (math.nan, math.nan)
    versus: verdicts.Comparison | None = None  # P(the verdict's reference > this row), per score, and its verdicts
    is_reference: bool = False  # this row is the verdict's reference

    def of(self, score: Score) -> ScoreStats:
        """The statistics of ``score`` (empty when the row has none)."""
        return self.scores.get(score.name, ScoreStats())


def rliable_installed() -> bool:
    """Whether the ``stats`` extra (rliable) can be imported."""
    return importlib.util.find_spec("rliable") is not None


def score_values(row: Row) -> dict[str, tuple[float, ...]]:
    """Per score, one value per seed of ``row``: the training return (the row's own scores), and each
    ``metrics.json`` score as the mean over the finished runs with that seed; each run's file is read once."""
    chosen = metric_scores()
    by_seed: dict[str, dict[int, list[float]]] = {score.name: defaultdict(list) for score in chosen}
    for run in row.group.scored_runs:
        found = RunDir(Path(run.path))
        if run.seed in row.seeds and os.path.lexists(found.metrics):
            values = found.read_metrics()  # through the confined layer: a plain file, capped, a mapping
            for score in chosen:
                key = str(score.key)  # a metric score has its key
                value = _figure(found.metrics, key, values.get(key))
                if value is not None and not math.isnan(value):
                    by_seed[score.name][run.seed].append(value)
    result = {TRAIN.name: tuple(row.scores)}
    for name, seeds in by_seed.items():
        result[name] = tuple(float(np.mean(seeds[seed])) for seed in sorted(seeds))
    return {name: result[name] for name in SCORES if name in result}


def _figure(path: Path, key: str, value: Any) -> float | None:
    """A metric of ``path`` as a number (None: absent); one line when it is something else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Refused(f"{path}: {key}={str(value)[:80]!r} is not a number; a run's metrics are numbers")
    return float(value)


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


def _iqm_ratio(
    ours: Sequence[float], theirs: Sequence[float], seed: int, reps: int
) -> tuple[float, tuple[float, float]]:
    """100 * IQM(ours) / IQM(theirs) with its 95 % CI: rliable's stratified bootstrap resamples the seeds of each
    side apart (NaN when a side has no scores or the reference's IQM is 0)."""
    from rliable import metrics

    def ratio(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        below = metrics.aggregate_iqm(y)
        return np.array([100.0 * metrics.aggregate_iqm(x) / below if below else math.nan])

    if not ours or not theirs:
        return math.nan, (math.nan, math.nan)
    columns = [np.asarray(ours, dtype=float)[:, None], np.asarray(theirs, dtype=float)[:, None]]
    return _interval({"x": columns}, ratio, seed, reps)


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


@dataclass(frozen=True)
class _Settings:
    baseline: str | None
    reps: int
    seed: int
    reference: str | None
    confidence: float
    relative_to: str | None


def _score_stats(
    values: Mapping[str, tuple[float, ...]], relative: Mapping[str, tuple[float, ...]] | None, settings: _Settings
) -> dict[str, ScoreStats]:
    """Each score's IQM with its CI, and (against ``relative``, the reference row's values) its ratio of IQMs."""
    result = {}
    for name, mine in values.items():
        ratio = (math.nan, (math.nan, math.nan))
        if relative is not None and SCORES[name].relative:
            ratio = _iqm_ratio(mine, relative.get(name, ()), settings.seed, settings.reps)
        result[name] = ScoreStats(mine, *_iqm(mine, settings.seed, settings.reps), *ratio)
    return result


def _row_stats(
    row: Row, rows: Sequence[Row], values: dict[int, dict[str, tuple[float, ...]]], settings: _Settings
) -> RowStats:
    relative = _reference_of(row, rows, settings.relative_to)
    scores = _score_stats(values[id(row)], None if relative is None else values[id(relative)], settings)
    improvement, improvement_ci = math.nan, (math.nan, math.nan)
    other = _baseline_of(row, rows, settings.baseline)
    if other is not None:
        improvement, improvement_ci = verdicts.probability_of_improvement(
            row.scores, other.scores, CONFIDENCE, settings.reps, settings.seed
        )
    versus = None
    ref = _reference_of(row, rows, settings.reference)
    if ref is not None:
        judged = verdict_scores()
        versus = verdicts.compare_scores(
            [values[id(ref)].get(s.name, ()) for s in judged], [values[id(row)].get(s.name, ()) for s in judged],
            settings.confidence, settings.reps, settings.seed,
        )  # fmt: skip
    is_reference = settings.reference is not None and row.group.srl_model == settings.reference
    return RowStats(scores, improvement, improvement_ci, versus, is_reference)


def row_stats(
    rows: Sequence[Row],
    baseline: str | None,
    reps: int = REPS,
    seed: int = 0,
    reference: str | None = None,
    confidence: float = CONFIDENCE,
    relative_to: str | None = None,
    values_only: bool = False,
) -> list[RowStats]:
    """The statistics of every row, in order (only the scores' values with ``values_only`` or without rliable).

    :param reference: an srl_model whose probability of improvement over each other row (same env, budget and
        algorithm), with its CI at ``confidence``, decides a verdict per verdict score (:mod:`rlzoo.results.verdicts`).
    :param relative_to: an srl_model whose IQMs the other rows' (same env, budget and algorithm) are given as a
        percentage of, per score that allows it (:attr:`rlzoo.results.scores.Score.relative`).
    """
    settings = _Settings(baseline, reps, seed, reference, confidence, relative_to)
    values = {id(row): score_values(row) for row in rows}
    plain = values_only or not rliable_installed()
    return [
        _row_stats(row, rows, values, settings)
        if row.n and not plain
        else RowStats({name: ScoreStats(v) for name, v in values[id(row)].items()})
        for row in rows
    ]


def shown_scores(stats: Sequence[RowStats]) -> list[Score]:
    """The scores a table shows: the training return, and each other score some row has a value of."""
    return [s for s in SCORES.values() if s is TRAIN or any(stat.of(s).values for stat in stats)]


def header_cells(
    shown: Sequence[Score], baseline: str | None, reference: str | None = None, iqm: bool = True
) -> list[str]:
    """The score columns of the results table: mean ± SE of each score ``shown``, then (``iqm``: the statistics were
    computed) their IQMs, P(> baseline), and with ``reference`` P(reference > row) and the verdicts."""
    return [
        *(f"{score.title} (mean ± SE)" for score in shown),
        *((f"{score.title} {IQM_TITLE}" for score in shown) if iqm else ()),
        *([f"P(> {baseline}) [95 % CI]"] if baseline is not None and iqm else []),
        *(verdicts.header(reference) if reference is not None and iqm else []),
    ]


def row_cells(
    stats: RowStats,
    shown: Sequence[Score],
    baseline: str | None,
    is_baseline: bool,
    reference: str | None = None,
    iqm: bool = True,
) -> list[str]:
    """One row's cells under :func:`header_cells`."""
    cells = [f"{s.format(stats.of(s).mean)} ± {s.format(stats.of(s).se)}" for s in shown]
    if not iqm:
        return cells
    cells += [s.interval(stats.of(s).iqm, stats.of(s).iqm_ci) for s in shown]
    if baseline is not None:
        p_low, p_high = stats.improvement_ci
        value = f"{stats.improvement:.2f} [{p_low:.2f}, {p_high:.2f}]"
        cells.append("baseline" if is_baseline else "—" if math.isnan(stats.improvement) else value)
    if reference is not None:
        cells += verdicts.cells(stats.versus, stats.is_reference)
    return cells


def csv_header() -> list[str]:
    """The statistics' CSV columns: per score its seeds, mean, SE, IQM with its CI and IQM as a percentage of the
    reference's with its CI; P(improvement) with its CI; the verdicts' columns."""
    columns = ("seeds", "mean", "se", "iqm", "iqm_ci_low", "iqm_ci_high", "pct_of_ref", "pct_of_ref_ci_low",
               "pct_of_ref_ci_high")  # fmt: skip
    per_score = [f"{score.csv}{column}" for score in SCORES.values() for column in columns]
    return [*per_score, "p_improvement", "p_improvement_ci_low", "p_improvement_ci_high", *verdicts.csv_header()]


def csv_cells(stats: RowStats) -> list[Any]:
    """One row's values under :func:`csv_header` (empty where undefined)."""
    cells: list[Any] = []
    for score in SCORES.values():
        of = stats.of(score)
        values = [of.mean, of.se, of.iqm, *of.iqm_ci, of.relative, *of.relative_ci]
        cells += [len(of.values), *(_csv_number(v) for v in values)]
    cells += [_csv_number(v) for v in (stats.improvement, *stats.improvement_ci)]
    return cells + verdicts.csv_cells(stats.versus)


def _csv_number(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.6g}"


CAPTION = (
    "train return: each seed's mean over its last {last} training episodes at the budget; test return: each seed's "
    "mean over its test episodes after training (sampled test return, runs with sampled_test=true: the same episodes "
    "with sampled actions; test success: the share of them that succeeded); mean ± SE over seeds. IQM: interquartile "
    "mean of a score over the seeds, 95 % stratified bootstrap CI ({reps} resamples, rliable); "
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
