"""Defaults that make sense: DDPG/TD3 explore with Gaussian noise, ARS stops at the budget."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import stable_baselines3
from gymnasium import spaces
from sb3_contrib import ARS as ContribARS
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

from conftest import Compose
from rlzoo.algos.action_noise import DDPG, TD3, gaussian_noise
from rlzoo.algos.ars import ARS
from rlzoo.algos.factory import build_algorithm_factory
from rlzoo.errors import ConfigError
from rlzoo.train import train


def test_gaussian_noise_is_independent_per_action_dimension() -> None:
    noise = gaussian_noise(spaces.Box(-1, 1, (3,)), 0.1)
    draws = np.stack([noise() for _ in range(4000)])
    assert draws.shape == (4000, 3)
    assert draws.std(axis=0) == pytest.approx([0.1] * 3, rel=0.1)
    assert abs(np.corrcoef(draws.T)[0, 1]) < 0.1


@pytest.mark.parametrize("algo_class", [DDPG, TD3])
def test_noise_by_default_off_with_none_or_any_action_noise(algo_class: type, tmp_path: Path) -> None:
    env = make_vec_env("MountainCarContinuous-v0", n_envs=1, seed=0)
    model = algo_class("MlpPolicy", env, learning_starts=10, buffer_size=100, batch_size=8)
    assert isinstance(model.action_noise, NormalActionNoise) and model.action_noise._sigma.tolist() == [0.1]
    assert algo_class("MlpPolicy", env, action_noise=None).action_noise is None
    ou = OrnsteinUhlenbeckActionNoise(np.zeros(1), np.full(1, 0.3))
    assert algo_class("MlpPolicy", env, action_noise=ou).action_noise is ou
    model.learn(40)
    model.save(tmp_path / "model.zip")
    plain = getattr(stable_baselines3, algo_class.__name__).load(tmp_path / "model.zip")  # plain SB3 loads it
    assert isinstance(plain.action_noise, NormalActionNoise)


def test_noise_settings_are_checked(compose: Compose) -> None:
    factory = build_algorithm_factory(compose(["algo=td3", "env=Pendulum"]).algo)
    assert isinstance(factory.kwargs["action_noise"], NormalActionNoise)  # the tuned pair's own object
    assert build_algorithm_factory(compose(["algo=ddpg", "algo.action_noise=null"]).algo).kwargs["action_noise"] is None
    with pytest.raises(ConfigError, match=r"algo.action_noise=-0.1 must be > 0 \(a sigma\)"):
        train(compose(["algo=ddpg", "env=Pendulum", "algo.action_noise=-0.1", "total_timesteps=8", "verbose=0"]))


@pytest.mark.parametrize(("n_envs", "budget", "updates"), [(1, 1000, 1), (2, 2000, 1), (2, 3, 0)])
def test_ars_stops_at_the_budget(n_envs: int, budget: int, updates: int) -> None:
    """An iteration is 2 x n_delta candidates x one 200-step episode on every env: 800 steps per env."""
    env = make_vec_env("Pendulum-v1", n_envs=n_envs, seed=0)
    kwargs = {"n_delta": 2, "seed": 0, "policy_kwargs": {"net_arch": [4]}}
    model = ARS("MlpPolicy", env, **kwargs).learn(budget)
    assert model.num_timesteps == -(-budget // n_envs) * n_envs
    assert model._n_updates == updates
    contrib = ContribARS("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=n_envs, seed=0), **kwargs).learn(budget)
    assert contrib.num_timesteps > model.num_timesteps  # sb3-contrib finishes its iteration
