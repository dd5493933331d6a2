"""The results table behind ``rlzoo.plot`` and ``rlzoo.report``: each group's score at a budget, one sample per seed,
and a Welch t-test against a baseline (an srl_model, or an algorithm).

A group's runs that share a seed (a rerun) are one sample: their scores are averaged. Runs that failed are not
scored; the row says how many there were.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from rlzoo.errors import ConfigError, Refused
from rlzoo.results import stats as results_stats
from rlzoo.results.runs import UNFINISHED, Group, RunResult, failure, find_runs, group_runs, read_run
from rlzoo.results.stats import RowStats

AUTO = "auto"
TRAINING_KEYS = {"algo", "env", "srl_model"}


@dataclass(frozen=True)
class Row:
    """One line of the results table: a group's score at one budget, and the test against the baseline.

    :param scores: one score per seed (the mean of the runs sharing that seed), in seed order.
    :param seeds: the seeds of ``scores``.
    :param budget: agent steps; 0 when no run of the group has a scored episode (all failed, say).
    """

    group: Group
    budget: int
    scores: tuple[float, ...]
    seeds: tuple[int, ...] = ()
    p_value: float = math.nan
    is_baseline: bool = False
    statuses: dict[str, int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Distinct seeds scored."""
        return len(self.scores)

    @property
    def mean(self) -> float:
        return float(np.mean(self.scores)) if self.scores else math.nan

    @property
    def se(self) -> float:
        """Standard error of the mean over seeds (sample std / sqrt(n)); NaN with fewer than 2 seeds."""
        return float(np.std(self.scores, ddof=1) / math.sqrt(self.n)) if self.n > 1 else math.nan

    @property
    def runs_label(self) -> str:
        """``3 done``, ``2 done, 1 failed`` ...: the group's runs by status."""
        return ", ".join(f"{n} {status}" for status, n in self.statuses.items()) or "none"


def welch_p_value(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Welch t-test p-value (unequal variances); NaN with fewer than 2 values in either sample."""
    if len(a) < 2 or len(b) < 2:
        return math.nan
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def is_baseline(group: Group, baseline: str | None) -> bool:
    """Whether ``group`` is a baseline: ``baseline`` names its srl_model, or its algorithm (any case)."""
    return baseline is not None and baseline in (group.srl_model, group.algo_name.lower(), group.algo_name)


def _compared_within(row: Row, by_algo: bool) -> tuple[Any, ...]:
    """What a row shares with its baseline: the env, the budget and the algorithm (or the srl_model)."""
    group = row.group
    same = (group.srl_model, group.srl_variant) if by_algo else (group.algo, group.variant)
    return (group.env, row.budget, *same)


def seed_scores(group: Group, budget: int, last: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """One score per seed at ``budget``: the mean over the group's scored runs with that seed that reached it."""
    by_seed: dict[int, list[float]] = defaultdict(list)
    for run in group.scored_runs:
        if run.reached >= budget and not math.isnan(score := run.score(budget, last)):
            by_seed[run.seed].append(score)
    seeds = tuple(sorted(by_seed))
    return seeds, tuple(float(np.mean(by_seed[seed])) for seed in seeds)


def results_table(
    groups: Sequence[Group], budgets: Sequence[int] | None, baseline: str | None, last: int = 100
) -> list[Row]:
    """Rows (group, budget) with the seeds that reached the budget, sorted by env, budget, then mean (best first).
    A group without any scored run gets one row without scores (budget 0), which says what became of its runs.

    :param budgets: agent steps; None: each group's :attr:`Group.common_budget`.
    :param baseline: an srl_model (p-values against it within each env, algorithm and budget) or an algorithm
        (within each env, srl_model and budget); a row without exactly one baseline row to compare with has none.
    :param last: episodes averaged for a run's score.
    """
    rows = []
    for group in groups:
        statuses = group.status_counts()
        if not group.scored_runs:
            rows.append(Row(group, 0, (), statuses=statuses, is_baseline=is_baseline(group, baseline)))
            continue
        for budget in budgets or [group.common_budget]:
            seeds, scores = seed_scores(group, budget, last)
            if scores:
                rows.append(
                    Row(group, budget, scores, seeds, is_baseline=is_baseline(group, baseline), statuses=statuses)
                )
    by_algo = baseline is not None and not any(g.srl_model == baseline for g in groups)
    tested = []
    for row in rows:
        key = _compared_within(row, by_algo)
        matches = [other for other in rows if other.is_baseline and other.n and _compared_within(other, by_algo) == key]
        p_value = math.nan
        if len(matches) == 1 and not row.is_baseline:
            p_value = welch_p_value(row.scores, matches[0].scores)
        tested.append(Row(row.group, row.budget, row.scores, row.seeds, p_value, row.is_baseline, row.statuses))
    return sorted(
        tested, key=lambda r: (r.group.env, r.budget if r.n else math.inf, -r.mean if r.n else 0, r.group.label)
    )


@dataclass(frozen=True)
class Comparison:
    """The runs under a folder, grouped and compared: what ``rlzoo.plot`` and ``rlzoo.report`` show."""

    results: list[RunResult]
    groups: list[Group]
    rows: list[Row]
    baseline: str | None
    notes: list[str]


def compare(
    folder: str | Path, budgets: Sequence[int] | None = None, baseline: str | None = AUTO, last: int = 100
) -> Comparison:
    """Find, read, group and compare the runs under ``folder`` (see :func:`results_table`).

    :param baseline: an srl_model or algorithm, ``auto`` (``ground_truth`` when some runs have it), or None.
    :raise ConfigError: no run dir under ``folder``, none with a training episode or failed, an unknown baseline, or
        budgets no run reached.
    """
    runs = find_runs(folder)
    if not runs:
        raise ConfigError(
            f"dir={folder} holds no run dirs (no config.yaml in it or below it); pass a folder that "
            "python -m rlzoo.train wrote into, e.g. outputs/ or multirun/<date>/<time>"
        )
    notes: list[str] = []
    results = []
    for run in runs:
        try:
            result = read_run(run)
        except Refused:  # a config that is not plain YAML (a tag ...): the command fails, naming it
            raise
        except Exception as error:  # a config.yaml or CSV that is not what rlzoo writes
            notes.append(f"skipped {run.path}: cannot read it ({error})")
            continue
        if set(result.config) >= TRAINING_KEYS:  # not a dataset or an encoder folder (their config.yaml differs)
            results.append(result)
    if not results:
        raise ConfigError(f"dir={folder} holds no training runs (its config.yaml files are datasets' or encoders')")
    notes += _status_notes(results)
    if not any(r.scored or r.failed for r in results):
        raise ConfigError(f"dir={folder}: none of its {len(runs)} run dir(s) has a training episode yet")
    groups = group_runs([r for r in results if r.scored or r.failed])
    chosen = _baseline(baseline, groups)
    notes += _budget_notes(groups, budgets) + _implied_notes(groups)
    rows = results_table(groups, budgets, chosen, last)
    if not any(row.n for row in rows):
        raise ConfigError(f"budgets={list(budgets or [])}: no run reached any of them; {_reached(groups)}")
    return Comparison(results, groups, rows, chosen, notes + _baseline_notes(rows, chosen))


def _status_notes(results: Sequence[RunResult]) -> list[str]:
    notes = [f"{r.path}: failed ({failure(r)}); not scored" for r in results if r.failed]
    notes += [f"{r.path}: no complete training episode yet" for r in results if not r.failed and not len(r.returns)]
    unfinished = [r for r in results if r.status == UNFINISHED and len(r.returns)]
    if unfinished:
        notes.append(
            f"{len(unfinished)} run(s) unfinished (still training or stopped; no metrics.json): scored and plotted up "
            f"to their latest episode: {', '.join(str(r.path) for r in unfinished)}"
        )
    return notes


def _baseline(name: str | None, groups: Sequence[Group]) -> str | None:
    if name == AUTO:
        return "ground_truth" if any(g.srl_model == "ground_truth" for g in groups) else None
    if name is not None and not any(is_baseline(g, name) for g in groups):
        srl_models, algos = sorted({g.srl_model for g in groups}), sorted({g.algo_name for g in groups})
        raise ConfigError(
            f"baseline={name!r} is neither an srl_model nor an algorithm of the runs (srl_models: "
            f"{', '.join(srl_models)}; algorithms: {', '.join(algos)}); choose one, or baseline=null"
        )
    return name


def _reached(groups: Sequence[Group]) -> str:
    reached = [f"{g.env} {g.label}: {max(r.reached for r in g.scored_runs)}" for g in groups if g.scored_runs]
    return "budgets reached: " + ", ".join(reached)


def _budget_notes(groups: Sequence[Group], budgets: Sequence[int] | None) -> list[str]:
    notes = []
    for group in groups:
        where = f"{group.label} on {group.env}"
        counts = Counter((r.budget if r.finished else r.reached, r.finished) for r in group.scored_runs)
        if budgets is None and len(counts) > 1:
            listed = ", ".join(
                f"{steps} ({n} run{'s' * (n > 1)}{'' if done else ', unfinished'})"
                for (steps, done), n in sorted(counts.items(), reverse=True)
            )
            notes.append(
                f"runs of {where} reached different step counts: {listed}; the table compares them at "
                f"{group.common_budget}, which all reached (choose budgets with budgets=[...])"
            )
        for budget in budgets or ():
            short = [r for r in group.scored_runs if r.reached < budget]
            if short:
                notes.append(
                    f"at budget {budget}, {len(short)} of {len(group.scored_runs)} run(s) of {where} are left out "
                    f"(they reached only {', '.join(str(r.reached) for r in short)} steps)"
                )
    return notes


def _implied_notes(groups: Sequence[Group]) -> list[str]:
    implied = sorted({f"{g.srl_model}: {', '.join(g.implied)}" for g in groups if g.implied})
    if not implied:
        return []
    return [f"keys that follow the representation, not compared apart: {'; '.join(implied)}"]


def _baseline_notes(rows: Sequence[Row], baseline: str | None) -> list[str]:
    if baseline is None:
        return ["no baseline: the table has no p-values (name one with baseline=<srl_model or algorithm>)"]
    missing = sorted(
        {
            f"{r.group.label} on {r.group.env} at {r.budget}"
            for r in rows
            if r.n and not r.is_baseline and math.isnan(r.p_value)
        }
    )
    if not missing:
        return []
    by_algo = any(r.is_baseline and r.group.srl_model != baseline for r in rows)
    shared = "srl_model" if by_algo else "algorithm"
    return [
        f"no p-value for {'; '.join(missing)}: a p-value needs one {baseline} group with the same env, budget and "
        f"{shared}, and 2+ seeds on each side"
    ]


TABLE_HEADER = ("env", "algo", "srl_model", "budget (steps)", "seeds", "runs")


def table_cells(
    rows: Sequence[Row], baseline: str | None, stats: Sequence[RowStats] | None = None, reference: str | None = None
) -> tuple[list[str], list[list[str]]]:
    """The table as text cells (the header, then one line per row), for Markdown, HTML and W&B alike: per score of
    :data:`rlzoo.results.scores.SCORES` that some row has (the training return always) its mean ± SE over seeds; with
    ``stats`` (:func:`rlzoo.results.stats.row_stats` of the rows) each one's IQM and P(improvement) too, and with
    ``reference`` P(reference > row) and the verdicts. The p column reads ``baseline`` only for a baseline row that
    another row is compared with, ``—`` where there is none."""
    iqm = stats is not None
    every = stats if stats is not None else results_stats.row_stats(rows, None, reps=0, values_only=True)
    shown = results_stats.shown_scores(every)
    header = [*TABLE_HEADER, *results_stats.header_cells(shown, baseline, reference, iqm)]
    header += [f"p vs {baseline}"] if baseline is not None else []
    compared = _compared_baselines(rows, baseline)
    lines: list[list[str]] = []
    for r, stat in zip(rows, every, strict=True):
        group = r.group
        line = [
            group.env,
            group.algo_name + (f" ({', '.join(group.variant)})" if group.variant else ""),
            group.observations + (f" ({', '.join(group.srl_variant)})" if group.srl_variant else ""),
            f"{r.budget:,}" if r.n else "—",
            str(r.n),
            r.runs_label,
            *results_stats.row_cells(stat, shown, baseline, r.is_baseline, reference, iqm),
        ]
        if baseline is not None:
            line.append("baseline" if any(r is b for b in compared) else _p_value(r.p_value))
        lines.append(line)
    return header, lines


def _compared_baselines(rows: Sequence[Row], baseline: str | None) -> list[Row]:
    """The baseline rows that some other row is compared with (same env, budget and algorithm or srl_model)."""
    by_algo = baseline is not None and not any(r.group.srl_model == baseline for r in rows)
    return [
        b
        for b in rows
        if b.is_baseline
        and b.n
        and any(
            not r.is_baseline and r.n and _compared_within(r, by_algo) == _compared_within(b, by_algo) for r in rows
        )
    ]


def _p_value(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.3g}"
