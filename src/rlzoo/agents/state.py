"""What an agent is handed and what it returns: :class:`State`, :class:`StateArray` and the agent protocols.

As in the autonomous-learning-library, an agent maps a state to an action and owns everything else (when to learn,
how to preprocess); the control loop belongs to the caller. A state carries the observation *and* the outcome of the
step that produced it (reward, terminated, truncated), so a training agent can close the transition it belongs to.

Why objects rather than Gymnasium's tuples: one argument per call keeps ``act`` the same for a web handler that only
has an observation (``State(obs)``) and for a training loop; ``State.from_step(env.step(action))`` converts the tuple.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class State:
    """One env's state: what ``reset`` or ``step`` returned.

    Episodes follow a plain Gymnasium loop: the last state of an episode has ``terminated`` or ``truncated`` set
    (a training agent learns from it; the action returned for it is not used), and the next state handed in starts
    a new episode. A state of ``env.reset()`` (:meth:`from_reset`: ``first`` set) starts one too, whether or not the
    last state of the previous episode was handed in.

    :param observation: the env's observation (what the agent's representation expects; see the agent).
    :param reward: the reward of the step that led here (0 after a reset).
    :param terminated: the episode ended in a terminal state (no bootstrapping from it).
    :param truncated: the episode was cut short (time limit); its value is still bootstrapped.
    :param info: the env's info dict.
    :param first: the first state of an episode (what ``env.reset()`` returned).
    """

    observation: Any
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    first: bool = field(default=False, kw_only=True)

    @property
    def done(self) -> bool:
        """The episode ended here."""
        return self.terminated or self.truncated

    @property
    def mask(self) -> float:
        """0 for a terminal state, else 1: the factor on the value bootstrapped from this state."""
        return 0.0 if self.terminated else 1.0

    @classmethod
    def from_reset(cls, result: tuple[Any, dict[str, Any]]) -> State:
        """The state of ``env.reset()``'s ``(observation, info)``."""
        observation, info = result
        return cls(observation, info=info, first=True)

    @classmethod
    def from_step(cls, result: tuple[Any, float, bool, bool, dict[str, Any]]) -> State:
        """The state of ``env.step()``'s ``(observation, reward, terminated, truncated, info)``."""
        observation, reward, terminated, truncated, info = result
        return cls(observation, float(reward), bool(terminated), bool(truncated), info)


@dataclass(frozen=True)
class StateArray:
    """The states of a batch of envs stepped together, which reset a finished env within the same step.

    That is how SB3's ``VecEnv`` and ``gymnasium.vector`` envs made with ``autoreset_mode=SAME_STEP`` behave: every
    step closes exactly one transition per env, so each row fills one row of SB3's buffers.

    :param observation: one observation per env; for an env whose episode just ended, the first observation of its
        next episode.
    :param reward: the reward of the step just taken, per env.
    :param terminated: per env, the step just taken ended the episode in a terminal state.
    :param truncated: per env, the step just taken cut the episode short.
    :param final_observation: per env, the last observation of the episode that just ended (None for other envs);
        None when no episode ended.
    """

    observation: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_observation: list[Any] | None = None

    def __post_init__(self) -> None:
        n = len(self.observation)
        for name in ("reward", "terminated", "truncated"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"StateArray: {name} has {len(getattr(self, name))} entries for {n} observations")
        finals = self.final_observation
        if any(done and (finals is None or finals[i] is None) for i, done in enumerate(self.done)):
            raise ValueError(
                "StateArray: an episode ended but final_observation is missing; step a gymnasium.vector env made "
                "with autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP (or an SB3 VecEnv)"
            )

    def __len__(self) -> int:
        return len(self.observation)

    @property
    def done(self) -> np.ndarray:
        """Per env, the step just taken ended an episode (its observation starts the next one)."""
        return np.logical_or(self.terminated, self.truncated)

    @property
    def mask(self) -> np.ndarray:
        """Per env, 0 where the step just taken reached a terminal state, else 1."""
        return 1.0 - np.asarray(self.terminated, dtype=np.float32)

    @classmethod
    def from_observations(cls, observations: Any) -> StateArray:
        """First states of a batch (``envs.reset()``'s observations) or observations from anywhere."""
        observations = np.asarray(observations)
        n = len(observations)
        return cls(observations, np.zeros(n, np.float32), np.zeros(n, bool), np.zeros(n, bool))

    @classmethod
    def from_reset(cls, result: tuple[Any, dict[str, Any]]) -> StateArray:
        """The states of a ``gymnasium.vector`` env's ``reset()``."""
        return cls.from_observations(result[0])

    @classmethod
    def from_step(cls, result: tuple[Any, Any, Any, Any, dict[str, Any]]) -> StateArray:
        """The states of a ``gymnasium.vector`` env's ``step()`` (``autoreset_mode=SAME_STEP``)."""
        observation, reward, terminated, truncated, info = result
        final = info.get("final_obs")
        return cls(
            np.asarray(observation),
            np.asarray(reward, dtype=np.float32),
            np.asarray(terminated, dtype=bool),
            np.asarray(truncated, dtype=bool),
            None if final is None else list(final),
        )


@runtime_checkable
class Agent(Protocol):
    """Takes one state, returns one action; when and how it learns is its own business."""

    def act(self, state: State) -> Any:
        """The action for ``state``."""
        ...


@runtime_checkable
class ParallelAgent(Protocol):
    """Takes the states of a batch of envs, returns one action per env."""

    def act(self, states: StateArray) -> np.ndarray:
        """The actions for ``states``, one row per env."""
        ...
