"""An algorithm SB3 does not ship, added to rlzoo as one Python file + one YAML (docs/algorithms.md, "Your own
algorithm").

Vanilla policy gradient with a learned baseline (Williams, 1992, "Simple statistical gradient-following
algorithms"): one gradient step per rollout on -advantage * log-probability plus a value loss.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, BasePolicy


class VPG(OnPolicyAlgorithm):
    """Vanilla policy gradient (REINFORCE with a value baseline); discrete or continuous actions."""

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": ActorCriticPolicy,
        "CnnPolicy": ActorCriticCnnPolicy,
    }
    supported_action_spaces = (spaces.Discrete, spaces.Box)  # what rlzoo checks an env against before building

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: Any,
        learning_rate: float = 1e-3,
        n_steps: int = 256,
        gamma: float = 0.99,
        vf_coef: float = 0.5,
        policy_kwargs: dict[str, Any] | None = None,
        tensorboard_log: str | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: str = "auto",
        _init_setup_model: bool = True,
    ) -> None:
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            gamma=gamma,
            gae_lambda=1.0,
            ent_coef=0.0,
            vf_coef=vf_coef,
            max_grad_norm=0.5,
            use_sde=False,
            sde_sample_freq=-1,
            policy_kwargs=policy_kwargs,
            tensorboard_log=tensorboard_log,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=False,
            supported_action_spaces=self.supported_action_spaces,
        )
        if _init_setup_model:
            self._setup_model()

    def train(self) -> None:
        """One gradient step on the whole rollout."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        data = next(self.rollout_buffer.get(batch_size=None))
        actions = data.actions.long().flatten() if isinstance(self.action_space, spaces.Discrete) else data.actions
        values, log_prob, _ = self.policy.evaluate_actions(data.observations, actions)
        advantages = (data.advantages - data.advantages.mean()) / (data.advantages.std() + 1e-8)
        policy_loss = -(advantages * log_prob).mean()
        value_loss = F.mse_loss(data.returns, values.flatten())
        loss = policy_loss + self.vf_coef * value_loss
        self.policy.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
        self.policy.optimizer.step()
        self._n_updates += 1
        self.logger.record("train/policy_loss", policy_loss.item())
        self.logger.record("train/value_loss", value_loss.item())
        self.logger.record("train/n_updates", self._n_updates)
