"""Keep-best evaluation: the callback on its own (the training run wires it with eval_freq / eval_episodes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import VecNormalize

from rlzoo.errors import ConfigError
from rlzoo.rundir import RunDir, load_obs_norm
from rlzoo.training.keep_best import EVALUATIONS_HEADER, KeepBest, previous_best, require_best_model


def rows(path: Path) -> np.ndarray:
    return np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)


def test_keeps_the_best_evaluated_model_with_its_statistics(tmp_path: Path) -> None:
    train_env = VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=0), norm_reward=False)
    eval_env = VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=100), norm_reward=False)
    best, log = tmp_path / "best", tmp_path / "evaluations.csv"
    keep = KeepBest(eval_env, best, log, every_steps=256, episodes=4, normalizer=train_env)
    model = PPO("MlpPolicy", train_env, n_steps=64, batch_size=64, n_epochs=4, learning_rate=3e-3, seed=0)
    model.learn(2048 + 64, callback=keep)  # PPO rounds up to whole rollouts: 2176 steps, not a multiple of 256
    table = rows(log)
    assert log.read_text().splitlines()[0] == EVALUATIONS_HEADER
    assert table[:, 0].tolist() == [256 * i for i in range(1, 9)] + [2176]  # and a last evaluation at the end
    assert table[:, 5].sum() >= 1 and table[0, 5] == 1  # the first evaluation is the best so far
    best_rows = table[table[:, 5] == 1]
    assert (np.diff(best_rows[:, 1]) > 0).all() and keep.best_return == best_rows[-1, 1] == table[:, 1].max()
    assert (best / "model.zip").is_file() and (best / "obs_norm.npz").is_file()
    assert eval_env.training is False and eval_env.norm_reward is False
    assert load_obs_norm(best / "obs_norm.npz").rms.count <= train_env.obs_rms.count
    # The best model, with its statistics, scores what its evaluation said (deterministic policy, same seeds).
    loaded = PPO.load(best / "model.zip")
    assert loaded.num_timesteps == int(best_rows[-1, 0])


def test_a_resumed_run_keeps_its_best(tmp_path: Path) -> None:
    log = tmp_path / "evaluations.csv"
    log.write_text(EVALUATIONS_HEADER + "\n100,50,0,50,50,1\n200,500.5,1,500,501,1\n300,20,0,20,20,0\n")
    assert previous_best(log) == 500.5  # above CartPole's 500: no evaluation of this run can beat it
    env = make_vec_env("CartPole-v1", n_envs=1, seed=0)
    keep = KeepBest(make_vec_env("CartPole-v1", n_envs=1, seed=1), tmp_path / "best", log, every_steps=32, episodes=1)
    PPO("MlpPolicy", env, n_steps=32, batch_size=32, seed=0).learn(64, callback=keep)
    assert keep.best_return == 500.5 and not (tmp_path / "best").exists()
    assert len(rows(log)) == 5


def test_bad_settings_and_a_run_without_a_best_model(tmp_path: Path) -> None:
    env = make_vec_env("CartPole-v1", n_envs=1, seed=0)
    with pytest.raises(ConfigError, match=r"eval_freq=0 and eval_episodes=5 must both be ≥ 1"):
        KeepBest(env, tmp_path, tmp_path / "e.csv", every_steps=0, episodes=5)
    with pytest.raises(ValueError, match="VecNormalize or FrozenNormalize exactly when"):
        KeepBest(env, tmp_path, tmp_path / "e.csv", every_steps=10, episodes=5, normalizer=VecNormalize(env))
    with pytest.raises(ConfigError, match=r"checkpoint=best: the run .* has no best model .*eval_freq > 0"):
        require_best_model(RunDir(tmp_path))


def test_episode_seed_replays_the_same_episodes_at_every_evaluation(tmp_path: Path) -> None:
    model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=1, seed=0), n_steps=32, batch_size=32, seed=0)
    model.set_logger(configure(None, []))
    evaluations = {}
    for episode_seed in (None, 7):
        eval_env = make_vec_env("CartPole-v1", n_envs=3, seed=7)
        log = tmp_path / f"{episode_seed}.csv"
        keep = KeepBest(eval_env, tmp_path / "best", log, every_steps=32, episodes=6, episode_seed=episode_seed)
        keep.init_callback(model)
        keep._on_training_start()
        evaluations[episode_seed] = [keep.evaluate() for _ in range(3)]
        keep._on_training_end()
    assert len(set(evaluations[7])) == 1  # the same six episodes, the same (unchanged) model
    assert evaluations[7][0] == evaluations[None][0]  # the first evaluation starts from the env's own seed either way
    assert len(set(evaluations[None])) > 1  # without it, each evaluation plays six new episodes
