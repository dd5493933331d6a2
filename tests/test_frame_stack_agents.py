"""Runs trained with stacked states (``env.frame_stack``, ``srl_model.frame_stack``) act the same through
``load_agent`` in a plain Gymnasium loop as in the run's own test env, and replay with ``rlzoo.enjoy``: the
representation is applied by one function (:func:`rlzoo.training.build.represent`) for both."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from agent_loops import assert_plays_as_enjoy
from conftest import TINY_ON_POLICY, Compose
from rlzoo import State, load_agent
from rlzoo.enjoy import EnjoySettings, enjoy
from rlzoo.playback.loading import load_run
from rlzoo.train import train
from rlzoo.training.build import RunBuilder

TINY = [*TINY_ON_POLICY, "algo.n_epochs=1", "n_envs=1", "total_timesteps=64", "test_episodes=1", "verbose=0"]
CASES = {
    "env_frame_stack": ["+env.frame_stack=2", "normalize=true"],
    "pixel_frame_stack": [
        "srl_model=raw_pixels",
        "srl_model.height=40",
        "srl_model.width=40",
        "srl_model.frame_stack=2",
    ],
}


def _run_actions(run: Path, steps: int, seed: int) -> list[int]:
    """Actions of the run's model on its own frozen test env (the env replay builds)."""
    loaded = load_run(run)
    venv = RunBuilder(loaded.plan).test_env(loaded.normalization, seed=seed)
    try:
        obs, actions = venv.reset(), []
        for _ in range(steps):
            action, _ = loaded.model.predict(obs, deterministic=True)
            actions.append(int(action[0]))
            obs, _, done, _ = venv.step(action)
            if done[0]:
                break
        return actions
    finally:
        venv.close()


def _agent_actions(run: Path, steps: int, seed: int, pixels: bool) -> list[int]:
    """Actions of ``load_agent(run)`` driven by a plain Gymnasium env the agent did not create."""
    agent = load_agent(run)
    env = gym.make("CartPole-v1", render_mode="rgb_array" if pixels else None)
    seen = (lambda s: State(env.render(), s.reward, s.terminated, s.truncated)) if pixels else (lambda s: s)
    state, actions = seen(State.from_reset(env.reset(seed=seed))), []
    for _ in range(steps):
        action = int(np.asarray(agent.act(state)))
        actions.append(action)
        state = seen(State.from_step(env.step(action)))
        if state.done:
            break
    env.close()
    return actions


@pytest.mark.parametrize("case", list(CASES))
def test_load_agent_and_enjoy_on_stacked_states(case: str, compose: Compose, tmp_path: Path) -> None:
    run = tmp_path / "run"
    train(compose(["algo=ppo", "env=CartPole", *TINY, *CASES[case]], run_dir=run))
    actions = _agent_actions(run, 40, seed=7, pixels=case == "pixel_frame_stack")
    assert len(actions) >= 8
    assert actions == _run_actions(run, len(actions), seed=7)
    replay = enjoy(EnjoySettings(str(run), n_episodes=1), log=lambda _: None)
    assert replay is not None and (run / "enjoy").is_dir()
    if case == "env_frame_stack":
        assert_plays_as_enjoy(run)
