"""ACKTR: actor-critic with natural-gradient steps through Kronecker-factored curvature (K-FAC)."""

from collections.abc import Callable
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, BasePolicy
from stable_baselines3.common.utils import explained_variance

from rlzoo.algos.sb3_base import ApproximationShell, require
from rlzoo.approximation.approximations import Approximation
from rlzoo.approximation.kfac import KFAC


class ACKTR(ApproximationShell, OnPolicyAlgorithm):
    """Actor Critic using Kronecker-Factored Trust Region (Wu et al., 2017, "Scalable trust-region method for deep
    reinforcement learning using Kronecker-factored approximation").

    A2C's rollouts and loss, with one K-FAC natural-gradient step per rollout for actor and critic together: the
    curvature comes from a sampled Fisher loss (actions drawn from the policy, values perturbed by unit Gaussian
    noise), and each step's predicted KL divergence is clipped to ``kl_clip`` (the trust region).

    :param learning_rate: K-FAC's learning rate (or an SB3 schedule of the progress remaining).
    :param n_steps: steps per env in each rollout.
    :param gamma: discount factor.
    :param gae_lambda: GAE's λ (1: plain n-step returns, as in the paper).
    :param ent_coef: entropy bonus weight.
    :param vf_coef: value loss weight.
    :param normalize_advantage: normalise the advantages of each rollout.
    :param kl_clip: the largest predicted KL divergence of one step.
    :param damping: damping of the Kronecker factors.
    :param stat_decay: decay of the factors' running averages.
    :param momentum: momentum of the SGD steps.
    :param inverse_every: updates between two eigendecompositions of the factors.
    :param policy_kwargs: SB3 ``ActorCriticPolicy`` keywords (``net_arch``, ``activation_fn`` ...).
    """

    supported_action_spaces: tuple[type[spaces.Space], ...] | None = (
        spaces.Discrete,
        spaces.Box,
    )  # what it acts in (None: any)

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": ActorCriticPolicy,
        "CnnPolicy": ActorCriticCnnPolicy,
    }
    approximations = ("actor_critic",)
    policy: ActorCriticPolicy
    actor_critic: Approximation

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: Any,
        learning_rate: float | Callable[[float], float] = 0.25,
        n_steps: int = 20,
        gamma: float = 0.99,
        gae_lambda: float = 1.0,
        ent_coef: float = 0.01,
        vf_coef: float = 0.5,
        normalize_advantage: bool = False,
        kl_clip: float = 0.001,
        damping: float = 0.01,
        stat_decay: float = 0.99,
        momentum: float = 0.9,
        inverse_every: int = 10,
        policy_kwargs: dict[str, Any] | None = None,
        tensorboard_log: str | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: torch.device | str = "auto",
        _init_setup_model: bool = True,
    ) -> None:
        self.check_keywords(kl_clip=kl_clip, damping=damping, stat_decay=stat_decay, inverse_every=inverse_every)
        super().__init__(
            policy, env, learning_rate=learning_rate, n_steps=n_steps, gamma=gamma, gae_lambda=gae_lambda,
            ent_coef=ent_coef, vf_coef=vf_coef, max_grad_norm=0.0, use_sde=False, sde_sample_freq=-1,
            policy_kwargs=policy_kwargs, tensorboard_log=tensorboard_log, verbose=verbose, device=device, seed=seed,
            _init_setup_model=False, supported_action_spaces=self.supported_action_spaces,
        )  # fmt: skip
        self.normalize_advantage = normalize_advantage
        self.kfac_settings: dict[str, Any] = {
            "kl_clip": kl_clip, "damping": damping, "stat_decay": stat_decay, "momentum": momentum,
            "inverse_every": inverse_every,
        }  # fmt: skip
        if _init_setup_model:
            self._setup_model()

    @classmethod
    def check_keywords(cls, **kwargs: Any) -> None:
        for key in ("kl_clip", "damping"):
            require(kwargs.get(key, 1.0) > 0, f"algo.{key}={kwargs.get(key)} must be > 0 (ACKTR)")
        require(
            0 <= kwargs.get("stat_decay", 0.99) < 1, f"algo.stat_decay={kwargs.get('stat_decay')} must be in [0, 1)"
        )
        require(kwargs.get("inverse_every", 1) >= 1, f"algo.inverse_every={kwargs.get('inverse_every')} must be ≥ 1")

    def _setup_model(self) -> None:
        super()._setup_model()
        self.policy.optimizer = KFAC(self.policy, lr=self.lr_schedule(1), **self.kfac_settings)
        self.actor_critic = self._approximate(Approximation, self.policy, self.policy.optimizer, "actor_critic")

    def _forward(self, observations: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """Values and action distribution of a batch (the policy's forward pass, distribution kept)."""
        features = self.policy.extract_features(observations)
        if self.policy.share_features_extractor:
            latent_pi, latent_vf = self.policy.mlp_extractor(features)
        else:
            latent_pi = self.policy.mlp_extractor.forward_actor(features[0])
            latent_vf = self.policy.mlp_extractor.forward_critic(features[1])
        return self.policy.value_net(latent_vf).flatten(), self.policy._get_action_dist_from_latent(latent_pi)

    def train(self) -> None:
        """One natural-gradient step on the whole rollout: sample, forward, Fisher pass, loss, reinforce."""
        self.policy.set_training_mode(True)
        kfac = self.policy.optimizer
        assert isinstance(kfac, KFAC)
        data = next(self.rollout_buffer.get(batch_size=None))
        actions = data.actions.long().flatten() if isinstance(self.action_space, spaces.Discrete) else data.actions
        with kfac.record():
            values, distribution = self._forward(data.observations)
        with kfac.fisher():  # the model's own Fisher: sampled actions, values with unit Gaussian noise
            sampled = distribution.get_actions().detach()
            noisy_values = values.detach() + torch.randn_like(values)
            fisher = -distribution.log_prob(sampled).mean() + self.vf_coef * (values - noisy_values).pow(2).mean()
            fisher.backward(retain_graph=True)
        self.actor_critic.zero_grad()
        advantages = data.advantages
        if self.normalize_advantage:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        policy_loss = -(advantages * distribution.log_prob(actions)).mean()
        value_loss = F.mse_loss(data.returns, values)
        entropy = distribution.entropy()
        entropy_loss = -(entropy.mean() if entropy is not None else -distribution.log_prob(actions).mean())
        self.actor_critic.reinforce(policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss)
        self._n_updates += 1
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/policy_loss", policy_loss.item())
        self.logger.record("train/value_loss", value_loss.item())
        self.logger.record("train/entropy_loss", entropy_loss.item())
        values_seen, returns = self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten()
        self.logger.record("train/explained_variance", explained_variance(values_seen, returns))
