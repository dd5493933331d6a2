"""rliable statistics in the results table: results.csv carries IQM, its CI, P(improvement) and the test return."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from extras import require_extra
from rlzoo.plot import PlotSettings, plot
from test_plot import make_run

require_extra("rliable", "stats")

SCORES = {"ground_truth": [236.0, 233.0, 238.0, 235.0], "srl_splits": [200.0, 230.0, 180.0, 215.0]}
TESTS = {"ground_truth": [237.9, 232.8, 238.2, 236.0], "srl_splits": [190.0, 220.0, 170.0, 210.0]}


def test_results_csv_has_iqm_inside_its_ci_and_the_test_return(tmp_path: Path) -> None:
    for method, values in SCORES.items():
        for seed, value in enumerate(values):
            path = make_run(tmp_path / f"{method}{seed}", [[value] * 10], [[5] * 10], srl_model=method, seed=seed)
            metrics = {"train/timesteps": 50, "test/mean_return": TESTS[method][seed]}
            (path / "metrics.json").write_text(json.dumps(metrics))
    report = plot(PlotSettings(dir=str(tmp_path), out=str(tmp_path / "plots")), log=lambda _: None)
    with (tmp_path / "plots" / "results.csv").open() as stream:
        table = {row["srl_model"]: row for row in csv.DictReader(stream)}
    for method, row in table.items():
        iqm, low, high = float(row["iqm"]), float(row["iqm_ci_low"]), float(row["iqm_ci_high"])
        assert low <= iqm <= high and low < high
        assert float(row["test_mean"]) == pytest.approx(sum(TESTS[method]) / 4, rel=1e-5)
        assert row["test_seeds"] == "4"
    # IQM of 4 seeds: the mean of the middle two.
    assert float(table["srl_splits"]["iqm"]) == pytest.approx((200.0 + 215.0) / 2)
    assert table["ground_truth"]["p_improvement"] == ""  # the baseline itself
    improvement = float(table["srl_splits"]["p_improvement"])
    assert improvement == pytest.approx(0.0)  # every srl_splits seed is below every ground-truth seed
    assert float(table["srl_splits"]["p_improvement_ci_low"]) <= improvement
    markdown = (tmp_path / "plots" / "results.md").read_text()
    assert "train return (mean ± SE)" in markdown and "IQM [95 % CI]" in markdown
    assert "P(> ground_truth) [95 % CI]" in markdown and "test return (mean ± SE)" in markdown
    assert "sampled test return" not in markdown and table["srl_splits"]["sampled_test_mean"] == ""
    profile = tmp_path / "plots" / "performance_profile_CartPole-v1.png"
    assert profile in report.profiles and profile.stat().st_size > 0


def test_a_sampled_test_gets_its_own_column(tmp_path: Path) -> None:
    """Runs with sampled_test=true: results.csv and the table carry the sampled-action test return beside the greedy."""
    sampled = {"ground_truth": [235.0, 236.0], "srl_splits": [219.0, 221.0]}
    for method, values in sampled.items():
        for seed, value in enumerate(values):
            path = make_run(tmp_path / f"{method}{seed}", [[value - 10] * 10], [[5] * 10], srl_model=method, seed=seed)
            metrics = {"test/mean_return": TESTS[method][seed], "test_sampled/mean_return": value}
            (path / "metrics.json").write_text(json.dumps(metrics))
    plot(PlotSettings(dir=str(tmp_path), out=str(tmp_path / "plots")), log=lambda _: None)
    with (tmp_path / "plots" / "results.csv").open() as stream:
        table = {row["srl_model"]: row for row in csv.DictReader(stream)}
    assert float(table["srl_splits"]["sampled_test_mean"]) == pytest.approx(220.0)
    assert float(table["srl_splits"]["sampled_test_se"]) == pytest.approx(1.0)
    assert float(table["srl_splits"]["test_mean"]) == pytest.approx(205.0)
    header, srl_splits = (
        [cell.strip() for cell in line.split("|")[1:-1]]
        for line in (tmp_path / "plots" / "results.md").read_text().splitlines()
        if line.startswith("| env") or "srl_splits" in line
    )
    assert header.index("sampled test return (mean ± SE)") == header.index("test return (mean ± SE)") + 1
    assert srl_splits[header.index("sampled test return (mean ± SE)")] == "220.0 ± 1.0"
