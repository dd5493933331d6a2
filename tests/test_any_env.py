"""Any Gymnasium env trains: toy-text observations (Discrete, Tuple), episodes that always end, action repeat and
frame stacking, an episode budget; the optional families (Atari, MuJoCo, Box2D) in tests/test_any_env_extras.py."""

from __future__ import annotations

import logging
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from omegaconf import OmegaConf
from stable_baselines3 import DQN
from stable_baselines3.common.env_util import make_vec_env

from conftest import TINY_OFF_POLICY, TINY_ON_POLICY, Compose
from rlzoo.any_env.making import make, step_cap
from rlzoo.any_env.spec import EnvSpec
from rlzoo.any_env.wrappers import ActionRepeat
from rlzoo.rundir import RunDir
from rlzoo.train import train
from rlzoo.training.budget import UNBOUNDED_STEPS, EpisodeBudget, schedule_horizon
from rlzoo.training.plan import plan_run

TINY = ["total_timesteps=64", "test_episodes=2", "checkpoint_freq=0", "verbose=0", "logger.formats=[csv]",
        "max_test_steps=40"]  # fmt: skip
ALGOS = {
    "ppo": ["algo=ppo", *TINY_ON_POLICY, "algo.n_epochs=1"],
    "dqn": ["algo=dqn", *TINY_OFF_POLICY, "algo.learning_starts=16"],
}
# id -> (recorded env.observation, recorded normalize)
TOY_TEXT = {
    "Taxi-v4": ("native", False),  # Discrete(500): SB3 one-hot, nothing to normalise
    "FrozenLake-v1": ("native", False),
    "CliffWalking-v1": ("native", False),  # no step limit: test episodes capped at max_test_steps
    "Blackjack-v1": ("flatten", False),  # Tuple of Discrete: one flat one-hot vector
}


@pytest.mark.parametrize("algo", sorted(ALGOS))
@pytest.mark.parametrize("env_id", sorted(TOY_TEXT))
def test_toy_text_envs_train_and_test(env_id: str, algo: str, compose: Compose, tmp_path: Path) -> None:
    cfg = compose([*ALGOS[algo], "env=gym", f"env.id={env_id}", "normalize=true", *TINY])
    metrics = train(cfg)
    run = RunDir(tmp_path / "run")
    assert run.is_finished() and metrics["test/episodes"] == 2
    saved = run.read_config()
    assert (saved.env.observation, saved.normalize) == TOY_TEXT[env_id]  # chosen by itself, recorded
    lengths = [int(line.split(",")[2]) for line in run.test_returns.read_text().splitlines()[1:]]
    assert len(lengths) == 2 and all(0 < n <= 200 for n in lengths)


def test_an_env_without_step_limit_ends_its_test_episodes(compose: Compose, caplog: pytest.LogCaptureFixture) -> None:
    """CliffWalking-v1 has no step limit; a policy that never reaches the goal still finishes, with a warning."""
    cfg = compose([*ALGOS["dqn"], "env=gym", "env.id=CliffWalking-v1", "algo.learning_starts=1000", *TINY])
    with caplog.at_level(logging.WARNING, logger="rlzoo"):
        metrics = train(cfg)
    assert metrics["test/episodes"] == 2
    assert "CliffWalking-v1 has no step limit: an episode was cut at max_test_steps=40 steps" in caplog.text
    assert step_cap(EnvSpec("CartPole-v1"), 40) is None  # a registered limit is the env's own
    assert step_cap(EnvSpec("CliffWalking-v1", {"max_episode_steps": 100}), 40) is None


def test_dict_observations_are_flattened_with_only_box_parts_normalised(compose: Compose) -> None:
    gym.register("rlzoo-test/DictObs-v0", entry_point=DictObservations, max_episode_steps=20)
    plan = plan_run(compose(["algo=ppo", "env=gym", "env.id=rlzoo-test/DictObs-v0", "normalize=true"]))
    assert plan.config.env.observation == "flatten" and plan.config.normalize is True  # it has a Box part
    env = make(plan.spec)
    assert env.observation_space.shape == (3 + 4,)
    plan = plan_run(compose(["algo=ppo", "env=gym", "env.id=Blackjack-v1", "normalize=true"]))
    assert plan.config.normalize is False  # one-hot parts only


class DictObservations(gym.Env):
    """A Dict of a Box and a Discrete."""

    observation_space = gym.spaces.Dict(
        {"position": gym.spaces.Box(-1, 1, (3,), np.float32), "room": gym.spaces.Discrete(4)}
    )
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action: int) -> tuple[dict, float, bool, bool, dict]:
        return self.observation_space.sample(), 1.0, False, False, {}


def test_frame_skip_repeats_actions_for_any_env(compose: Compose, tmp_path: Path) -> None:
    env = make(EnvSpec.from_values({"id": "CartPole-v1", "frame_skip": 3}))
    assert isinstance(env, ActionRepeat) and env.repeat == 3
    env.reset(seed=0)
    _, reward, *_ = env.step(0)
    assert reward == 3.0  # three CartPole steps, rewards summed
    cfg = compose([*ALGOS["ppo"], "env=CartPole", "+env.frame_skip=3", "+env.frame_stack=2", *TINY])
    train(cfg)
    saved = RunDir(tmp_path / "run").read_config()
    assert saved.env.frame_skip == 3 and saved.env.frame_stack == 2


def test_an_episode_budget_stops_training(compose: Compose, tmp_path: Path) -> None:
    cfg = compose([*ALGOS["ppo"], "env=CartPole", "n_envs=2", "total_episodes=6", "total_timesteps=1000000",
                   "test_episodes=1", "checkpoint_freq=0", "verbose=0", "logger.formats=[csv]"])  # fmt: skip
    metrics = train(cfg)  # the Python API: total_timesteps is the schedules' horizon, not a second budget
    run = RunDir(tmp_path / "run")
    episodes = sum(len(f.read_text().splitlines()) - 2 for f in run.monitor_files())
    assert 6 <= episodes <= 7  # the step that ends the 6th episode may end another env's
    assert metrics["train/timesteps"] < 1000


def test_schedules_run_over_the_horizon_with_an_episode_budget() -> None:
    model = DQN("MlpPolicy", make_vec_env("CartPole-v1", n_envs=1, seed=0), learning_starts=10_000, seed=0,
                exploration_fraction=0.5, policy_kwargs={"net_arch": [8]})  # fmt: skip
    with schedule_horizon(model, 200):
        model.learn(UNBOUNDED_STEPS, callback=EpisodeBudget(30))
    assert type(model) is DQN  # the class swap is undone
    assert model.num_timesteps > 200 and model.exploration_rate == pytest.approx(model.exploration_final_eps)


def test_recorded_config_replans_identically(compose: Compose) -> None:
    """A run's config.yaml (observation mode and normalisation decided) plans to the same config again."""
    plan = plan_run(compose(["algo=dqn", "env=gym", "env.id=Blackjack-v1"]))
    again = plan_run(OmegaConf.create(OmegaConf.to_container(plan.config)))
    assert again.config == plan.config
