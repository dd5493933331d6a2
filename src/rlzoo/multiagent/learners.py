"""The learners of a multi-agent run: one SB3 training agent per agent key, on held envs of that agent's spaces.

- ``independent``: every key has its own model (network, optimizer, buffer) — the existing training-agent API, once
  per key.
- ``shared``: every key keeps its own buffer and transition stream, but all models hold *one* policy object (network
  and optimizer): each key's rollouts or replay batches update the same weights. The observation is the agent's
  flattened observation with the one-hot agent index appended, so the one policy knows whose turn it is.
- ``fixed``: one key learns; the others play a fixed opponent (see :mod:`rlzoo.multiagent.agents`).

Action masks (PettingZoo's classic games) are honoured by masked ε-greedy exploration and masked argmax over the
Q-values (:class:`MaskedQAgent`, DQN and QR-DQN); the bootstrapped target maximises over the next state's legal
actions (:class:`MaskedReplayBuffer` keeps them, :class:`MaskedTarget` applies them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

from rlzoo.agents import sb3_private as sb3
from rlzoo.agents.observation_transform import HeldVecEnv
from rlzoo.agents.training_agent import OffPolicyAgent, TrainingAgent, training_agent
from rlzoo.algos.factory import AlgorithmFactory
from rlzoo.multiagent.pettingzoo_envs import AgentSpaces
from rlzoo.multiagent.state import MultiagentState
from rlzoo.srl.representation import Representation

OBSERVED = Representation("ground_truth", "Mlp", {}, None, None)  # multi-agent learners see observations as they are


@dataclass(frozen=True)
class ObservationCoder:
    """What a learner observes of a :class:`MultiagentState`: the observation as it is, or (``keys`` given, the
    shared layout) flattened, with the one-hot index of the agent in ``keys`` appended."""

    keys: tuple[str, ...] | None = None

    def space(self, observation: spaces.Space) -> spaces.Space:
        if self.keys is None:
            return observation
        size = spaces.flatdim(observation) + len(self.keys)
        return spaces.Box(-np.inf, np.inf, (size,), np.float32)

    def __call__(self, state: MultiagentState) -> np.ndarray:
        observation = np.asarray(state.observation)
        if self.keys is None:
            return observation
        one_hot = np.zeros(len(self.keys), np.float32)
        one_hot[self.keys.index(state.agent)] = 1.0
        return np.concatenate([observation.astype(np.float32).ravel(), one_hot])


def action_scores(model: BaseAlgorithm, observations: np.ndarray) -> np.ndarray:
    """Per row, a score per discrete action whose argmax is the greedy action: Q-values (DQN), mean quantiles
    (QR-DQN) or action probabilities (actor-critic policies)."""
    policy: Any = model.policy
    obs, _ = policy.obs_to_tensor(observations)
    with th.no_grad():
        if hasattr(model, "quantile_net"):
            return model.quantile_net(obs).mean(dim=1).cpu().numpy()
        if hasattr(model, "q_net"):
            return model.q_net(obs).cpu().numpy()
        return policy.get_distribution(obs).distribution.probs.cpu().numpy()


def masked_argmax(scores: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Per row, the legal action with the highest score."""
    return np.where(masks, scores, -np.inf).argmax(axis=1)


def masked_sample(model: BaseAlgorithm, observation: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
    """A sampled legal action for one observation, as the model's ``predict(deterministic=False)`` samples: a Q-learner
    (DQN, QR-DQN) plays ε-greedy over the legal actions (ε: the end of its exploration schedule), an actor-critic
    samples its action probabilities renormalised over the legal actions."""
    legal = np.flatnonzero(mask)
    scores = action_scores(model, observation[None])[0]
    if hasattr(model, "q_net") or hasattr(model, "quantile_net"):
        epsilon = float(model.exploration_schedule(0.0))  # type: ignore[attr-defined]
        if rng.random() < epsilon:
            return int(rng.choice(legal))
        return int(masked_argmax(scores[None], mask[None])[0])
    weights = scores[legal]
    return int(rng.choice(legal, p=weights / weights.sum()))


class MaskedReplayBuffer(ReplayBuffer):
    """SB3's replay buffer that also keeps the legal actions of each transition's next state (one env)."""

    extra_rows = ("next_masks",)  # per-row arrays beyond SB3's, kept in a checkpoint's replay chunks

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        n_actions = int(getattr(self.action_space, "n", 1))
        self.next_masks = np.ones((self.buffer_size, n_actions), dtype=bool)
        self.pending_mask: np.ndarray | None = None  # the next state's mask, for the transition added next
        self.sampled_masks = th.ones((0, n_actions), dtype=th.bool)

    def add(self, *args: Any, **kwargs: Any) -> None:
        mask = self.pending_mask
        self.next_masks[self.pos] = True if mask is None or not mask.any() else mask
        super().add(*args, **kwargs)

    def _get_samples(self, batch_inds: np.ndarray, env: Any = None) -> Any:
        self.sampled_masks = th.as_tensor(self.next_masks[batch_inds], device=self.device)
        return super()._get_samples(batch_inds, env)


class MaskedTarget(th.nn.Module):
    """The target network as the algorithm's ``train()`` reads it for next states: illegal actions at -inf, so the
    bootstrapped maximum is over legal actions (same parameters as ``target``: Polyak updates reach it)."""

    def __init__(self, target: th.nn.Module, buffer: MaskedReplayBuffer) -> None:
        super().__init__()
        self.target, self.buffer = target, [buffer]  # a list: not a submodule

    def forward(self, observations: th.Tensor) -> th.Tensor:
        values = self.target(observations)
        masks = self.buffer[0].sampled_masks
        if masks.shape[0] != values.shape[0]:
            return values
        shape = (masks.shape[0],) + (1,) * (values.dim() - 2) + (masks.shape[1],)
        return values.masked_fill(~masks.view(shape), -th.inf)


class MaskedQAgent(OffPolicyAgent):
    """A DQN / QR-DQN training agent that only plays legal actions: ε-greedy samples a legal action, the greedy
    action is the masked argmax. Set :attr:`action_mask` before each :meth:`act`.

    :param seed: seeds the exploration's random choices.
    """

    def __init__(self, model: OffPolicyAlgorithm, held: HeldVecEnv, train_steps: int, seed: int) -> None:
        super().__init__(model, held, train_steps)
        self.action_mask: np.ndarray | None = None
        self._rng = np.random.default_rng(seed)
        buffer = MaskedReplayBuffer(
            model.buffer_size, model.observation_space, model.action_space, device=model.device, n_envs=1
        )
        model.replay_buffer = buffer
        name = "quantile_net_target" if hasattr(model, "quantile_net_target") else "q_net_target"
        setattr(model, name, MaskedTarget(getattr(model, name), buffer))

    def _learn(self, new_obs: Any, rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]) -> None:
        assert isinstance(self.model.replay_buffer, MaskedReplayBuffer)
        self.model.replay_buffer.pending_mask = self.action_mask  # the mask of the state that closes the transition
        super()._learn(new_obs, rewards, dones, infos)

    def _choose(self) -> np.ndarray:
        model: Any = self.model
        if self._steps == 0:
            model.policy.set_training_mode(False)
        n_actions = int(model.action_space.n)
        mask = np.ones(n_actions, bool) if self.action_mask is None else np.asarray(self.action_mask, bool)
        explore = model.num_timesteps < model.learning_starts or self._rng.random() < model.exploration_rate
        if explore:
            action = int(self._rng.choice(np.flatnonzero(mask)))
        else:
            action = int(masked_argmax(action_scores(model, sb3.last_observation(model)), mask[None])[0])
        self._actions = self._buffer_actions = np.array([action])
        return self._actions


@dataclass
class Learners:
    """The training agents by agent key, and the models to save by learner name."""

    agents: dict[str, TrainingAgent]
    models: dict[str, BaseAlgorithm]
    coder: ObservationCoder

    def share_loggers(self) -> None:
        """Every key's model writes through the logger of the learner it belongs to (the saved model's, which the
        run sets): a shared learner's other models have no console table or log folder of their own."""
        for agent in self.agents.values():
            owner = next(m for m in self.models.values() if m.policy is agent.model.policy)
            if agent.model is not owner:
                agent.model.set_logger(owner.logger)


def build_learners(
    factory: AlgorithmFactory,
    policy: str | type,
    agents: Mapping[str, AgentSpaces],
    learners: Mapping[str, tuple[str, ...]],
    *,
    seed: int,
    device: str,
    train_steps: int,
    verbose: int = 0,
) -> Learners:
    """One model and training agent per learning key (``learners``: name → keys; more than one key: shared).

    :param train_steps: the horizon of each key's schedules, in that key's own steps.
    """
    shared = any(len(keys) > 1 for keys in learners.values())
    coder = ObservationCoder(tuple(k for keys in learners.values() for k in keys) if shared else None)
    by_key: dict[str, TrainingAgent] = {}
    models: dict[str, BaseAlgorithm] = {}
    for name, keys in learners.items():
        first: BaseAlgorithm | None = None
        for i, key in enumerate(keys):
            space = coder.space(agents[key].observation)
            held = HeldVecEnv(OBSERVED, np.zeros((1, *(space.shape or ()))), agents[key].action, space, monitor=True)
            model = factory(policy=policy, env=held.venv, seed=seed + i, device=device, verbose=verbose)
            if first is None:
                first = models[name] = model
            else:
                _share_policy(model, first)
            by_key[key] = _training_agent(model, held, train_steps, agents[key].masked, seed + i)
    return Learners(by_key, models, coder)


def _share_policy(model: BaseAlgorithm, owner: BaseAlgorithm) -> None:
    """Make ``model`` act and learn with ``owner``'s policy object (network and optimizer)."""
    model.policy = owner.policy
    create_aliases = getattr(model, "_create_aliases", None)
    if create_aliases is not None:  # DQN's q_net, SAC's actor/critic ...: attributes pointing into the policy
        create_aliases()


def _training_agent(model: BaseAlgorithm, held: HeldVecEnv, train_steps: int, masked: bool, seed: int) -> TrainingAgent:
    if masked:
        assert isinstance(model, OffPolicyAlgorithm)  # the plan refuses other algorithms on masked envs
        return MaskedQAgent(model, held, train_steps, seed)
    return training_agent(model, held, train_steps)
