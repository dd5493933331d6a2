"""The random agent and CMA-ES: exact budgets, callbacks at every step, the best parameters kept, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from conftest import Compose
from rlzoo.algos.cmaes import CMAES, Generation
from rlzoo.algos.random_agent import RandomAgent
from rlzoo.errors import ConfigError
from rlzoo.train import train


class CountSteps(BaseCallback):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.episodes = 0

    def _on_step(self) -> bool:
        self.calls += 1
        self.episodes += sum("episode" in info for info in self.locals["infos"])
        return True


@pytest.mark.parametrize("n_envs", [1, 3])
def test_random_agent_stops_at_the_budget_and_acts_uniformly(n_envs: int, tmp_path: Path) -> None:
    env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=0)
    counter = CountSteps()
    model = RandomAgent("MlpPolicy", env, seed=0).learn(301, callback=counter)
    assert model.num_timesteps == -(-301 // n_envs) * n_envs  # rounded up to whole vec-env steps
    assert counter.calls == model.num_timesteps // n_envs and counter.episodes > 5
    actions = model.predict(np.zeros((2000, 4), np.float32), deterministic=True)[0]
    assert 0.45 < actions.mean() < 0.55
    model.save(tmp_path / "random.zip")
    assert RandomAgent.load(tmp_path / "random.zip").predict(np.zeros(4, np.float32))[0] in (0, 1)


def test_random_agent_samples_continuous_actions_within_bounds() -> None:
    model = RandomAgent("MlpPolicy", "Pendulum-v1", seed=0)
    actions = model.predict(np.zeros((500, 3), np.float32))[0]
    assert actions.shape == (500, 1) and actions.min() >= -2 and actions.max() <= 2 and actions.std() > 1


def test_generation_assigns_free_envs_to_the_least_evaluated_candidate() -> None:
    generation = Generation([np.zeros(2)] * 3, episodes=2)
    assert [generation.assign() for _ in range(4)] == [0, 1, 2, 0]
    generation.record(1, 5.0)
    generation.record(0, 1.0)
    assert not generation.complete and generation.assign() == 1
    for candidate, value in [(0, 3.0), (1, 7.0), (2, 2.0), (2, 4.0)]:
        generation.record(candidate, value)
    assert generation.complete and generation.fitness() == [2.0, 6.0, 3.0]


def test_cmaes_improves_keeps_the_best_candidate_and_stops_at_the_budget(tmp_path: Path) -> None:
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = CMAES("MlpPolicy", env, popsize=6, seed=0, policy_kwargs={"net_arch": []}, sigma0=1.0)
    counter = CountSteps()
    model.learn(3000, callback=counter)
    assert model.num_timesteps == 3000 and counter.calls == 1500
    assert model.generations >= 2 and model.best_return > 30  # a linear policy balances within a few generations
    model.save(tmp_path / "cmaes.zip")
    loaded = CMAES.load(tmp_path / "cmaes.zip", device="cpu")
    assert loaded.best_return == model.best_return and loaded.generations == model.generations
    observations = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    assert (loaded.predict(observations)[0] == model.predict(observations)[0]).all()
    best = torch.nn.utils.parameters_to_vector(model.policy.parameters())
    loaded.set_env(env)
    loaded.learn(200, reset_num_timesteps=False)  # a loaded model goes on from the parameters it holds
    assert loaded.num_timesteps == 3200
    assert not torch.equal(best, torch.zeros_like(best))


def test_cmaes_on_continuous_actions_runs_with_a_diagonal_covariance() -> None:
    model = CMAES("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2, seed=0), popsize=4, diagonal=True, seed=0)
    model.learn(1000)
    assert model.generations >= 1 and np.isfinite(model.best_return)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["algo=cmaes", "algo.popsize=1"], r"algo.popsize=1 must be ≥ 2"),
        (["algo=cmaes", "algo.sigma0=0"], r"algo.sigma0=0(\.0)? must be > 0"),
        (["algo=cmaes", "algo.n_eval_episodes=0"], r"algo.n_eval_episodes=0 must be an integer ≥ 1"),
        (["algo=random", "+algo.learning_rate=0.1"], r"algo.learning_rate is not a keyword of RandomAgent"),
    ],
)
def test_bad_input(overrides: list[str], message: str, compose: Compose) -> None:
    with pytest.raises(ConfigError, match=message):
        train(compose([*overrides, "total_timesteps=64", "test_episodes=0", "verbose=0", "logger.formats=[csv]"]))
