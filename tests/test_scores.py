"""A score is one object (``rlzoo.results.scores``): a score registered in a few lines appears in every table (the
plot's Markdown and CSV, the HTML page, W&B's table, the store's table) and in the verdicts; the store's table gives
each score's IQM as a percentage of ground truth's, and sample-efficiency curves."""

from __future__ import annotations

import csv
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from extras import require_extra
from rlzoo.errors import ConfigError
from rlzoo.plot import PlotSettings, plot
from rlzoo.reporting.page import write_report
from rlzoo.reporting.store_table import store_table
from rlzoo.reporting.wandb_results import table_data
from rlzoo.results.comparison import compare
from rlzoo.results.efficiency import efficiency_curves, seed_returns
from rlzoo.results.scores import SCORES, Score, register_score
from test_plot import make_run

require_extra("rliable", "stats")

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "benchmarks" / "results" / "srl_benchmark_small"
SEEDS = range(5)
# Per seed: the best test episode, srl_splits' below every one of ground truth's.
BEST = {"ground_truth": [250.0, 249.0, 248.0, 250.0, 247.0], "srl_splits": [240.0, 230.0, 238.0, 236.0, 239.0]}


@pytest.fixture
def best() -> Iterator[Score]:
    """The best test episode as a score of every table (registered for this test only)."""
    before = dict(SCORES)
    try:
        yield register_score(Score("best", "best test episode", key="test/max_return", csv="best_"))
    finally:
        SCORES.clear()
        SCORES.update(before)


def _runs(folder: Path) -> Path:
    for method, values in BEST.items():
        for seed in SEEDS:
            path = make_run(folder / f"{method}{seed}", [[200.0 + seed] * 10], [[5] * 10], srl_model=method, seed=seed)
            metrics = {"train/timesteps": 50, "test/mean_return": 210.0 + seed, "test/max_return": values[seed]}
            (path / "metrics.json").write_text(json.dumps(metrics))
    return folder


def test_a_registered_score_is_in_every_table(best: Score, tmp_path: Path) -> None:
    runs = _runs(tmp_path / "runs")
    plot(PlotSettings(dir=str(runs), out=str(tmp_path / "plots"), verdict_of="srl_splits"), log=lambda _: None)
    markdown = (tmp_path / "plots" / "results.md").read_text()
    assert "best test episode (mean ± SE)" in markdown and "best test episode IQM [95 % CI]" in markdown
    assert "srl_splits is (train / greedy test / sampled test / best)" in markdown  # the verdicts read it
    with (tmp_path / "plots" / "results.csv").open() as stream:
        rows = {row["srl_model"]: row for row in csv.DictReader(stream)}
    assert float(rows["srl_splits"]["best_mean"]) == pytest.approx(np.mean(BEST["srl_splits"]))
    assert float(rows["ground_truth"]["best_iqm"]) == pytest.approx(np.mean(sorted(BEST["ground_truth"])[1:4]))
    assert rows["ground_truth"]["best_seeds"] == "5"
    assert rows["ground_truth"]["verdict_best"] == "below"  # every srl_splits seed below every ground-truth seed
    page = write_report(runs, tmp_path / "report.html", videos=False, log=lambda _: None).path.read_text()
    assert "<th>best test episode (mean ± SE)</th>" in page
    assert f'<td class="num">{np.mean(BEST["srl_splits"]):.1f} ± ' in page  # a number column, right-aligned
    columns, data = table_data(compare(runs))
    assert "best test episode (mean ± SE)" in columns and "best_mean" in columns
    by_method = {line[2]: line for line in data}
    assert by_method["srl_splits"][columns.index("best_mean")] == pytest.approx(np.mean(BEST["srl_splits"]))


def test_a_score_whose_name_key_or_columns_are_taken_is_refused() -> None:
    for taken in (
        Score("train", "another", key="test/other", csv="other_"),
        Score("other", "another", key="test/mean_return", csv="other_"),
        Score("other", "another", key="test/other", csv="test_"),
    ):
        with pytest.raises(ConfigError, match=r"score 'train'|score 'greedy test'|score 'other'"):
            register_score(taken)
    assert "other" not in SCORES


def _small_store(folder: Path) -> Path:
    """The committed store's ground_truth and raw_pixels records of seeds 0 to 4 (no encoder among them)."""
    (folder / "runs").mkdir(parents=True)
    for method in ("ground_truth", "raw_pixels"):
        for seed in SEEDS:
            shutil.copytree(STORE / "runs" / f"{method}_seed{seed}", folder / "runs" / f"{method}_seed{seed}")
    info = yaml.safe_load((STORE / "store.yaml").read_text())
    (folder / "store.yaml").write_text(yaml.safe_dump({**info, "verdict_of": "raw_pixels", "paper": {}}))
    return folder


def _cells(section: str, method: str) -> list[str]:
    """The cells of ``method``'s one line in ``section``."""
    (line,) = [line for line in section.splitlines() if line.startswith(f"| {method} |")]
    return [cell.strip() for cell in line.split("|")[1:-1]]


def test_the_store_table_shows_scores_relative_to_ground_truth_and_sample_efficiency(
    best: Score, tmp_path: Path
) -> None:
    store = _small_store(tmp_path / "store")
    section = store_table(store, ["ground_truth", "raw_pixels"], list(SEEDS), tmp_path)
    (header,) = [line for line in section.splitlines() if line.startswith("| srl_model | seeds |")]
    assert "best test episode IQM [95 % CI]" in header  # the registered score, in the store's table too
    assert "IQM as % of ground_truth's [95 % CI]: train / greedy test / sampled test / best" in header
    heads = [cell.strip() for cell in header.split("|")[1:-1]]
    relative = heads.index("IQM as % of ground_truth's [95 % CI]: train / greedy test / sampled test / best")
    table, efficiency = section.split("Sample efficiency")
    parts = _cells(table, "raw_pixels")[relative].split("<br>")  # train / greedy test / sampled test / best
    point, low, high = (float(v) for v in re.findall(r"-?[\d.]+", parts[1]))
    truth = [_metric(store, "ground_truth", s) for s in SEEDS]
    pixels = [_metric(store, "raw_pixels", s) for s in SEEDS]
    assert point == pytest.approx(100 * _iqm(pixels) / _iqm(truth), abs=0.06) and low <= point <= high < 100
    assert _cells(table, "ground_truth")[relative] == "100"
    # The sample-efficiency table: its last step is the budget, where each IQM is the row's train IQM.
    assert "| srl_model | 50,000 | 100,000 | 150,000 | 200,000 | 250,000 |" in efficiency
    train = heads.index("train return IQM [95 % CI]")
    for method in ("ground_truth", "raw_pixels"):
        final = _cells(efficiency, method)[-1]
        assert final.split(" [")[0] == _cells(table, method)[train].split(" [")[0]
    assert (tmp_path / "srl_benchmark_small_efficiency.png").stat().st_size > 0
    assert (tmp_path / "srl_benchmark_small_profile.png").stat().st_size > 0


def _metric(store: Path, method: str, seed: int, key: str = "test/mean_return") -> float:
    return float(json.loads((store / "runs" / f"{method}_seed{seed}" / "metrics.json").read_text())[key])


def _iqm(values: list[float]) -> float:
    from rliable import metrics

    return float(metrics.aggregate_iqm(np.asarray(values)[:, None]))


def test_an_efficiency_curve_is_the_iqm_of_the_seeds_returns_at_each_step(tmp_path: Path) -> None:
    """Seed k's returns rise by k per episode: at each step, each seed's last-100 mean, and their IQM over seeds."""
    for seed in SEEDS:
        make_run(tmp_path / f"run{seed}", [[float(seed * i) for i in range(200)]], [[10] * 200], seed=seed)
    (row,) = compare(tmp_path, baseline=None).rows
    (curve,) = efficiency_curves([row], points=4, reps=200)
    assert curve.steps.tolist() == [500, 1000, 1500, 2000]
    returns = seed_returns(row, curve.steps)
    for seed in SEEDS:  # 50 episodes by step 500: the mean of episodes 0..49, then of the last 100 episodes
        expected = [np.mean([seed * i for i in range(max(0, n - 100), n)]) for n in (50, 100, 150, 200)]
        assert returns[seed] == pytest.approx(expected)
    assert curve.iqm == pytest.approx([_iqm(list(returns[:, i])) for i in range(4)])
    assert np.all(curve.low <= curve.iqm) and np.all(curve.iqm <= curve.high) and np.any(curve.low < curve.high)
