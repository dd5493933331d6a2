"""Agents: a plain loop drives ``act`` (single states and batches); test agents act without any env object."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3.common.utils import set_random_seed

from conftest import TINY_OFF_POLICY, TINY_ON_POLICY, Compose
from rlzoo import State, load_agent, preset
from rlzoo.agents import BoundPreset, StateArray, TestAgent, TrainingAgent
from rlzoo.errors import ConfigError
from rlzoo.rundir import RunDir
from rlzoo.train import train
from rlzoo.training.build import RunBuilder
from rlzoo.training.plan import plan_run

SAME_STEP = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
PIXELS = ["srl_model=raw_pixels", "srl_model.height=40", "srl_model.width=40", "srl_model.frame_stack=2"]


def test_states_from_gymnasium_results() -> None:
    env = gym.make("CartPole-v1")
    state = State.from_reset(env.reset(seed=0))
    assert (state.reward, state.done, state.mask) == (0.0, False, 1.0)
    state = State.from_step((state.observation, 1.0, True, False, {}))
    assert (state.done, state.mask) == (True, 0.0)
    assert State(0, truncated=True).mask == 1.0  # a time limit is bootstrapped from
    with pytest.raises(ValueError, match=r"final_observation is missing; .*SAME_STEP"):
        StateArray(np.zeros((2, 4)), np.zeros(2), np.array([True, False]), np.zeros(2, bool))


def drive(bound: BoundPreset, steps: int, render: bool = False) -> TrainingAgent:
    """A user's loop: plain Gymnasium envs the agent did not create, no ``learn()``."""
    agent, seed = bound.agent(train_steps=steps), bound.config.seed
    spec = bound.learner.plan.spec
    if agent.n_envs > 1:
        vec = gym.make_vec(spec.id, agent.n_envs, "sync", vector_kwargs=SAME_STEP, **spec.kwargs)
        states = StateArray.from_reset(vec.reset(seed=seed))
        while agent.model.num_timesteps < steps:
            states = StateArray.from_step(vec.step(agent.act(states)))
        return agent
    env = gym.make(spec.id, render_mode="rgb_array" if render else None, **spec.kwargs)
    frame = (lambda s: State(env.render(), s.reward, s.terminated, s.truncated)) if render else (lambda s: s)
    state = frame(State.from_reset(env.reset(seed=seed)))
    while agent.model.num_timesteps < steps:
        action = agent.act(state)  # the last state of an episode too: its transition is learnt from
        state = frame(State.from_reset(env.reset()) if state.done else State.from_step(env.step(action)))
    return agent


def learn_twin(bound: BoundPreset, steps: int) -> torch.nn.Module:
    """The same config trained by SB3's own ``learn()`` on the env ``train(cfg)`` builds."""
    plan = plan_run(bound.config, run_dir_state=False)
    build = RunBuilder(plan)
    set_random_seed(plan.seed)
    venv = build.training_env()
    normalizer = build.normalizer(venv)
    return build.model(normalizer or venv, normalizer).learn(steps).policy


TINY_PPO = [*TINY_ON_POLICY, "algo.n_epochs=2", "normalize=true"]
TWINS: dict[str, tuple[str, str, list[str], int]] = {
    "ppo-batch": ("ppo", "CartPole", [*TINY_PPO, "n_envs=2"], 192),
    "ppo-single": ("ppo", "CartPole", [*TINY_PPO, "n_envs=1"], 192),  # episodes end: terminal states are deferred
    "a2c-batch": ("a2c", "CartPole", ["n_envs=2", "algo.n_steps=8", "+algo.policy_kwargs.net_arch=[16]"], 160),
    "dqn-single": ("dqn", "CartPole", [*TINY_OFF_POLICY, "algo.train_freq=32", "algo.gradient_steps=4"], 192),
    "ppo-time-limit": ("ppo", "Pendulum", [*TINY_PPO, "+env.max_episode_steps=20"], 96),  # truncation bootstraps
    "sac-single": ("sac", "Pendulum", [*TINY_OFF_POLICY, "normalize=true", "+env.max_episode_steps=30"], 120),
    "sac-batch": ("sac", "Pendulum", [*TINY_OFF_POLICY, "n_envs=2"], 120),
    "ppo-pixels": (
        "ppo",
        "CartPole",
        [*PIXELS, *TINY_ON_POLICY, "algo.n_steps=16", "algo.batch_size=16", "algo.n_epochs=1", "n_envs=1"],
        48,
    ),
}


@pytest.mark.parametrize("case", sorted(TWINS))
def test_training_agent_learns_as_sb3_learn(case: str) -> None:
    """A user's loop over ``act`` stores the same transitions and updates at the same steps as ``learn()``: with the
    same seeds, the weights come out identical (on-policy, off-policy, single states, batches, pixels)."""
    algo, env, overrides, steps = TWINS[case]
    bound = preset(algo, *overrides, verbose=0).env(env)
    agent = drive(bound, steps, render="pixels" in case)
    assert agent.model.num_timesteps == steps and agent.model._n_updates > 0
    mine, theirs = agent.model.policy.state_dict(), learn_twin(bound, steps).state_dict()
    assert all(torch.equal(mine[key], theirs[key]) for key in theirs)


def test_act_on_single_state_and_batch() -> None:
    bound = preset("ppo", *TINY_ON_POLICY, n_envs=1, normalize=True).env("CartPole")
    agent = drive(bound, 64)
    test = bound.test_agent()
    observations = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    batch = test.act(StateArray.from_observations(observations))
    assert batch.shape == (5,) and set(batch.tolist()) <= {0, 1}
    assert [int(test.act(State(o))) for o in observations] == batch.tolist()
    # The test agent reads the live model and statistics; it does not update them.
    count = bound.learner.normalizer.obs_rms.count  # type: ignore[union-attr]
    test.act(State(observations[0] * 100))
    assert bound.learner.normalizer.obs_rms.count == count  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="n_envs=1; got 5 states"):
        agent.act(StateArray.from_observations(observations))


def test_recurrent_test_agent_carries_its_state() -> None:
    bound = preset("recurrent_ppo", *TINY_ON_POLICY, "+algo.policy_kwargs.lstm_hidden_size=8").env("CartPole")
    test = bound.test_agent()
    env = gym.make("CartPole-v1")
    state = State.from_reset(env.reset(seed=0))
    while not state.done:
        state = State.from_step(env.step(test.act(state)))
    assert test._hidden is not None
    with pytest.raises(ConfigError, match="RecurrentPPO: recurrent policies have no training agent"):
        bound.agent()


def run_test_episodes_by_hand(agent: TestAgent, env_id: str, seed: int, episodes: int, pixels: bool) -> list[float]:
    """The run's test episodes, replayed by a plain loop over an env the agent did not create."""
    env = gym.make(env_id, render_mode="rgb_array" if pixels else None)
    returns = []
    for episode in range(episodes):
        observation, _ = env.reset(seed=seed + episode)  # test episode i is seeded seed + i
        state, total = State(env.render() if pixels else observation), 0.0
        while not state.done:
            observation, reward, terminated, truncated, _ = env.step(agent.act(state))
            state = State(env.render() if pixels else observation, float(reward), terminated, truncated)
            total += state.reward
        returns.append(total)
    return returns


@pytest.mark.parametrize("pixels", [False, True], ids=["ground_truth", "raw_pixels"])
def test_load_agent_reproduces_the_runs_test_returns(pixels: bool, compose: Compose, tmp_path: Path) -> None:
    overrides = ["algo=ppo", "env=CartPole", "n_envs=1", "algo.n_steps=32", "algo.batch_size=32", "algo.n_epochs=2"]
    overrides += PIXELS if pixels else ["normalize=true", "+algo.policy_kwargs.net_arch=[16]"]
    cfg = compose([*overrides, "total_timesteps=64", "test_episodes=3", "verbose=0", "logger.formats=[csv]"])
    train(cfg)
    with (tmp_path / "run" / "test_returns.csv").open() as stream:
        expected = [float(row["return"]) for row in csv.DictReader(stream)]
    agent = load_agent(tmp_path / "run")
    assert run_test_episodes_by_hand(agent, "CartPole-v1", cfg.seed + 10_000, 3, pixels) == expected


def test_saved_preset_loads_as_the_same_agent(tmp_path: Path) -> None:
    bound = preset("sac", *TINY_OFF_POLICY, normalize=True).env("Pendulum")
    drive(bound, 80)
    path = bound.save(tmp_path / "saved")
    assert RunDir(path).obs_norm.is_file()
    loaded, live = load_agent(path), bound.test_agent()
    for observation in np.random.default_rng(1).uniform(-1, 1, size=(4, 3)).astype(np.float32):
        np.testing.assert_allclose(loaded.act(State(observation)), live.act(State(observation)), rtol=1e-6)
    with pytest.raises(ConfigError, match="already holds a trained run"):
        bound.save(path)


def test_learned_encoder_plugs_in(tmp_path: Path) -> None:
    """A learned encoder (issue 5's EncodeObservations vec wrapper) needs nothing of the agents: states carry the
    env's render, training matches ``learn()`` and the saved agent loads back with its encoder."""
    from srl_helpers import make_dataset, make_encoder

    make_encoder(tmp_path / "encoder", make_dataset(tmp_path / "data", ["n_samples=100"]), "random")
    encoder = [f"srl_model.checkpoint={tmp_path / 'encoder'}", "srl_model.height=16", "srl_model.width=16"]
    bound = preset("ppo", "srl_model=random", *encoder, "env.random_target=true", *TINY_PPO, n_envs=1).env(
        "MobileRobot"
    )
    agent = drive(bound, 64, render=True)
    mine, theirs = agent.model.policy.state_dict(), learn_twin(bound, 64).state_dict()
    assert all(torch.equal(mine[key], theirs[key]) for key in theirs)
    env = gym.make("rlzoo/MobileRobot-v0", render_mode="rgb_array", random_target=True, render_size=16)
    env.reset(seed=0)
    frame = State(env.render())
    assert load_agent(bound.save(tmp_path / "saved")).act(frame) == bound.test_agent().act(frame)


def test_import_rlzoo_stays_light() -> None:
    """``import rlzoo`` registers the envs only; the agent API is imported on first use."""
    code = (
        "import sys, gymnasium, rlzoo\ngymnasium.make('rlzoo/MobileRobot-v0')\n"
        "assert not {'stable_baselines3', 'hydra'} & set(sys.modules)\n"
        "from rlzoo import State, load_agent, preset, run_experiment\nassert 'stable_baselines3' in sys.modules"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
