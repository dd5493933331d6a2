"""SB3's private members that rlzoo's training agents use are where rlzoo expects them, on the SB3 version installed
(``pyproject.toml`` bounds SB3 to the versions this passes on): a release that moves one fails here, naming it."""

from __future__ import annotations

import gymnasium as gym
import pytest
import stable_baselines3
from stable_baselines3 import DQN, PPO

from rlzoo.agents import sb3_private


@pytest.mark.parametrize("algo_class", [PPO, DQN])
def test_the_private_members_rlzoo_uses_are_there(algo_class: type) -> None:
    model = algo_class("MlpPolicy", gym.make("CartPole-v1"), device="cpu")
    sb3_private.setup_learn(model, 100, reset_num_timesteps=True)
    problems = sb3_private.contract_problems(model)
    assert problems == [], (
        f"stable-baselines3 {stable_baselines3.__version__} changed what rlzoo.agents.sb3_private uses: "
        f"{'; '.join(problems)}; adapt that module, or bound stable-baselines3 in pyproject.toml below this version"
    )
    assert sb3_private.last_observation(model).shape == (1, 4)


def test_a_changed_member_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

    def renamed(self: object, learning_starts: int, noise: object = None, n_envs: int = 1) -> None: ...

    monkeypatch.setattr(OffPolicyAlgorithm, "_sample_action", renamed)
    monkeypatch.delattr(OffPolicyAlgorithm, "_store_transition")
    assert sb3_private.contract_problems() == [
        "OffPolicyAlgorithm._sample_action takes (learning_starts, noise, n_envs), rlzoo passes (learning_starts, "
        "action_noise, n_envs)",
        "OffPolicyAlgorithm._store_transition is gone",
    ]
