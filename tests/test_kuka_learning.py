"""Learning checks of the tuned SAC pairs on KukaButton (slow: ``pytest -m slow tests/test_kuka_learning.py``).

Each trains with ``python -m rlzoo.train``'s config (the tuned pair applies by itself), then plays 100 deterministic
test episodes with the run's test agent and counts those that end with the button pressed (``info["is_success"]``:
5 contact steps). The budgets and measured figures are in the pair files.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
from omegaconf import OmegaConf

from conftest import Compose
from extras import require_extra
from rlzoo import State, load_agent
from rlzoo.train import train

require_extra("pybullet", "arm")

TEST_EPISODES = 100


def success_rate(run_dir: Path, episodes: int = TEST_EPISODES, seed: int = 10_000) -> float:
    """:return: the fraction of ``episodes`` deterministic episodes of the run's agent that press the button."""
    agent = load_agent(run_dir)
    assert agent.config is not None
    values = OmegaConf.to_container(agent.config.env, resolve=True)
    assert isinstance(values, dict)
    env = gym.make(str(values.pop("id")), **{str(k): v for k, v in values.items()})
    successes = 0
    for episode in range(episodes):
        agent.reset()
        state = State.from_reset(env.reset(seed=seed + episode))
        while not state.done:
            state = State.from_step(env.step(agent.act(state)))
        successes += bool(state.info["is_success"])
    env.close()
    return successes / episodes


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [
        ["env=KukaButton", "env.random_target=true"],  # Cartesian actions (SAC: continuous: null -> true)
        ["env=KukaButton", "algo_env=sac_KukaButtonJoints"],  # joint-space actions
    ],
    ids=["cartesian_random_target", "joints"],
)
def test_sac_presses_the_button(overrides: list[str], compose: Compose, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    train(compose(["algo=sac", *overrides, "test_episodes=1", "checkpoint_freq=0", "verbose=0"], run_dir=run_dir))
    assert success_rate(run_dir) >= 0.9
