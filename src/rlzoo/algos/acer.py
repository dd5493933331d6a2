"""ACER for discrete actions: SB3's on-policy shell (rollouts, callbacks, training agents) and a replay of rollouts."""

import random
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.preprocessing import preprocess_obs
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, FlattenExtractor, NatureCNN, create_mlp
from stable_baselines3.common.type_aliases import PyTorchObs
from torch import nn

from rlzoo.algos.sb3_base import ApproximationShell, require
from rlzoo.approximation.approximations import Approximation


class ActorQModule(nn.Module):
    """Observation → shared layers → (policy logits, Q-values), both of shape (batch, actions)."""

    def __init__(self, features_extractor: BaseFeaturesExtractor, policy: "AcerPolicy") -> None:
        super().__init__()
        self.features_extractor = features_extractor
        self.observation_space, self.normalize_images = policy.observation_space, policy.normalize_images
        n_actions = int(policy.action_space.n)  # type: ignore[attr-defined]
        dim = features_extractor.features_dim
        self.body = nn.Sequential(*create_mlp(dim, -1, policy.net_arch, policy.activation_fn))
        latent = policy.net_arch[-1] if policy.net_arch else dim
        self.logits, self.q = nn.Linear(latent, n_actions), nn.Linear(latent, n_actions)

    def forward(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        obs = preprocess_obs(observations, self.observation_space, normalize_images=self.normalize_images)
        latent = self.body(self.features_extractor(obs))
        return self.logits(latent), self.q(latent)


class AcerPolicy(BasePolicy):
    """ACER's SB3 policy: ``net`` (logits and Q-values) and its running average ``average_net``.

    Called by SB3's rollout collection, it returns the log-probabilities of *every* action in place of the taken
    action's, so that the rollout buffer keeps the behaviour policy μ that the off-policy corrections need.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Discrete,
        lr_schedule: Callable[[float], float],
        net_arch: list[int] | None = None,
        activation_fn: type[nn.Module] = nn.ReLU,
        features_extractor_class: type[BaseFeaturesExtractor] = FlattenExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        normalize_images: bool = True,
        optimizer_class: type[torch.optim.Optimizer] = torch.optim.RMSprop,
        optimizer_kwargs: dict[str, Any] | None = None,
        use_sde: bool = False,
    ) -> None:
        super().__init__(
            observation_space, action_space, features_extractor_class, features_extractor_kwargs,
            normalize_images=normalize_images, optimizer_class=optimizer_class,
            optimizer_kwargs=optimizer_kwargs if optimizer_kwargs is not None else {"alpha": 0.99, "eps": 1e-5},
        )  # fmt: skip
        require(not use_sde, "ACER has no state-dependent exploration (use_sde)")
        default_arch = [512] if features_extractor_class is NatureCNN else [64, 64]
        self.net_arch = default_arch if net_arch is None else list(net_arch)
        self.activation_fn = activation_fn
        self.net = ActorQModule(self.make_features_extractor(), self)
        self.average_net = ActorQModule(self.make_features_extractor(), self)
        self.optimizer = optimizer_class(self.net.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # type: ignore[call-arg]

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(
            net_arch=self.net_arch, activation_fn=self.activation_fn,
            features_extractor_class=self.features_extractor_class,
            features_extractor_kwargs=self.features_extractor_kwargs,
        )  # fmt: skip
        return data

    def forward(self, obs: PyTorchObs, deterministic: bool = False) -> tuple[torch.Tensor, ...]:
        """Actions, state values V = Σ π Q, and the log-probabilities of all actions (the behaviour policy)."""
        logits, q = self.net(obs)
        log_probs = logits.log_softmax(-1)
        actions = log_probs.argmax(-1) if deterministic else torch.distributions.Categorical(logits=logits).sample()
        return actions, (log_probs.exp() * q).sum(-1, keepdim=True), log_probs

    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> torch.Tensor:
        return self(observation, deterministic)[0]

    def predict_values(self, obs: PyTorchObs) -> torch.Tensor:
        return self(obs)[1]


class BehaviourRolloutBuffer(RolloutBuffer):
    """SB3's rollout buffer whose ``log_probs`` hold the behaviour policy's log-probabilities of all actions."""

    def reset(self) -> None:
        super().reset()
        assert isinstance(self.action_space, spaces.Discrete)
        self.log_probs = np.zeros((self.buffer_size, self.n_envs, int(self.action_space.n)), dtype=np.float32)


class Segment(NamedTuple):
    """A rollout of T steps on N envs, as tensors: everything an off-policy update of it needs."""

    observations: torch.Tensor  # (T + 1, N, ...): the T observations and the one after them
    actions: torch.Tensor  # (T, N)
    rewards: torch.Tensor  # (T, N)
    dones: torch.Tensor  # (T, N): 1 where the episode ended at that step
    behaviour: torch.Tensor  # (T, N, actions): μ's log-probabilities


def retrace(
    segment: Segment, rho_bar: torch.Tensor, q_taken: torch.Tensor, values: torch.Tensor, gamma: float
) -> torch.Tensor:
    """Retrace targets Q^ret (Munos et al., 2016), backwards from V(s_T):
    Q^ret_t = r_t + gamma (1 - d_t) [rho_bar_{t+1} (Q^ret_{t+1} - Q(s_{t+1}, a_{t+1})) + V(s_{t+1})]."""
    targets = torch.empty_like(q_taken)
    q_ret = values[-1]
    for t in reversed(range(len(q_taken))):
        q_ret = segment.rewards[t] + gamma * (1 - segment.dones[t]) * q_ret
        targets[t] = q_ret
        q_ret = rho_bar[t] * (q_ret - q_taken[t]) + values[t]
    return targets


class ACER(ApproximationShell, OnPolicyAlgorithm):
    """Actor-Critic with Experience Replay (Wang et al., 2017, "Sample Efficient Actor-Critic with Experience
    Replay"), discrete actions.

    Each rollout of ``n_steps`` x ``n_envs`` steps trains once on-policy, joins a replay of past rollouts, and
    ``replay_ratio`` replayed rollouts train off-policy. An update uses Retrace targets for the Q-values, truncated
    importance weights min(c, rho) with the bias-correction term for the actions the truncation under-weights, and
    the efficient trust region: the policy gradient (w.r.t. the logits) is projected so that its step's linearised
    KL divergence from the running-average policy stays under ``trust_region``.

    :param learning_rate: RMSprop's learning rate (or an SB3 schedule of the progress remaining).
    :param n_steps: steps per env in each rollout (the length of a replayed segment).
    :param gamma: discount factor.
    :param buffer_size: agent steps kept in the replay (whole rollouts).
    :param replay_start: agent steps collected before replayed updates begin.
    :param replay_ratio: replayed rollouts per new rollout (0: on-policy only).
    :param q_coef: weight of the Q-value loss.
    :param ent_coef: weight of the entropy bonus.
    :param max_grad_norm: the largest gradient norm.
    :param truncation: c, the truncation of the importance weights.
    :param trust_region: δ, the largest linearised KL divergence from the average policy, or None for no trust region.
    :param average_decay: alpha of the average policy network θ_a ← alpha θ_a + (1 - alpha) θ.
    :param policy_kwargs: network keywords (``net_arch``: the shared layers, ``activation_fn``,
        ``features_extractor_class``).
    """

    supported_action_spaces: tuple[type[spaces.Space], ...] | None = (spaces.Discrete,)

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {"MlpPolicy": AcerPolicy, "CnnPolicy": AcerPolicy}
    approximations = ("actor_critic",)
    policy: AcerPolicy  # type: ignore[assignment]
    actor_critic: Approximation

    def __init__(
        self,
        policy: str | type[AcerPolicy],
        env: Any,
        learning_rate: float | Callable[[float], float] = 7e-4,
        n_steps: int = 20,
        gamma: float = 0.99,
        buffer_size: int = 50_000,
        replay_start: int = 1000,
        replay_ratio: int = 4,
        q_coef: float = 0.5,
        ent_coef: float = 0.01,
        max_grad_norm: float = 10.0,
        truncation: float = 10.0,
        trust_region: float | None = 1.0,
        average_decay: float = 0.99,
        policy_kwargs: dict[str, Any] | None = None,
        tensorboard_log: str | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: torch.device | str = "auto",
        _init_setup_model: bool = True,
    ) -> None:
        self.check_keywords(
            replay_ratio=replay_ratio, truncation=truncation, trust_region=trust_region, average_decay=average_decay
        )
        super().__init__(
            policy, env, learning_rate=learning_rate, n_steps=n_steps, gamma=gamma, gae_lambda=1.0,  # type: ignore[arg-type]
            ent_coef=ent_coef, vf_coef=q_coef, max_grad_norm=max_grad_norm, use_sde=False, sde_sample_freq=-1,
            rollout_buffer_class=BehaviourRolloutBuffer, policy_kwargs=policy_kwargs, tensorboard_log=tensorboard_log,
            verbose=verbose, device=device, seed=seed, _init_setup_model=False,
            supported_action_spaces=self.supported_action_spaces,
        )  # fmt: skip
        self.buffer_size, self.replay_start, self.replay_ratio = buffer_size, replay_start, replay_ratio
        self.q_coef, self.truncation, self.trust_region = q_coef, truncation, trust_region
        self.average_decay = average_decay
        if _init_setup_model:
            self._setup_model()

    @classmethod
    def check_keywords(cls, **kwargs: Any) -> None:
        require(kwargs.get("replay_ratio", 0) >= 0, f"algo.replay_ratio={kwargs.get('replay_ratio')} must be ≥ 0")
        require(kwargs.get("truncation", 1.0) > 0, f"algo.truncation={kwargs.get('truncation')} must be > 0")
        region = kwargs.get("trust_region")
        require(region is None or region > 0, f"algo.trust_region={region} must be > 0, or null for none")
        decay = kwargs.get("average_decay", 0.99)
        require(0 <= decay < 1, f"algo.average_decay={decay} must be in [0, 1)")

    def _setup_model(self) -> None:
        super()._setup_model()
        self.actor_critic = self._approximate(
            Approximation, self.policy.net, self.policy.optimizer, "actor_critic", clip_grad=self.max_grad_norm,
            target=self.policy.average_net, tau=1 - self.average_decay,
        )  # fmt: skip
        capacity = max(self.buffer_size // (self.n_steps * self.n_envs), 1)
        self.segments: deque[Segment] = deque(maxlen=capacity)

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "segments"]

    def _latest_segment(self) -> Segment:
        """The rollout just collected, with the observation after it (SB3 keeps it as ``_last_obs``)."""
        buffer, to = self.rollout_buffer, self.rollout_buffer.to_torch
        observations = np.concatenate([buffer.observations, np.asarray(self._last_obs)[None]])
        starts = np.concatenate([buffer.episode_starts[1:], np.asarray(self._last_episode_starts)[None]])
        return Segment(
            to(observations), to(buffer.actions.reshape(self.n_steps, -1)).long(), to(buffer.rewards),
            to(starts.astype(np.float32)), to(buffer.log_probs),
        )  # fmt: skip

    def train(self) -> None:
        """One update on the new rollout, then ``replay_ratio`` updates on replayed ones."""
        self.policy.set_training_mode(True)
        segment = self._latest_segment()
        self.segments.append(segment)
        self._update(segment)
        if self.num_timesteps >= self.replay_start:
            for _ in range(self.replay_ratio):
                self._update(random.choice(self.segments))
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")

    def _update(self, segment: Segment) -> None:
        """Sample (a segment), forward, targets, loss, reinforce."""
        steps = len(segment.actions)
        logits, q = self._forward(segment.observations)
        probabilities = logits.softmax(-1).detach()
        values = (probabilities * q.detach()).sum(-1)  # V(s) = Σ π Q, for t = 0 … T
        rho = probabilities[:steps] / segment.behaviour.exp()
        actions = segment.actions.unsqueeze(-1)
        rho_bar = rho.gather(-1, actions).squeeze(-1).clamp(max=self.truncation)
        q_taken = q[:steps].gather(-1, actions).squeeze(-1)
        targets = retrace(segment, rho_bar, q_taken.detach(), values, self.gamma)
        advantages = targets - values[:steps]
        logit_grads = self._policy_gradient(
            logits[:steps], q[:steps].detach(), values[:steps], rho, advantages, segment
        )
        policy_loss = -(logits[:steps] * logit_grads).sum() / rho_bar.numel()
        q_loss = 0.5 * (targets - q_taken).pow(2).mean()
        self.actor_critic.reinforce(policy_loss + self.q_coef * q_loss)
        self._n_updates += 1
        self.logger.record_mean("train/q_loss", q_loss.item())
        self.logger.record_mean("train/rho_bar_mean", rho_bar.mean().item())

    def _forward(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits and Q-values of a (T + 1, N, ...) block of observations, shaped (T + 1, N, actions)."""
        logits, q = self.actor_critic(observations.flatten(0, 1))
        return logits.unflatten(0, observations.shape[:2]), q.unflatten(0, observations.shape[:2])

    def _policy_gradient(
        self, logits: torch.Tensor, q: torch.Tensor, values: torch.Tensor, rho: torch.Tensor,
        advantages: torch.Tensor, segment: Segment,
    ) -> torch.Tensor:  # fmt: skip
        """The gradient of the policy objective w.r.t. the logits, per step, projected into the trust region:
        truncated importance weight x advantage, plus the bias correction for the actions whose weight was cut."""
        leaf = logits.detach().requires_grad_()
        log_probs = leaf.log_softmax(-1)
        probabilities = log_probs.exp()
        taken = segment.actions.unsqueeze(-1)
        rho_bar = rho.gather(-1, taken).squeeze(-1).clamp(max=self.truncation)
        truncated = rho_bar * log_probs.gather(-1, taken).squeeze(-1) * advantages
        cut = (F.relu(1 - self.truncation / rho) * probabilities).detach()
        correction = cut * log_probs * (q - values.unsqueeze(-1))
        entropy = -(probabilities * log_probs).sum(-1)
        objective = truncated + correction.sum(-1) + self.ent_coef * entropy
        (gradient,) = torch.autograd.grad(objective.sum(), leaf)
        self.logger.record_mean("train/entropy", entropy.mean().item())
        if self.trust_region is None:
            return gradient
        average = self.actor_critic.target(segment.observations[:-1].flatten(0, 1))[0].unflatten(0, logits.shape[:2])
        kl_gradient = probabilities.detach() - average.softmax(-1)  # ∂ KL(π_avg ‖ π) / ∂ logits
        excess = ((kl_gradient * gradient).sum(-1) - self.trust_region) / (kl_gradient.pow(2).sum(-1) + 1e-10)
        return gradient - F.relu(excess).unsqueeze(-1) * kl_gradient
