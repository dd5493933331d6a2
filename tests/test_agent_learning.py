"""Training agents learn in a loop the user writes: no ``learn()``, only ``agent.act`` (slow: ``-m slow``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlzoo import State, preset
from rlzoo.agents import StateArray, TestAgent

pytestmark = pytest.mark.slow


def mean_test_return(agent: TestAgent, env_id: str, episodes: int, seed: int = 10_000) -> float:
    """Mean return of ``episodes`` episodes of a plain Gymnasium loop."""
    env = gym.make(env_id)
    returns = []
    for episode in range(episodes):
        state, total = State.from_reset(env.reset(seed=seed + episode)), 0.0
        while not state.done:
            state = State.from_step(env.step(agent.act(state)))
            total += state.reward
        returns.append(total)
    return float(np.mean(returns))


def test_ppo_cartpole_from_a_user_loop() -> None:
    """PPO, tuned pair (8 envs, 100k steps), driven over a ``gymnasium.vector`` env."""
    bound = preset("ppo", verbose=0).env("CartPole")
    agent = bound.agent()
    envs = gym.make_vec(
        "CartPole-v1", bound.config.n_envs, "sync", vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
    )
    states = StateArray.from_reset(envs.reset(seed=bound.config.seed))
    for _ in range(bound.config.total_timesteps // bound.config.n_envs):
        states = StateArray.from_step(envs.step(agent.act(states)))
    mean = mean_test_return(bound.test_agent(), "CartPole-v1", 20)
    assert mean >= 475, mean


def test_sac_pendulum_from_a_user_loop() -> None:
    """SAC, tuned pair (20k steps; 64x64 networks to halve the time), one state at a time over a plain Gymnasium env."""
    bound = preset("sac", "+algo.policy_kwargs.net_arch=[64,64]", verbose=0).env("Pendulum")
    agent = bound.agent()
    env = gym.make("Pendulum-v1")
    state = State.from_reset(env.reset(seed=bound.config.seed))
    for _ in range(bound.config.total_timesteps):
        action = agent.act(state)
        if state.done:  # the agent has seen the episode's last state; start the next one
            state = State.from_reset(env.reset())
            action = agent.act(state)
        state = State.from_step(env.step(action))
    mean = mean_test_return(bound.test_agent(), "Pendulum-v1", 20)
    assert mean >= -200, mean
