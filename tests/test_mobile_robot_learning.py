"""MobileRobot learning thresholds of the tuned pairs (slow: ``python -m pytest -m slow``).

Measured as the issue states them: ``env.random_target=true``, ground truth, the mean return of the last 100
training episodes read from the monitor files, averaged over 3 seeds. Best possible means (shortest paths over random
starts): about 236.1 with discrete actions; with continuous ones, docs/headline_study.md's "The figure" (computed
by tests/test_best_possible.py). SAC's pair, tuned for wall time, is checked on its 100 deterministic test episodes,
seed by seed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import Compose
from rlzoo.results.runs import monitor_episodes
from rlzoo.rundir import RunDir
from rlzoo.train import train

pytestmark = pytest.mark.slow

SEEDS = (0, 1, 2)


def last_training_episodes_mean(run_dir: Path, n_envs: int, episodes: int = 100) -> float:
    _, returns = monitor_episodes(RunDir(run_dir).monitor_files(), n_envs)
    assert len(returns) >= episodes, f"only {len(returns)} training episodes in {run_dir}"
    return float(np.mean(returns[-episodes:]))


@pytest.mark.parametrize(
    ("algo", "steps", "threshold"),
    [("ppo", 250_000, 234.0)],
    ids=["ppo-discrete"],
)
def test_tuned_pair_reaches_threshold(
    algo: str, steps: int, threshold: float, compose: Compose, tmp_path: Path
) -> None:
    means = []
    for seed in SEEDS:
        run_dir = tmp_path / f"{algo}-{seed}"
        cfg = compose([f"algo={algo}", "env=MobileRobot", "env.random_target=true", f"seed={seed}", "verbose=0",
                       "test_episodes=10"], run_dir=run_dir)  # fmt: skip
        assert cfg.total_timesteps == steps  # the tuned pair's budget
        metrics = train(cfg)
        assert metrics["train/timesteps"] <= steps + cfg.n_envs * 256
        means.append(last_training_episodes_mean(run_dir, cfg.n_envs))
    assert np.mean(means) >= threshold, f"last-100 means per seed: {means}"


@pytest.mark.parametrize(
    ("random_target", "steps"), [(False, 12_000), (True, 30_000)], ids=["headline-fixed-target", "random-target"]
)
def test_sac_pair_reaches_230_every_seed(random_target: bool, steps: int, compose: Compose, tmp_path: Path) -> None:
    """``python -m rlzoo.train algo=sac env=MobileRobot`` (the design card's command: the pair's 12k steps, fixed
    target) and with ``env.random_target=true`` at 30k steps: the mean return of the 100 deterministic test episodes
    is at least 230 for each of seeds 0, 1, 2 (best possible: docs/headline_study.md, "The figure")."""
    for seed in SEEDS:
        overrides = ["algo=sac", "env=MobileRobot", f"env.random_target={str(random_target).lower()}", f"seed={seed}"]
        cfg = compose([*overrides, f"total_timesteps={steps}", "verbose=0"], run_dir=tmp_path / f"seed{seed}")
        assert cfg.test_episodes == 100
        test_return = train(cfg)["test/mean_return"]
        assert test_return >= 230.0, f"seed {seed}: mean test return {test_return:.2f}"


def test_ppo_on_raw_pixels_with_random_shift_learns(compose: Compose, tmp_path: Path) -> None:
    """PPO on 64 x 64 top-down images with DrQ's random shift (``srl_model.augment=4``), the small SRL benchmark's
    setting (random target, 250k steps) with the PPO pair it was measured with (no entropy bonus, learning rate from
    1e-3), one seed (about 30 minutes on 2 cores).

    Measured (docs/results.md): last-100 mean 177.8 / 179.2 / 177.4 at seeds 0/1/2; without the shift 17.6 at seed 0
    (paper at 224² after 5M steps: 231.5 ± 3.1); a random policy scores about 0.
    """
    run_dir = tmp_path / "pixels"
    cfg = compose(["experiment=srl_benchmark_small", "srl_model=raw_pixels", "srl_model.augment=4", "seed=0",
                   "algo.ent_coef=0.0", "algo.learning_rate.start=0.001",
                   "checkpoint_freq=0", "test_episodes=10", "verbose=0"],
                  run_dir=run_dir)  # fmt: skip
    train(cfg)
    assert last_training_episodes_mean(run_dir, cfg.n_envs) >= 120.0
