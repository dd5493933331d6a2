"""Fine-tuning (``init_from=<run dir>[:checkpoint]``): a new run from a saved model's weights and normalisation."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from stable_baselines3 import PPO

from conftest import TINY_ALGO_RUNS, Compose
from rlzoo.errors import ConfigError
from rlzoo.rundir import RunDir, load_obs_norm
from rlzoo.train import main, train

# Three rollouts of 64 steps: checkpoints are taken at rollout starts, and the tuned pair's learning rate falls to 0 for
# the last update, so checkpoint 64 (after one update) and the final model (after two that learn) differ.
RUN = ["algo=ppo", *TINY_ALGO_RUNS["ppo"], "normalize=true", "total_timesteps=192", "checkpoint_freq=64",
       "test_episodes=1", "verbose=0", "logger.formats=[csv]"]  # fmt: skip


def weights(path: Path) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in PPO.load(path, device="cpu").policy.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture
def source(compose: Compose, tmp_path: Path) -> RunDir:
    train(compose([*RUN, "seed=5"], run_dir=tmp_path / "source"))
    return RunDir(tmp_path / "source")


def test_a_new_run_starts_from_the_saved_weights_and_statistics(
    compose: Compose, tmp_path: Path, source: RunDir
) -> None:
    # learning_rate 0 with the fine-tuning run's own settings: the weights it ends with are the ones it started from.
    frozen = [*RUN, f"init_from={source.path}", "algo.learning_rate=0.0", "algo.ent_coef=0.01", "total_timesteps=64"]
    metrics = train(compose(frozen, run_dir=tmp_path / "tuned"))
    tuned = RunDir(tmp_path / "tuned")

    assert same(weights(tuned.model), weights(source.model))
    assert metrics["train/timesteps"] == 64 and PPO.load(tuned.model).num_timesteps == 64  # the counter starts at 0
    saved = OmegaConf.load(tuned.config)
    assert saved.init_from == f"{source.path.resolve()}:final" and saved.algo.learning_rate == 0.0
    before, after = load_obs_norm(source.obs_norm).rms, load_obs_norm(tuned.obs_norm).rms
    assert after.count == pytest.approx(before.count + 64 + 2)  # they go on: 64 steps + the first reset of 2 envs
    # Without init_from, the same settings start from fresh weights.
    fresh = [*RUN, "algo.learning_rate=0.0", "total_timesteps=64", "seed=6"]
    train(compose(fresh, run_dir=tmp_path / "fresh"))
    assert not same(weights(tmp_path / "fresh" / "model.zip"), weights(source.model))


def test_a_checkpoint_and_a_new_env_variant(compose: Compose, tmp_path: Path, source: RunDir) -> None:
    at_64 = [*RUN, f"init_from={source.path}:64", "algo.learning_rate=0.0", "total_timesteps=64"]
    train(compose(at_64, run_dir=tmp_path / "tuned"))
    assert same(weights(tmp_path / "tuned" / "model.zip"), weights(source.checkpoint(64) / "model.zip"))
    assert not same(weights(source.checkpoint(64) / "model.zip"), weights(source.model))
    assert OmegaConf.load(tmp_path / "tuned" / "config.yaml").init_from == f"{source.path.resolve()}:64"

    robot = ["algo=ppo", "env=MobileRobot", "n_envs=2", "vec_env=dummy", "algo.n_steps=32", "algo.batch_size=32",
             "+algo.policy_kwargs.net_arch=[16]", "algo.n_epochs=1", "total_timesteps=64", "checkpoint_freq=0",
             "test_episodes=0", "verbose=0", "logger.formats=[csv]"]  # fmt: skip
    train(compose(robot, run_dir=tmp_path / "fixed_target"))
    target = tmp_path / "fixed_target"
    train(compose([*robot, "env.random_target=true", f"init_from={target}:latest"], run_dir=tmp_path / "random"))
    config = OmegaConf.load(tmp_path / "random" / "config.yaml")
    assert config.env.random_target is True and config.init_from == f"{target.resolve()}:final"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["algo=a2c", *TINY_ALGO_RUNS["a2c"], *RUN[len(TINY_ALGO_RUNS["ppo"]) + 1 :]],
            r"the saved model is .*PPO, .*A2C",
        ),
        (["env=Acrobot"], r"observation space is Box\(\(4,\)\), this run's is Box\(\(6,\)\)"),
        (["algo.policy_kwargs.net_arch=[32]"], r"algo.policy_kwargs=\{'net_arch': \[32\]\} differs .*\[16\]"),
        (["normalize=false"], r"normalize=False but the saved run had normalize=True"),
    ],
)
def test_incompatible_settings_are_refused_before_anything_is_written(
    compose: Compose, tmp_path: Path, source: RunDir, overrides: list[str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        base = [] if overrides[0] == "algo=a2c" else RUN
        train(compose([*base, *overrides, f"init_from={source.path}"], run_dir=tmp_path / "tuned"))
    assert not (tmp_path / "tuned").exists()


def test_a_run_dir_without_a_model_is_one_line(
    compose: Compose, tmp_path: Path, source: RunDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.yaml").write_text(source.config.read_text())  # a run that never saved a model
    with pytest.raises(ConfigError, match=r"has no final model.zip .*available: none"):
        train(compose([*RUN, f"init_from={empty}"], run_dir=tmp_path / "tuned"))
    with pytest.raises(ConfigError, match=r":999 not found in run .*; available: final, 64, 128, 192"):
        train(compose([*RUN, f"init_from={source.path}:999"], run_dir=tmp_path / "tuned"))
    argv = ["rlzoo.train", *RUN, f"init_from={tmp_path / 'nowhere'}", f"hydra.run.dir={tmp_path / 'cli'}"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exited:
        main()
    nowhere = tmp_path / "nowhere"
    expected = f"rlzoo.train: error: init_from={nowhere}: {nowhere} is not a run dir (no config.yaml); give a run dir"
    assert exited.value.code == expected
    assert not np.any([(tmp_path / "tuned").exists(), (tmp_path / "cli" / "model.zip").exists()])
