"""The DQN family up to Rainbow: SB3 off-policy algorithms written on :mod:`rlzoo.approximation`'s ``QNetwork``.

- :class:`DeepQ`: DQN with double Q-learning, dueling heads, prioritized replay, n-step returns and noisy nets, each
  a keyword (option ``ddqn`` of the ``algo`` group); :class:`PrioritizedDQN`: the same with prioritized replay on by
  default (option ``per``);
- :class:`CategoricalDQN`: the same with a value distribution on a fixed support (option ``c51``); :class:`Rainbow`:
  the same with every part on by default (option ``rainbow``).

The classes differ only in their defaults, so that each option's YAML shows the class's own defaults.
"""

import inspect
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.buffers import NStepReplayBuffer, ReplayBuffer
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.torch_layers import NatureCNN
from stable_baselines3.common.utils import LinearSchedule, is_vectorized_observation

from rlzoo.algos.sb3_base import ApproximationShell, require
from rlzoo.approximation.approximations import QDist, QNetwork
from rlzoo.approximation.q_networks import QPolicy
from rlzoo.approximation.replay_buffers import Batch, PrioritizedReplayBuffer, sample_batch

PRIORITY_KEYS = {"alpha": 0.5, "beta": 0.4, "epsilon": 1e-6}
HEAD_KEYS = ("dueling", "noisy_std", "n_atoms", "v_min", "v_max")


class QCnnPolicy(QPolicy):
    """:class:`QPolicy` on images: NatureCNN features."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("features_extractor_class", NatureCNN)
        super().__init__(*args, **kwargs)


class DeepQ(ApproximationShell, OffPolicyAlgorithm):
    """Deep Q-learning (Mnih et al., 2015, "Human-level control through deep reinforcement learning") with the
    improvements Rainbow combines, each switched by a keyword:

    - double Q-learning (van Hasselt et al., 2016): the online network picks the next action, the target values it;
    - dueling heads (Wang et al., 2016): Q = V + A - mean(A);
    - prioritized replay (Schaul et al., 2016): proportional, importance-sampling β annealed to 1 over training;
    - n-step returns (Sutton, 1988; as in Hessel et al., 2018);
    - noisy nets (Fortunato et al., 2018): learned parameter noise, usually with ε = 0; drawn once per act and once
      per gradient step (the online network's for its two uses, the target network's own).

    The train step is ALL's DQN ``_train``: sample, forward, targets, loss, reinforce.

    :param learning_rate: Adam's learning rate, or an SB3 schedule of the progress remaining.
    :param buffer_size: transitions kept (summed over envs).
    :param learning_starts: agent steps of uniform random actions before learning.
    :param batch_size: transitions per gradient step.
    :param tau: target-network interpolation at each target update (1: copy).
    :param gamma: discount factor.
    :param train_freq: update every this many steps (or ``[n, "episode"]``).
    :param gradient_steps: gradient steps per update (-1: as many as env steps collected).
    :param n_steps: steps summed in each return before bootstrapping.
    :param target_update_interval: gradient steps between two target-network updates (ALL's count, not env steps).
    :param exploration_fraction: fraction of training over which ε falls from its initial to its final value.
    :param exploration_initial_eps: initial ε of ε-greedy exploration.
    :param exploration_final_eps: final ε.
    :param max_grad_norm: the largest gradient norm (0: no clipping).
    :param double: double Q-learning targets.
    :param dueling: a dueling head.
    :param prioritized_replay: ``{alpha, beta, epsilon}`` of prioritized replay (missing keys take 0.5, 0.4, 1e-6;
        β is the initial importance-sampling exponent), or None for uniform replay.
    :param noisy_std: sigma0 of noisy layers in the head, or None for plain layers.
    :param policy_kwargs: network keywords (``net_arch``, ``activation_fn``, ``features_extractor_class`` ...).
    """

    supported_action_spaces: tuple[type[spaces.Space], ...] | None = (spaces.Discrete,)

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {"MlpPolicy": QPolicy, "CnnPolicy": QCnnPolicy}
    approximations = ("q",)
    policy: QPolicy
    q: QNetwork

    def __init__(
        self,
        policy: str | type[QPolicy],
        env: Any,
        learning_rate: float | Callable[[float], float] = 1e-4,
        buffer_size: int = 100_000,
        learning_starts: int = 1000,
        batch_size: int = 32,
        tau: float = 1.0,
        gamma: float = 0.99,
        train_freq: int | tuple[int, str] = 4,
        gradient_steps: int = 1,
        n_steps: int = 1,
        target_update_interval: int = 1000,
        exploration_fraction: float = 0.1,
        exploration_initial_eps: float = 1.0,
        exploration_final_eps: float = 0.05,
        max_grad_norm: float = 10.0,
        double: bool = True,
        dueling: bool = True,
        prioritized_replay: dict[str, float] | None = None,
        noisy_std: float | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        tensorboard_log: str | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: torch.device | str = "auto",
        _init_setup_model: bool = True,
    ) -> None:
        head: dict[str, Any] = getattr(self, "_head", {})  # the distributional subclass's support
        keywords = {k: v for k, v in locals().items() if k not in ("self", "head", "__class__", "policy", "env")}
        self.check_keywords(**keywords, **head)
        super().__init__(
            policy, env, learning_rate=learning_rate, buffer_size=buffer_size, learning_starts=learning_starts,
            batch_size=batch_size, tau=tau, gamma=gamma, train_freq=train_freq, gradient_steps=gradient_steps,
            n_steps=n_steps, policy_kwargs=dict(policy_kwargs or {}), tensorboard_log=tensorboard_log,
            verbose=verbose, device=device, seed=seed, sde_support=False, support_multi_env=True,
            supported_action_spaces=self.supported_action_spaces,
        )  # fmt: skip
        self.target_update_interval = target_update_interval
        self.exploration_fraction = exploration_fraction
        self.exploration_initial_eps = exploration_initial_eps
        self.exploration_final_eps = exploration_final_eps
        self.exploration_rate = exploration_initial_eps
        self.max_grad_norm = max_grad_norm
        self.double = double
        self.prioritized_replay = None if prioritized_replay is None else PRIORITY_KEYS | prioritized_replay
        self.policy_kwargs.update(dueling=dueling, noisy_std=noisy_std, **head)
        if _init_setup_model:
            self._setup_model()

    @classmethod
    def check_keywords(cls, **kwargs: Any) -> None:
        name = cls.__name__
        require(kwargs.get("n_steps", 1) >= 1, f"algo.n_steps={kwargs.get('n_steps')} must be ≥ 1 ({name})")
        require(kwargs.get("target_update_interval", 1) >= 1, f"algo.target_update_interval must be ≥ 1 ({name})")
        require(0 < kwargs.get("tau", 1.0) <= 1, f"algo.tau={kwargs.get('tau')} must be in (0, 1] ({name})")
        noisy = kwargs.get("noisy_std")
        require(noisy is None or noisy > 0, f"algo.noisy_std={noisy} must be > 0, or null for plain layers ({name})")
        taken = sorted(set(HEAD_KEYS) & set(kwargs.get("policy_kwargs") or {}))
        require(not taken, f"algo.policy_kwargs.{', '.join(taken)}: set algo.<key> instead ({name})")
        _check_priorities(kwargs.get("prioritized_replay"), name)

    def _setup_model(self) -> None:
        self._setup_lr_schedule()
        self.set_random_seed(self.seed)
        if self.replay_buffer is None:
            self.replay_buffer = self._make_replay_buffer()
        self.policy = self.policy_class(  # type: ignore[assignment]
            self.observation_space, self.action_space, self.lr_schedule, **self.policy_kwargs
        ).to(self.device)
        self._convert_train_freq()
        self.exploration_schedule = LinearSchedule(
            self.exploration_initial_eps, self.exploration_final_eps, self.exploration_fraction
        )
        self._setup_approximation()

    def _make_replay_buffer(self) -> ReplayBuffer:
        common: dict[str, Any] = {"device": self.device, "n_envs": self.n_envs}
        args = (self.buffer_size, self.observation_space, self.action_space)
        if self.prioritized_replay is not None:
            self.replay_buffer_class = PrioritizedReplayBuffer
            alpha, epsilon = self.prioritized_replay["alpha"], self.prioritized_replay["epsilon"]
            return PrioritizedReplayBuffer(
                *args, **common, alpha=alpha, epsilon=epsilon, n_steps=self.n_steps, gamma=self.gamma
            )
        if self.n_steps > 1:
            self.replay_buffer_class = NStepReplayBuffer
            return NStepReplayBuffer(*args, **common, n_steps=self.n_steps, gamma=self.gamma)
        self.replay_buffer_class = ReplayBuffer
        return ReplayBuffer(*args, **common)

    def _setup_approximation(self) -> None:
        self.q = self._approximate(
            QNetwork, self.policy.q_net, self.policy.optimizer, "q", clip_grad=self.max_grad_norm,
            target=self.policy.q_net_target, tau=self.tau, target_every=self.target_update_interval,
        )  # fmt: skip

    def _on_step(self) -> None:
        """After every env step: the exploration rate follows its schedule."""
        self.exploration_rate = self.exploration_schedule(self._current_progress_remaining)
        self.logger.record("rollout/exploration_rate", self.exploration_rate)

    def _sample(self, batch_size: int) -> Batch:
        assert self.replay_buffer is not None
        beta = 1.0
        if self.prioritized_replay is not None:  # annealed from its initial value to 1 at the end of training
            beta = 1 - (1 - self.prioritized_replay["beta"]) * self._current_progress_remaining
        return sample_batch(self.replay_buffer, batch_size, self.gamma, beta, self._vec_normalize_env)

    def _prioritize(self, batch: Batch, errors: torch.Tensor) -> None:
        if batch.indices is not None:
            assert isinstance(self.replay_buffer, PrioritizedReplayBuffer)
            self.replay_buffer.update_priorities(batch.indices, errors.cpu().numpy())  # made absolute there

    def train(self, gradient_steps: int, batch_size: int = 32) -> None:
        """``gradient_steps`` updates of the Q-network on replayed n-step transitions."""
        self.policy.set_training_mode(True)
        for _ in range(gradient_steps):
            self.policy.reset_noise()
            batch = self._sample(batch_size)
            values, next_values = self._values(batch)
            targets = batch.rewards + batch.discounts * (1 - batch.dones) * next_values
            losses = F.smooth_l1_loss(values, targets, reduction="none")
            self.q.reinforce((batch.weights * losses).mean())
            self._prioritize(batch, (targets - values).detach())
        self._n_updates += gradient_steps
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")

    def _values(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Q(s, a) with gradients, and max_a Q_target(s', a) or, with double Q-learning, Q_target(s', argmax_a Q(s', a))
        (the online network's passes on s and s' made as one)."""
        if self.double:
            values, online_next = self.q.with_next(batch.observations, batch.actions, batch.next_observations)
            return values, self.q.target(batch.next_observations, online_next.argmax(dim=1))
        values = self.q(batch.observations, batch.actions)
        return values, self.q.target(batch.next_observations).max(dim=1).values

    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """Greedy actions; when exploring (``deterministic=False``), ε-greedy and, with noisy nets, noisy (the network
        is not asked when every env explores)."""
        if deterministic or self.exploration_rate <= 0:
            return self.policy.predict(observation, state, episode_start, deterministic)
        assert isinstance(self.action_space, spaces.Discrete)
        vectorized = is_vectorized_observation(observation, self.observation_space)  # type: ignore[arg-type]  # takes dicts too
        n = len(next(iter(observation.values())) if isinstance(observation, dict) else observation) if vectorized else 1
        explore = np.random.rand(n) < self.exploration_rate
        if not explore.any():
            return self.policy.predict(observation, state, episode_start, deterministic)
        random = np.random.randint(int(self.action_space.n), size=n)
        if explore.all():
            return (random if vectorized else random.reshape(())), state
        action, state = self.policy.predict(observation, state, episode_start, deterministic)
        return np.where(explore, random, action.reshape(n)).reshape(np.shape(action)), state


class CategoricalDQN(DeepQ):
    """Distributional Q-learning (Bellemare et al., 2017, "A Distributional Perspective on Reinforcement Learning"):
    each action's return is a categorical distribution on ``n_atoms`` evenly spaced values in [v_min, v_max],
    learned by projecting the Bellman-updated target distribution onto the support (cross-entropy loss).

    By default it is C51: double Q-learning, dueling, prioritized replay, n-step returns and noisy nets off (each a
    keyword, as for :class:`DeepQ`); with all on it is :class:`Rainbow`. Keywords as :class:`DeepQ`, plus:

    :param n_atoms: atoms of the support (≥ 2).
    :param v_min: the smallest return represented.
    :param v_max: the largest return represented.
    """

    q: QDist

    def __init__(
        self,
        policy: str | type[QPolicy],
        env: Any,
        n_atoms: int = 51,
        v_min: float = -10.0,
        v_max: float = 10.0,
        learning_rate: float | Callable[[float], float] = 1e-4,
        buffer_size: int = 100_000,
        learning_starts: int = 1000,
        batch_size: int = 32,
        tau: float = 1.0,
        gamma: float = 0.99,
        train_freq: int | tuple[int, str] = 4,
        gradient_steps: int = 1,
        n_steps: int = 1,
        target_update_interval: int = 1000,
        exploration_fraction: float = 0.1,
        exploration_initial_eps: float = 1.0,
        exploration_final_eps: float = 0.05,
        max_grad_norm: float = 10.0,
        double: bool = False,
        dueling: bool = False,
        prioritized_replay: dict[str, float] | None = None,
        noisy_std: float | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        tensorboard_log: str | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: torch.device | str = "auto",
        _init_setup_model: bool = True,
    ) -> None:
        self._head = {"n_atoms": n_atoms, "v_min": v_min, "v_max": v_max}
        # DeepQ's keywords by name (its signature is repeated above only for its defaults here and the factory's
        # keyword check): every local but the head's and self.
        keywords = {k: v for k, v in locals().items() if k not in ("self", "__class__", "n_atoms", "v_min", "v_max")}
        super().__init__(**keywords)

    @classmethod
    def check_keywords(cls, **kwargs: Any) -> None:
        super().check_keywords(**kwargs)
        n_atoms, v_min, v_max = kwargs.get("n_atoms", 51), kwargs.get("v_min", -10.0), kwargs.get("v_max", 10.0)
        require(n_atoms >= 2, f"algo.n_atoms={n_atoms} must be ≥ 2 (a distribution needs two atoms or more)")
        require(v_min < v_max, f"algo.v_min={v_min} must be < algo.v_max={v_max} (the support of the returns)")

    def _setup_approximation(self) -> None:
        self.q = self._approximate(
            QDist, self.policy.q_net, self.policy.optimizer, "q", clip_grad=self.max_grad_norm,
            target=self.policy.q_net_target, tau=self.tau, target_every=self.target_update_interval,
            support=self.policy.support,
        )  # fmt: skip

    def train(self, gradient_steps: int, batch_size: int = 32) -> None:
        """``gradient_steps`` cross-entropy updates towards the projected n-step target distributions."""
        self.policy.set_training_mode(True)
        for _ in range(gradient_steps):
            self.policy.reset_noise()
            batch = self._sample(batch_size)
            probabilities, next_probabilities = self._distributions(batch)
            scale = (batch.discounts * (1 - batch.dones)).unsqueeze(-1)
            returns = batch.rewards.unsqueeze(-1) + scale * self.q.support
            targets = self.q.project(returns, next_probabilities)
            losses = -(targets * probabilities.clamp_min(1e-8).log()).sum(dim=-1)
            self.q.reinforce((batch.weights * losses).mean())
            self._prioritize(batch, losses.detach())
        self._n_updates += gradient_steps
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")

    def _distributions(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """The distributions of the taken actions, with gradients, and the target network's distributions of the
        greedy next actions (chosen online with double Q-learning: the online passes on s and s' made as one)."""
        observations, next_observations = batch.observations, batch.next_observations
        if self.double:
            probabilities, chooser = self.q.with_next(observations, batch.actions, next_observations)
            return probabilities, self.q.target(next_observations, self.q.expectation(chooser).argmax(dim=1))
        return self.q(observations, batch.actions), self.q.greedy(self.q.target(next_observations))


def _with_defaults(base: type, defaults: dict[str, Any]) -> inspect.Signature:
    """``base``'s constructor signature with other defaults (what rlzoo's keyword checks read)."""
    signature = inspect.signature(base)
    parameters = [p.replace(default=defaults.get(p.name, p.default)) for p in signature.parameters.values()]
    return signature.replace(parameters=parameters)


PRIORITIZED: dict[str, Any] = {"prioritized_replay": dict(PRIORITY_KEYS)}
RAINBOW: dict[str, Any] = {
    **PRIORITIZED, "double": True, "dueling": True, "n_steps": 3, "noisy_std": 0.5,
    "exploration_initial_eps": 0.0, "exploration_final_eps": 0.0,
}  # fmt: skip


class PrioritizedDQN(DeepQ):
    """Double DQN with a dueling head and proportional prioritized replay (Schaul et al., 2016, "Prioritized
    Experience Replay"): :class:`DeepQ` with ``prioritized_replay={alpha: 0.5, beta: 0.4, epsilon: 1e-6}`` by
    default."""

    def __init__(self, policy: str | type[QPolicy], env: Any, **kwargs: Any) -> None:
        super().__init__(policy, env, **(PRIORITIZED | kwargs))


class Rainbow(CategoricalDQN):
    """Rainbow (Hessel et al., 2018, "Rainbow: Combining Improvements in Deep Reinforcement Learning"):
    :class:`CategoricalDQN` with double Q-learning, a dueling head, prioritized replay, 3-step returns and noisy nets
    (sigma0 0.5, no epsilon-greedy) by default."""

    def __init__(self, policy: str | type[QPolicy], env: Any, **kwargs: Any) -> None:
        super().__init__(policy, env, **(RAINBOW | kwargs))


PrioritizedDQN.__signature__ = _with_defaults(DeepQ, PRIORITIZED)  # type: ignore[attr-defined]
Rainbow.__signature__ = _with_defaults(CategoricalDQN, RAINBOW)  # type: ignore[attr-defined]


def _check_priorities(settings: dict[str, float] | None, name: str) -> None:
    if settings is None:
        return
    unknown = sorted(set(settings) - set(PRIORITY_KEYS))
    require(not unknown, f"algo.prioritized_replay.{', '.join(unknown)} is not a key; allowed: alpha, beta, epsilon")
    merged = PRIORITY_KEYS | settings
    require(merged["alpha"] >= 0, f"algo.prioritized_replay.alpha={merged['alpha']} must be ≥ 0 ({name})")
    require(0 <= merged["beta"] <= 1, f"algo.prioritized_replay.beta={merged['beta']} must be in [0, 1] ({name})")
    require(merged["epsilon"] > 0, f"algo.prioritized_replay.epsilon={merged['epsilon']} must be > 0 ({name})")
