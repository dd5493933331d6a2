"""The random agent: the baseline row of every results table (the S-RL Toolbox's ``random_agent``)."""

from typing import Any, ClassVar

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import PyTorchObs

from rlzoo.algos.episodic import EpisodicAlgorithm


class RandomPolicy(BasePolicy):
    """Acts uniformly at random in any action space, whatever it observes; has no parameters."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, **kwargs: Any) -> None:
        super().__init__(observation_space, action_space, **kwargs)

    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> torch.Tensor:
        """Uniform actions, one per observation (``deterministic`` does not apply to a random agent)."""
        assert isinstance(observation, torch.Tensor)
        actions = np.stack([self.action_space.sample() for _ in range(len(observation))])
        return torch.as_tensor(actions, device=self.device)

    def forward(self, obs: PyTorchObs, deterministic: bool = False) -> torch.Tensor:
        return self._predict(obs, deterministic)


class RandomAgent(EpisodicAlgorithm):
    """Uniformly random actions; learns nothing, and trains (runs episodes) only to write the same run directory as
    every other algorithm: monitor files, returns100, checkpoints, test episodes.

    Any action space; its draws follow the run's seed.
    """

    supported_action_spaces: tuple[type[spaces.Space], ...] | None = None

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {"MlpPolicy": RandomPolicy, "CnnPolicy": RandomPolicy}
    policy: RandomPolicy

    def __init__(
        self,
        policy: str | type[RandomPolicy],
        env: Any,
        tensorboard_log: str | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: torch.device | str = "auto",
        _init_setup_model: bool = True,
    ) -> None:
        super().__init__(
            policy, env, learning_rate=0.0, tensorboard_log=tensorboard_log, verbose=verbose, device=device,
            support_multi_env=True, seed=seed, supported_action_spaces=self.supported_action_spaces,
        )  # fmt: skip
        if _init_setup_model:
            self._setup_model()

    def _setup_model(self) -> None:
        self._setup_lr_schedule()
        self.set_random_seed(self.seed)
        # The policy shares the algorithm's action space, which set_random_seed seeded.
        self.policy = self.policy_class(self.observation_space, self.action_space).to(self.device)  # type: ignore[assignment]

    def _act(self, observations: np.ndarray) -> np.ndarray:
        return np.stack([self.action_space.sample() for _ in range(len(observations))])
