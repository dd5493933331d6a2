"""rlzoo.plot on synthetic run dirs with known episode returns: grouping, scores, SEs, Welch p-values, bad input."""

from __future__ import annotations

import csv
import json
import math
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.image import imread
from omegaconf import OmegaConf
from scipy import stats

from rlzoo.errors import ConfigError
from rlzoo.plot import PlotSettings, main, plot
from rlzoo.results.runs import find_runs, group_runs, learning_curve, moving_average, read_run

PPO = "stable_baselines3.PPO"


def make_run(
    path: Path,
    returns: Sequence[Sequence[float]],
    lengths: Sequence[Sequence[int]],
    *,
    env: str = "CartPole-v1",
    algo: str = PPO,
    srl_model: str = "ground_truth",
    seed: int = 0,
    budget: int | None = None,
    finished: bool = True,
    **extra: object,
) -> Path:
    """A run dir as rlzoo.train writes it: config.yaml, one Monitor CSV per env, metrics.json when finished."""
    n_envs = len(returns)
    budget = budget or max(sum(env_lengths) for env_lengths in lengths) * n_envs
    config = {
        "seed": seed, "total_timesteps": budget, "n_envs": n_envs, "run_dir": str(path), "verbose": 0,
        "env": {"id": env}, "algo": {"_target_": algo, "_partial_": True, "gamma": 0.99, **extra},
        "srl_model": {"name": srl_model, "policy": "Mlp"}, "hardware": {"device": "cpu"},
    }  # fmt: skip
    (path / "monitor").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(config), path / "config.yaml")
    (path / ".hydra").mkdir()
    (path / ".hydra" / "config.yaml").write_text("seed: 0\n")  # Hydra's unresolved copy: not a run of its own
    for rank, (env_returns, env_lengths) in enumerate(zip(returns, lengths, strict=True)):
        rows = "".join(
            f"{r},{n},{i * 0.01:.2f}\n" for i, (r, n) in enumerate(zip(env_returns, env_lengths, strict=True))
        )
        (path / "monitor" / f"{rank}.monitor.csv").write_text(f'#{{"t_start": 0, "env_id": "{env}"}}\nr,l,t\n{rows}')
    if finished:
        (path / "metrics.json").write_text(json.dumps({"train/timesteps": budget}))
    return path


def welch_by_hand(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Welch t-test from its formulas (t statistic, Welch-Satterthwaite degrees of freedom)."""
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    t = (np.mean(a) - np.mean(b)) / math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return float(2 * stats.t.sf(abs(t), dof))


def test_table_means_ses_and_welch_p_values(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    scores: dict[str, list[float]] = {"ground_truth": [], "raw_pixels": []}
    for srl, offset in (("ground_truth", 100.0), ("raw_pixels", 80.0)):
        for seed in range(3):
            returns = offset + 10 * rng.standard_normal(150)
            scores[srl].append(float(returns[-100:].mean()))  # the last 100 of 150 episodes
            make_run(tmp_path / "runs" / f"{srl}{seed}", [returns.tolist()], [[10] * 150], srl_model=srl, seed=seed)

    report = plot(PlotSettings(dir=str(tmp_path / "runs"), baseline="ground_truth"), log=lambda _: None)

    assert [(r.group.srl_model, r.budget, r.n) for r in report.rows] == [
        ("ground_truth", 1500, 3),
        ("raw_pixels", 1500, 3),
    ]
    gt, rp = report.rows
    for row, values in ((gt, scores["ground_truth"]), (rp, scores["raw_pixels"])):
        assert row.mean == pytest.approx(np.mean(values), rel=1e-12)
        assert row.se == pytest.approx(np.std(values, ddof=1) / math.sqrt(3), rel=1e-12)
    assert gt.is_baseline and math.isnan(gt.p_value)
    assert rp.p_value == pytest.approx(welch_by_hand(scores["raw_pixels"], scores["ground_truth"]), rel=1e-9)
    assert rp.p_value < 0.05  # 20 points apart with SEs near 1
    with (tmp_path / "runs" / "plots" / "results.csv").open() as stream:
        table = list(csv.DictReader(stream))
    assert table[1]["srl_model"] == "raw_pixels" and table[1]["seeds"] == "3" and table[1]["baseline"] == "0"
    assert float(table[1]["mean"]) == pytest.approx(rp.mean, rel=1e-5)
    assert float(table[1]["p_value"]) == pytest.approx(rp.p_value, rel=1e-5)
    markdown = (tmp_path / "runs" / "plots" / "results.md").read_text().splitlines()
    assert markdown[0].startswith("| env ") and len({len(line) for line in markdown}) == 1  # aligned columns
    assert f"{rp.mean:.1f} ± {rp.se:.1f}" in markdown[3] and f"{rp.p_value:.3g}" in markdown[3]
    assert imread(report.figures[0]).shape[:2] == (500, 800)


def test_an_algorithm_as_baseline(tmp_path: Path) -> None:
    scores = {"PPO": [10.0, 12.0, 14.0], "A2C": [5.0, 9.0, 4.0, 6.0]}
    for algo, values in scores.items():
        for seed, value in enumerate(values):
            make_run(
                tmp_path / f"{algo}{seed}", [[value] * 20], [[5] * 20], algo=f"stable_baselines3.{algo}", seed=seed
            )
    lines: list[str] = []
    report = plot(PlotSettings(dir=str(tmp_path), baseline="ppo", budgets=(100,)), log=lines.append)
    ppo, a2c = report.rows
    assert ppo.is_baseline and (a2c.group.algo_name, a2c.n, a2c.mean) == ("A2C", 4, 6.0)
    assert a2c.p_value == pytest.approx(welch_by_hand(scores["A2C"], scores["PPO"]), rel=1e-9)
    printed = "\n".join(lines).splitlines()  # summary, notes (rliable missing ...), the Markdown table, the files
    table = [line for line in printed if line.startswith("|")]
    assert table[0].endswith("| p vs ppo |") and table[3].endswith(f" {a2c.p_value:.3g} |")


def test_episodes_of_parallel_envs_are_merged_in_step_order_and_scored_at_a_budget(tmp_path: Path) -> None:
    # Env 0: episodes of 5 steps, returns 1..12; env 1: episodes of 7 steps, returns 100..900; 2 envs in lockstep,
    # so env 0's episodes end at agent steps 10, 20, ... and env 1's at 14, 28, ...
    run = make_run(tmp_path / "run", [list(range(1, 13)), [100 * k for k in range(1, 10)]], [[5] * 12, [7] * 9])
    result = read_run(find_runs(tmp_path)[0])
    assert result.budget == 126 and result.finished
    assert result.ends[:5].tolist() == [10, 14, 20, 28, 30] and result.returns[:5].tolist() == [1, 100, 2, 200, 3]
    # The last 5 episodes ending within 100 steps: 100 (10), 98 (700), 90 (9), 84 (600), 80 (8).
    assert result.score(100, last=5) == pytest.approx((10 + 700 + 9 + 600 + 8) / 5)
    assert result.score(126, last=3) == pytest.approx((800 + 12 + 900) / 3)  # ends 112 (800), 120 (12), 126 (900)
    assert run == result.path


def test_learning_curve_mean_and_se_over_seeds(tmp_path: Path) -> None:
    assert moving_average(np.array([1.0, 2.0, 3.0, 4.0]), 2).tolist() == [1.0, 1.5, 2.5, 3.5]
    make_run(tmp_path / "a", [[10.0] * 50], [[20] * 50], seed=0)
    make_run(tmp_path / "b", [[20.0] * 50], [[20] * 50], seed=1)
    (group,) = group_runs([read_run(run) for run in find_runs(tmp_path)])
    for x in ("timesteps", "episodes"):
        curve = learning_curve(group, x, smooth=10, points=50)
        assert curve.x[-1] == (1000 if x == "timesteps" else 50)
        assert np.allclose(curve.mean[curve.n == 2], 15.0) and np.allclose(curve.se[curve.n == 2], 5.0)
        assert (curve.n == 2).sum() >= 45


def test_runs_are_grouped_by_config_not_folder_names(tmp_path: Path) -> None:
    ones = ([[1.0] * 30], [[10] * 30])
    make_run(tmp_path / "raw_pixels_seed0", *ones, seed=0)  # a misleading folder name: it is a ground_truth run
    make_run(tmp_path / "multirun" / "2026-01-01" / "12-00-00" / "0", *ones, seed=1)
    make_run(tmp_path / "multirun" / "2026-01-01" / "12-00-00" / "1", *ones, seed=2, learning_rate=0.001)
    make_run(tmp_path / "pendulum", [[-500.0] * 30], [[200] * 30], env="Pendulum-v1", algo="stable_baselines3.SAC")

    report = plot(PlotSettings(dir=str(tmp_path), out=str(tmp_path / "out")), log=lambda _: None)

    assert [(g.env, g.label, [r.seed for r in g.runs]) for g in report.groups] == [
        ("CartPole-v1", "PPO / ground_truth (algo.learning_rate=0.001)", [2]),
        ("CartPole-v1", "PPO / ground_truth (algo.learning_rate=None)", [0, 1]),
        ("Pendulum-v1", "SAC / ground_truth", [0]),
    ]
    assert sorted(p.name for p in report.figures) == ["CartPole-v1.png", "Pendulum-v1.png"]
    assert all(imread(p).shape[2] in (3, 4) for p in report.figures)


def test_unfinished_runs_and_differing_budgets_are_plotted_and_said(tmp_path: Path) -> None:
    make_run(tmp_path / "done", [[5.0] * 40], [[10] * 40], seed=0)
    make_run(tmp_path / "training", [[7.0] * 25], [[10] * 25], seed=1, budget=400, finished=False)
    make_run(tmp_path / "longer", [[9.0] * 60], [[10] * 60], seed=2)
    (tmp_path / "just_started").mkdir()
    (tmp_path / "done" / "config.yaml").replace(tmp_path / "just_started" / "config.yaml")
    make_run(tmp_path / "done2", [[5.0] * 40], [[10] * 40], seed=3)
    failed = make_run(tmp_path / "failed", [[1.0] * 10], [[10] * 10], seed=4, budget=400, finished=False)
    (failed / "error.txt").write_text("Traceback ...\nValueError: boom\n")  # a sweep job that failed

    report = plot(PlotSettings(dir=str(tmp_path)), log=lambda _: None)

    notes = "\n".join(report.notes)
    assert "just_started: no complete training episode yet" in notes and "failed: failed (ValueError: boom)" in notes
    assert "1 run(s) unfinished (still training or stopped" in notes and "training" in notes
    assert "reached different step counts: 600 (1 run), 400 (1 run), 250 (1 run, unfinished)" in notes
    (row,) = report.rows
    assert (row.budget, row.n, row.mean) == (250, 3, pytest.approx((5 + 7 + 9) / 3))
    assert row.seeds == (1, 2, 3) and row.runs_label == "2 done, 1 unfinished, 1 failed"  # the failed run is said
    at_400 = plot(PlotSettings(dir=str(tmp_path), budgets=(400,)), log=lambda _: None)
    assert [(r.budget, r.n) for r in at_400.rows] == [(400, 2)]
    assert any("at budget 400, 1 of 3 run(s)" in note and "reached only 250 steps" in note for note in at_400.notes)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"dir": "missing"}, "dir=.*missing: no such folder"),
        ({"dir": "empty"}, "holds no run dirs"),
        (
            {"dir": "runs", "baseline": "supervised"},
            "baseline='supervised' is neither an srl_model nor an algorithm of the runs "
            r"\(srl_models: ground_truth; algorithms: PPO\)",
        ),
        ({"dir": "runs", "budgets": (10**9,)}, "no run reached any of them"),
    ],
)
def test_bad_input_is_one_clear_message(tmp_path: Path, settings: dict, message: str) -> None:
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    make_run(tmp_path / "runs" / "0", [[1.0] * 5], [[10] * 5])
    settings["dir"] = str(tmp_path / settings["dir"])
    with pytest.raises(ConfigError, match=message):
        plot(PlotSettings(**settings), log=lambda _: None)
    assert not (tmp_path / "runs" / "plots" / "results.md").exists()


def test_entrypoint_checks_keys_and_exits_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["rlzoo.plot", f"dir={tmp_path}", "x=frames"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == "rlzoo.plot: error: x='frames'; allowed: timesteps, episodes"
    monkeypatch.setattr(sys, "argv", ["rlzoo.plot", f"dir={tmp_path}"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert "holds no run dirs" in str(exited.value.code)


REAL_RUN = [
    "algo=ppo", "env=MobileRobot", "env.random_target=true", "n_envs=2", "vec_env=dummy", "total_timesteps=1000",
    "algo.n_steps=128", "algo.batch_size=64", "algo.n_epochs=1", "+algo.policy_kwargs.net_arch=[16]",
    "test_episodes=1", "checkpoint_freq=0", "verbose=0", "logger.formats=[csv]",
]  # fmt: skip


def test_real_runs_of_three_representations_are_paired_with_ground_truth(compose: Any, tmp_path: Path) -> None:
    """ground_truth (render_size 224, normalised), raw_pixels (40 x 40, not normalised) and a learned encoder
    (16 x 16, normalised): the keys that follow the representation must not keep them from their p-values."""
    from rlzoo.train import train
    from srl_helpers import make_dataset, make_encoder

    encoder = tmp_path / "encoder"
    make_encoder(encoder, make_dataset(tmp_path / "data", ["n_samples=100"]), "random")
    representations = {
        "ground_truth": ["srl_model=ground_truth"],
        "raw_pixels": ["srl_model=raw_pixels", "srl_model.height=40", "srl_model.width=40"],
        "random": ["srl_model=random", f"srl_model.checkpoint={encoder}", "srl_model.height=16", "srl_model.width=16"],
    }
    for name, overrides in representations.items():
        for seed in (0, 1):
            run_dir = tmp_path / "sweep" / f"{name}_{seed}"
            train(compose([*REAL_RUN, *overrides, f"seed={seed}"], run_dir=run_dir))
    shutil.copytree(tmp_path / "sweep" / "ground_truth_0", tmp_path / "sweep" / "ground_truth_0_again")  # a rerun

    report = plot(PlotSettings(dir=str(tmp_path / "sweep")), log=lambda _: None)

    assert sorted(g.srl_model for g in report.groups) == ["ground_truth", "random", "raw_pixels"]
    assert all(not g.variant and not g.srl_variant for g in report.groups)
    rows = {r.group.srl_model: r for r in report.rows}
    assert {name: (r.n, r.seeds, r.budget) for name, r in rows.items()} == {
        name: (2, (0, 1), 1000) for name in representations
    }
    assert len(rows["ground_truth"].group.runs) == 3  # the rerun of seed 0 is one sample, not a third seed
    for name in ("raw_pixels", "random"):
        expected = welch_by_hand(rows[name].scores, rows["ground_truth"].scores)
        assert 0.0 <= rows[name].p_value <= 1.0 and rows[name].p_value == pytest.approx(expected, rel=1e-9)
    implied = rows["raw_pixels"].group.implied
    assert "env.render_size=40" in implied and "normalize=False" in implied
    assert any("keys that follow the representation" in note and "env.render_size" in note for note in report.notes)
    assert not any("no p-value" in note for note in report.notes)


def test_rows_of_groups_whose_runs_all_failed_say_so(tmp_path: Path) -> None:
    for seed in (0, 1):
        make_run(tmp_path / f"gt{seed}", [[10.0 + seed] * 20], [[5] * 20], seed=seed)
        failed = make_run(tmp_path / f"rp{seed}", [[]], [[]], srl_model="raw_pixels", seed=seed, finished=False)
        (failed / "error.txt").write_text("Traceback ...\nRuntimeError: out of memory\n")

    report = plot(PlotSettings(dir=str(tmp_path)), log=lambda _: None)

    gt, rp = report.rows
    assert (gt.group.srl_model, gt.n, gt.runs_label) == ("ground_truth", 2, "2 done")
    assert (rp.group.srl_model, rp.n, rp.runs_label, rp.budget) == ("raw_pixels", 0, "2 failed", 0)
    markdown = (tmp_path / "plots" / "results.md").read_text()
    assert "| raw_pixels   |              — |     0 | 2 failed |" in markdown
    assert sum("failed (RuntimeError: out of memory); not scored" in note for note in report.notes) == 2
