"""A run's representation applied to observations handed in, outside any env loop.

The representation of a run (``srl_model``) is a per-env Gymnasium wrapper and a vec-env wrapper, built from the
config. Rather than re-implementing each of them for agents, the agents wrap the *same* objects around
:class:`HeldObservations`, an env that returns whatever it is handed: feeding it an observation yields exactly what the
policy saw in training (resized pixels, stacked frames, encoded states ...), whatever the representation is.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import VecEnv

from rlzoo.agents.state import StateArray
from rlzoo.srl.representation import Representation
from rlzoo.training.build import represent


def space_of(observation: np.ndarray) -> spaces.Box:
    """A Box fitting ``observation``: 0..255 for uint8 images, unbounded otherwise."""
    if observation.dtype == np.uint8:
        return spaces.Box(0, 255, observation.shape, np.uint8)
    dtype = observation.dtype if np.issubdtype(observation.dtype, np.floating) else np.float32
    return spaces.Box(-np.inf, np.inf, observation.shape, dtype)


class HeldObservations(gym.Env):
    """An env that returns the observation it holds: ``step`` the one of the step, ``reset`` the next episode's first.

    ``render()`` returns the observation last returned, so that a representation built on renders (raw pixels) reads
    its frame from the states handed in.
    """

    metadata = {"render_modes": ["rgb_array"]}  # noqa: RUF012 (Gymnasium's convention)

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, render_mode: str | None) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.render_mode = render_mode
        self._observation: Any = None
        self._next: Any = None
        self._current: Any = None
        self._outcome: tuple[float, bool, bool] = (0.0, False, False)

    def hold(
        self,
        observation: Any,
        reward: float = 0.0,
        terminated: bool = False,
        truncated: bool = False,
        next_observation: Any = None,
    ) -> None:
        """What the next ``step`` returns, and (``next_observation``, else ``observation``) the next ``reset``."""
        self._observation = observation
        self._next = observation if next_observation is None else next_observation
        self._outcome = (reward, terminated, truncated)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self._current = self._next
        return self._current, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self._current = self._observation
        reward, terminated, truncated = self._outcome
        return self._current, reward, terminated, truncated, {}

    def render(self) -> Any:
        return self._current


class HeldVecEnv:
    """The run's representation around ``n`` held envs, applied by the same function as around real ones
    (:func:`rlzoo.training.build.represent`: per-env wrapper, vec wrapper, frame stacking), each env in SB3's
    ``Monitor`` when asked.

    :param representation: the run's representation.
    :param first: the first observations, one per env (wrappers may read one while they are built).
    :param observation_space: the env's own observation space (derived from ``first`` when None).
    :param action_space: the env's action space.
    :param monitor: wrap each env in SB3's Monitor (episode returns in ``info["episode"]``, as in training).
    :param frame_stack: the run's ``env.frame_stack``.
    """

    def __init__(
        self,
        representation: Representation,
        first: np.ndarray,
        action_space: spaces.Space,
        observation_space: spaces.Space | None = None,
        monitor: bool = False,
        frame_stack: int = 1,
    ) -> None:
        render_mode = representation.make_kwargs.get("render_mode")
        space = observation_space or space_of(np.asarray(first[0]))
        self.held = [HeldObservations(space, action_space, render_mode) for _ in first]
        self.hold_reset(first)
        makers = [functools.partial(self._env, i, monitor) for i in range(len(first))]
        self.venv: VecEnv = represent(makers, representation, frame_stack)

    def _env(self, rank: int, monitor: bool) -> gym.Env:
        return Monitor(self.held[rank]) if monitor else self.held[rank]

    def __len__(self) -> int:
        return len(self.held)

    def hold_reset(self, observations: np.ndarray) -> None:
        """Hold the first observations of every env; then ``reset()`` the outer vec env."""
        for env, observation in zip(self.held, observations, strict=True):
            env.hold(observation)

    def hold_step(self, states: StateArray) -> None:
        """Hold one step of every env (an env whose episode ended resets to its next observation); then ``step()``."""
        finals = states.final_observation or [None] * len(states)
        for i, env in enumerate(self.held):
            if states.done[i]:
                reward, terminated, truncated = (
                    float(states.reward[i]),
                    bool(states.terminated[i]),
                    bool(states.truncated[i]),
                )
                env.hold(finals[i], reward, terminated, truncated, next_observation=states.observation[i])
            else:
                env.hold(states.observation[i], float(states.reward[i]))
