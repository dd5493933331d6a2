"""Verdicts read from confidence intervals: is one representation (``verdict_of``, e.g. srl_splits) above or below
each other row of the results table?

For a reference row R and another row X with the same env, budget and algorithm, the probability of improvement
P(R > X) (rliable: the chance that a seed of R scores above a seed of X, ties counting half) is estimated with its
stratified bootstrap CI, once per score that verdicts read (:func:`rlzoo.results.scores.verdict_scores`: the
last-100 training return, the greedy test return and the sampled test return). The verdict follows the CI alone:
**above** when its lower end is above 0.5, **below** when its upper end is below 0.5, and **not resolved at N seeds**
when it contains 0.5 (N: the smaller seed count of the two rows), or when either row has fewer than
:data:`MIN_SEEDS` seeds: a bootstrap over 3 seeds resamples too few values for its interval to mean anything
(srl_splits against random features at 3 seeds gives [0.56, 1.00]), so no verdict comes from it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from rlzoo.errors import ConfigError
from rlzoo.results.scores import verdict_scores

ABOVE, BELOW = "above", "below"
MIN_SEEDS = 5  # fewer seeds on either side: never a verdict


def csv_header() -> list[str]:
    """The verdicts' CSV columns: per verdict score P(reference > row) and its CI, then each verdict."""
    names = [score.name.replace(" ", "_") for score in verdict_scores()]
    probabilities = [f"{prefix}_{name}" for name in names for prefix in ("p_of", "p_of_ci_low", "p_of_ci_high")]
    return probabilities + [f"verdict_{name}" for name in names]


def check_reference(reference: str | None, srl_models: Sequence[str]) -> None:
    """Refuse a verdict reference that no run has, naming the srl_models there are."""
    if reference is not None and reference not in srl_models:
        raise ConfigError(
            f"verdict_of={reference!r} is no srl_model of the runs ({', '.join(sorted(set(srl_models)))}); "
            "choose one, or verdict_of=null"
        )


def check_confidence(value: object, key: str) -> float:
    """A verdict CI level, refused outside (0, 1) in one line naming ``key``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ConfigError(f"{key}={value!r}; allowed: a confidence level between 0 and 1, e.g. 0.95")
    return float(value)


def unresolved(seeds: int) -> str:
    return f"not resolved at {seeds} seeds"


def verdict(ci: tuple[float, float], seeds: int) -> str:
    """``above`` / ``below`` / ``not resolved at <seeds> seeds`` from a CI of P(reference > other)."""
    low, high = ci
    if math.isnan(low) or math.isnan(high):
        return ""
    if seeds < MIN_SEEDS:
        return unresolved(seeds)
    if low > 0.5:
        return ABOVE
    if high < 0.5:
        return BELOW
    return unresolved(seeds)


@dataclass(frozen=True)
class Comparison:
    """P(reference > row) per verdict score with its CI and verdict (NaN and empty where a side has no score)."""

    points: tuple[float, ...]
    intervals: tuple[tuple[float, float], ...]
    verdicts: tuple[str, ...]

    @property
    def defined(self) -> bool:
        return any(not math.isnan(p) for p in self.points)


@contextmanager
def seeded_bootstrap(seed: int) -> Iterator[None]:
    """Make a bootstrap of rliable's the same on every call: arch draws part of its resamples from numpy's global
    generator whatever ``random_state`` says, so that generator is seeded here (and restored after); arch 7's
    warning that rliable's ``random_state`` keyword is deprecated is silenced."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        np.random.set_state(state)


def probability_of_improvement(
    reference: Sequence[float], other: Sequence[float], confidence: float, reps: int, seed: int
) -> tuple[float, tuple[float, float]]:
    """P(a seed of ``reference`` scores above a seed of ``other``) with its stratified bootstrap CI (rliable)."""
    from rliable import library as rly
    from rliable import metrics

    scores = {"x": [np.asarray(reference, float)[:, None], np.asarray(other, float)[:, None]]}
    with seeded_bootstrap(seed):
        points, intervals = rly.get_interval_estimates(
            scores,
            lambda x, y: np.array([metrics.probability_of_improvement(x, y)]),
            reps=reps,
            confidence_interval_size=confidence,
            random_state=np.random.RandomState(seed),
        )
    return float(points["x"][0]), (float(intervals["x"][0][0]), float(intervals["x"][1][0]))


def compare_scores(
    reference: Sequence[Sequence[float]], other: Sequence[Sequence[float]], confidence: float, reps: int, seed: int
) -> Comparison:
    """:class:`Comparison` of two rows' scores, given per verdict score (one value per seed each)."""
    points, intervals, verdicts = [], [], []
    for ours, theirs in zip(reference, other, strict=True):
        if len(ours) < 1 or len(theirs) < 1:
            points.append(math.nan)
            intervals.append((math.nan, math.nan))
            verdicts.append("")
            continue
        point, interval = probability_of_improvement(ours, theirs, confidence, reps, seed)
        points.append(point)
        intervals.append(interval)
        verdicts.append(verdict(interval, min(len(ours), len(theirs))))
    return Comparison(tuple(points), tuple(intervals), tuple(verdicts))


def cells(comparison: Comparison | None, is_reference: bool) -> list[str]:
    """The table's two cells: P(reference > row) on the first verdict score (the training return) [CI], and the
    verdict per verdict score (``reference`` on the reference's own row, ``—`` where there is nothing to compare)."""
    if is_reference:
        return ["reference", "reference"]
    if comparison is None or not comparison.defined:
        return ["—", "—"]
    point, (low, high) = comparison.points[0], comparison.intervals[0]
    probability = "—" if math.isnan(point) else f"{point:.2f} [{low:.2f}, {high:.2f}]"
    return [probability, " / ".join(v or "—" for v in comparison.verdicts)]


def header(reference: str) -> list[str]:
    names = [score.name for score in verdict_scores()]
    return [f"P({reference} > row), {names[0]} [CI]", f"{reference} is ({' / '.join(names)})"]


def csv_cells(comparison: Comparison | None) -> list[str]:
    """The values under :func:`csv_header` (empty where undefined)."""
    if comparison is None:
        return [""] * len(csv_header())
    numbers = [
        "" if math.isnan(v) else f"{v:.6g}"
        for point, interval in zip(comparison.points, comparison.intervals, strict=True)
        for v in (point, *interval)
    ]
    return [*numbers, *comparison.verdicts]
