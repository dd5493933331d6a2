"""Verdicts from confidence intervals: srl_splits above, below or not resolved against each other representation,
read from the CI of rliable's probability of improvement, in results.csv, results.md and the pipeline's keys."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from extras import require_extra
from rlzoo.errors import ConfigError
from rlzoo.pipeline.spec import pipeline_spec
from rlzoo.plot import PlotSettings, plot
from rlzoo.results.verdicts import ABOVE, BELOW, verdict
from test_pipeline import TINY
from test_plot import make_run

require_extra("rliable", "stats")

SEEDS = range(10)


def _runs(folder: Path, scores: dict[str, list[float]], tests: dict[str, list[float]]) -> dict[str, dict[str, str]]:
    """Ten seeds per representation with the given last-100 and greedy test returns; the table's rows by srl_model."""
    for method, values in scores.items():
        for seed in SEEDS:
            path = make_run(folder / f"{method}{seed}", [[values[seed]] * 10], [[5] * 10], srl_model=method, seed=seed)
            metrics = {"train/timesteps": 50, "test/mean_return": tests[method][seed]}
            (path / "metrics.json").write_text(json.dumps(metrics))
    settings = PlotSettings(dir=str(folder), out=str(folder / "plots"), verdict_of="srl_splits", verdict_ci=0.95)
    plot(settings, log=lambda _: None)
    with (folder / "plots" / "results.csv").open() as stream:
        return {row["srl_model"]: row for row in csv.DictReader(stream)}


def test_the_verdict_follows_the_ci_of_the_probability_of_improvement(tmp_path: Path) -> None:
    high = [230.0 + s for s in SEEDS]  # every seed above every seed of low
    low = [200.0 + s for s in SEEDS]
    mixed = [215.0 + (-1) ** s * (s + 10) for s in SEEDS]  # interleaved with srl_splits' own spread
    rows = _runs(
        tmp_path,
        {"srl_splits": high, "random": low, "ground_truth": [300.0 + s for s in SEEDS], "autoencoder": high[::-1]},
        {"srl_splits": low, "random": high, "ground_truth": high, "autoencoder": mixed},
    )
    random, truth, autoencoder = rows["random"], rows["ground_truth"], rows["autoencoder"]
    # srl_splits' last-100 returns lie above all of random's: P = 1, its CI above 0.5.
    assert float(random["p_of_train"]) == pytest.approx(1.0) and float(random["p_of_ci_low_train"]) > 0.5
    assert random["verdict_train"] == ABOVE
    # ... and its greedy test returns below all of random's.
    assert float(random["p_of_greedy_test"]) == pytest.approx(0.0) and random["verdict_greedy_test"] == BELOW
    assert truth["verdict_train"] == BELOW
    # The same values in another seed order: P = 0.5, the CI contains it.
    assert float(autoencoder["p_of_train"]) == pytest.approx(0.5)
    assert float(autoencoder["p_of_ci_low_train"]) < 0.5 < float(autoencoder["p_of_ci_high_train"])
    assert autoencoder["verdict_train"] == "not resolved at 10 seeds"
    assert rows["srl_splits"]["verdict_train"] == ""  # the reference itself
    for row in rows.values():  # the test IQM lies in its own CI
        low_ci, iqm, high_ci = (float(row[k]) for k in ("test_iqm_ci_low", "test_iqm", "test_iqm_ci_high"))
        assert low_ci <= iqm <= high_ci
    markdown = (tmp_path / "plots" / "results.md").read_text()
    assert "srl_splits is (train / greedy test / sampled test)" in markdown
    assert f"{ABOVE} / {BELOW} / —" in markdown and "test return IQM [95 % CI]" in markdown


@pytest.mark.parametrize(
    ("ci", "expected"),
    [
        ((0.51, 0.9), ABOVE),
        ((0.1, 0.49), BELOW),
        ((0.3, 0.7), "not resolved at 10 seeds"),
        ((0.5, 0.8), "not resolved at 10 seeds"),
    ],
)
def test_verdict_rule(ci: tuple[float, float], expected: str) -> None:
    assert verdict(ci, 10) == expected


def test_no_verdict_from_fewer_than_five_seeds() -> None:
    assert verdict((0.56, 1.0), 3) == "not resolved at 3 seeds"
    assert verdict((0.56, 1.0), 5) == ABOVE


def test_a_reference_that_no_run_has_is_refused(tmp_path: Path) -> None:
    make_run(tmp_path / "run", [[10.0] * 10], [[5] * 10])
    with pytest.raises(ConfigError, match=r"verdict_of='srl_split' is no srl_model of the runs \(ground_truth\)"):
        plot(PlotSettings(dir=str(tmp_path), verdict_of="srl_split"), log=lambda _: None)
    assert not (tmp_path / "plots").exists()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("pipeline.sweep.seed=[]", r"the sweep's seed axis is empty \(seed=\[\]\); allowed: one value or more"),
        ("pipeline.sweep.seed=[0,1,1]", r"the sweep's seed axis repeats 1 \(seed=\[0, 1, 1\]\); allowed: distinct"),
        ("pipeline.verdict_ci=1.5", r"pipeline.verdict_ci=1.5; allowed: a confidence level between 0 and 1"),
        ("pipeline.verdict_of=srl_split", r"pipeline.verdict_of='srl_split': not an option of conf/srl_model"),
    ],
)
def test_bad_seed_lists_and_verdict_keys_are_refused(tmp_path: Path, override: str, message: str) -> None:
    folder = tmp_path / "pipe"
    with pytest.raises(ConfigError, match=message):
        pipeline_spec([*TINY, f"pipeline.dir={folder}", override])
    assert not folder.exists()


def test_the_small_benchmark_runs_ten_seeds_with_srl_splits_verdicts(tmp_path: Path) -> None:
    spec = pipeline_spec(["experiment=srl_benchmark_small", f"pipeline.dir={tmp_path / 'pipe'}"])
    assert spec.axes["seed"] == list(range(10))
    assert spec.verdict_of == "srl_splits" and spec.verdict_ci == 0.95
