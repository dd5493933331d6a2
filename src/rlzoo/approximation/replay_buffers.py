"""Replay for the DQN family: SB3's buffers, a proportional prioritized buffer, and one batch type for both.

Prioritized experience replay (Schaul et al., 2016, "Prioritized Experience Replay"), proportional variant: a
transition is drawn with probability p_i^alpha / Σ p^alpha, where p_i = |TD error| + ε, and its loss is weighted by the
importance-sampling weight (N·P(i))^(-β) / max over the batch, β annealed to 1 over training by the algorithm.
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import numpy as np
import torch
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.vec_env import VecNormalize


class SumTree:
    """A tree whose every node holds the sum of its ``branching`` children, one numpy array per level: updates and
    proportional draws are a few array operations per level, vectorised over a batch (32 children: 3 levels for
    32,768 leaves, against 15 for a binary tree).

    :param searched: draws search the running sums of the first level of at most this many nodes (one cumulative sum
        and one binary search), then go down the levels below it; for up to this many leaves, no level is descended.
    """

    def __init__(self, size: int, branching: int = 32, searched: int = 4096) -> None:
        self.branching = branching
        ones = np.ones((branching, branching))
        self._prefix = np.hstack([np.triu(ones, 1), np.triu(ones)])  # x @ _prefix: x's exclusive, inclusive cumsums
        self.levels: list[np.ndarray] = []  # the leaves first, up to the root's children; each padded with zeros
        width = max(size, 1)
        while not self.levels or len(self.levels[-1]) > branching:
            self.levels.append(np.zeros(-(-width // branching) * branching))
            width = len(self.levels[-1]) // branching
        self._searched = next(i for i, level in enumerate(self.levels) if len(level) <= max(searched, branching))

    @property
    def total(self) -> float:
        return float(self.levels[-1].sum())

    def __getitem__(self, leaves: np.ndarray) -> np.ndarray:
        return self.levels[0][leaves]

    def __setitem__(self, leaves: np.ndarray, values: np.ndarray) -> None:
        nodes = np.asarray(leaves)
        self.levels[0][nodes] = values
        for children, parents in itertools.pairwise(self.levels):  # a parent listed twice gets the same sum twice
            nodes = nodes // self.branching
            parents[nodes] = children.reshape(-1, self.branching)[nodes].sum(axis=1)

    def find(self, masses: np.ndarray) -> np.ndarray:
        """The leaves where the cumulative sum first exceeds each of ``masses`` (each in [0, total))."""
        start = self._searched
        cumulative = np.cumsum(self.levels[start])
        nodes = np.minimum(np.searchsorted(cumulative, masses, side="right"), len(cumulative) - 1)
        masses = masses - np.where(nodes > 0, cumulative[nodes - 1], 0.0)
        rows = np.arange(len(masses))
        for level in reversed(self.levels[:start]):
            sums = level.reshape(-1, self.branching)[nodes] @ self._prefix
            before, through = sums[:, : self.branching], sums[:, self.branching :]  # children's mass left of / up to
            through[:, -1] = np.inf  # a mass at or past the block's sum (float round-off) falls in its last child
            child = (through > masses[:, None]).argmax(axis=1)
            masses -= before[rows, child]
            nodes = nodes * self.branching + child
        return nodes


class Batch(NamedTuple):
    """A training batch: n-step transitions, their bootstrap discounts and importance-sampling weights."""

    observations: torch.Tensor
    actions: torch.Tensor
    next_observations: torch.Tensor
    dones: torch.Tensor  # (batch,): 1 where the n-step window ended in a terminal state
    rewards: torch.Tensor  # (batch,): discounted n-step reward sums
    discounts: torch.Tensor  # (batch,): gamma^k for a window of k steps
    weights: torch.Tensor  # (batch,): importance-sampling weights (ones for uniform replay)
    indices: np.ndarray | None  # the drawn transitions, for priority updates (None for uniform replay)


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay with n-step returns, on SB3's ``ReplayBuffer`` storage.

    :param alpha: how much prioritisation is used (0: uniform).
    :param epsilon: added to |TD error| so that no transition becomes impossible to draw.
    :param n_steps: transitions are n-step: rewards summed over up to ``n_steps`` steps of one episode.
    :param gamma: the discount of those sums.
    """

    def __init__(
        self,
        buffer_size: int,
        *args: Any,
        alpha: float = 0.5,
        epsilon: float = 1e-6,
        n_steps: int = 1,
        gamma: float = 0.99,
        **kwargs: Any,
    ) -> None:
        super().__init__(buffer_size, *args, **kwargs)
        self.alpha, self.epsilon, self.n_steps, self.gamma = alpha, epsilon, n_steps, gamma
        self.tree = SumTree(self.buffer_size * self.n_envs)
        self.max_priority = 1.0
        self._added: list[int] = []  # rows added since the tree was last written (written in one go when read)
        self._offsets = np.arange(n_steps)
        self._powers = gamma ** np.arange(n_steps + 1)

    def add(self, *args: Any, **kwargs: Any) -> None:
        self._added.append(self.pos)
        super().add(*args, **kwargs)

    def _write_added(self) -> None:
        """New transitions get the largest priority yet (drawn at least once, likely soon): written for all rows
        added since the last draw at once, before the tree is read or other priorities change."""
        if self._added:
            rows = np.asarray(self._added)[:, None] * self.n_envs + np.arange(self.n_envs)
            self.tree[rows.ravel()] = self.max_priority**self.alpha
            self._added.clear()

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> Any:
        """A prioritized draw with full importance-sampling correction (β = 1); see :meth:`sample_prioritized`."""
        return self.sample_prioritized(batch_size, beta=1.0, env=env)

    def sample_prioritized(self, batch_size: int, beta: float, env: VecNormalize | None = None) -> Batch:
        """Draw ``batch_size`` transitions in proportion to their priorities (stratified over equal mass segments)."""
        self._write_added()
        total = self.tree.total
        masses = (np.arange(batch_size) + np.random.uniform(size=batch_size)) * total / batch_size
        size = (self.buffer_size if self.full else self.pos) * self.n_envs
        flat = np.minimum(self.tree.find(np.minimum(masses, np.nextafter(total, 0))), size - 1)  # float round-off
        weights = (size * self.tree[flat] / total) ** -beta
        return self._batch(flat // self.n_envs, flat % self.n_envs, weights / weights.max(), flat, env)

    def update_priorities(self, indices: np.ndarray, errors: np.ndarray) -> None:
        """Set the priorities of drawn transitions from their new absolute TD errors (or losses)."""
        self._write_added()
        priorities = np.abs(errors) + self.epsilon
        self.max_priority = max(self.max_priority, float(priorities.max()))
        self.tree[indices] = priorities**self.alpha

    def _batch(
        self, rows: np.ndarray, envs: np.ndarray, weights: np.ndarray, flat: np.ndarray, env: VecNormalize | None
    ) -> Batch:
        """n-step transitions starting at (``rows``, ``envs``): a window stops at an episode end or the newest row."""
        steps = (rows[:, None] + self._offsets) % self.buffer_size
        column = envs[:, None]
        ends = np.logical_or(self.dones[steps, column], self.timeouts[steps, column])
        ends |= steps == (self.pos - 1) % self.buffer_size  # the row after the newest holds older data
        ends[:, -1] = True  # a window holds n_steps steps at most
        last = ends.argmax(axis=1)
        discounts = self._powers[:-1] * (self._offsets <= last[:, None])  # gamma^k within the window, 0 past it
        rewards = self._normalize_reward(self.rewards[steps, column], env)
        final = steps[np.arange(len(rows)), last]
        dones = self.dones[final, envs] * (1 - self.timeouts[final, envs])
        scalars = np.stack([dones, (rewards * discounts).sum(axis=1), self._powers[last + 1], weights])
        dones_, returns, bootstrap, weights_ = self._tensor(scalars.astype(np.float32))  # one conversion, four rows
        return Batch(
            self._tensor(self._normalize_obs(self.observations[rows, envs], env)),  # type: ignore[arg-type]
            self._tensor(self.actions[rows, envs]),
            self._tensor(self._normalize_obs(self.next_observations[final, envs], env)),  # type: ignore[arg-type]
            dones_,
            returns,
            bootstrap,
            weights_,
            flat,
        )

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        """A tensor on the buffer's device from an array drawn for this batch (no copy on the CPU)."""
        return torch.from_numpy(array).to(self.device)


def sample_batch(
    buffer: ReplayBuffer, batch_size: int, gamma: float, beta: float, env: VecNormalize | None = None
) -> Batch:
    """A :class:`Batch` from any SB3 replay buffer: prioritized draws carry weights and indices, uniform ones do not."""
    if isinstance(buffer, PrioritizedReplayBuffer):
        return buffer.sample_prioritized(batch_size, beta, env)
    data = buffer.sample(batch_size, env)
    ones = torch.ones(batch_size, device=data.rewards.device)
    discounts = data.discounts.flatten() if data.discounts is not None else ones * gamma
    return Batch(
        data.observations,
        data.actions,
        data.next_observations,
        data.dones.flatten(),
        data.rewards.flatten(),
        discounts,
        ones,
        None,
    )
