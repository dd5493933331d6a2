"""Test agents: a trained model with learning off, usable wherever states come from.

A test agent needs no env object: it applies the run's representation and frozen normalisation itself, so a web
handler, another simulator or a multi-agent system hands it observations as the env would have produced them.
"""

from __future__ import annotations

from typing import Any, overload

import gymnasium as gym
import numpy as np
from omegaconf import DictConfig
from stable_baselines3.common.base_class import BaseAlgorithm

from rlzoo.agents.observation_transform import HeldVecEnv
from rlzoo.agents.state import State, StateArray
from rlzoo.any_env.making import make
from rlzoo.any_env.spec import EnvSpec
from rlzoo.srl.representation import Representation
from rlzoo.training.normalization import FrozenNormalization


class TestAgent:
    """Acts with a trained model, learning off, deterministically by default; an :class:`~rlzoo.agents.Agent` for one
    :class:`State` and a :class:`~rlzoo.agents.ParallelAgent` for a :class:`StateArray`.

    What ``state.observation`` is, per representation (``srl_model``), always as the env returns it:

    - ``ground_truth``: the env's observation (CartPole's 4 numbers, MobileRobot's position ...), not normalised:
      the agent applies the run's frozen statistics.
    - ``raw_pixels``: the env's ``rgb_array`` render (``env.render()``, height x width x 3, uint8, any size): the agent
      resizes it to ``srl_model.height`` x ``srl_model.width`` and stacks ``srl_model.frame_stack`` frames over calls.
    - a learned encoder: the encoder's input as its ``srl_model`` config takes it (observation or render); the agent
      encodes it with the encoder the run trained with.

    The observations are those of the env :meth:`make_env` returns: ``gymnasium.make(<the run's env id>)`` with the
    run's env arguments and per-env preprocessing (Atari: SB3's ``AtariWrapper``, 84 x 84 grey frames; action
    repeat). The agent stacks ``env.frame_stack`` frames itself.

    Frame stacks and recurrent states follow episodes: a state of ``env.reset()`` (``State.from_reset``), or the
    state after one with ``done`` set (in a batch, the rows with ``done`` set), starts a new episode; :meth:`reset`
    starts one explicitly.

    :param model: the trained algorithm.
    :param representation: the run's representation.
    :param normalize: the frozen observation normalisation (None: none).
    :param deterministic: act greedily / with the mean action (False: sample).
    :param config: the run's config, for reference.
    :param frame_stack: the run's ``env.frame_stack``: consecutive states the policy reads.
    :param spec: the run's env (for :meth:`make_env`).
    """

    __test__ = False  # not a pytest class

    def __init__(
        self,
        model: BaseAlgorithm,
        representation: Representation,
        normalize: FrozenNormalization | None = None,
        deterministic: bool = True,
        config: DictConfig | None = None,
        frame_stack: int = 1,
        spec: EnvSpec | None = None,
    ) -> None:
        self.model = model
        self.spec = spec
        self.frame_stack = frame_stack
        self.representation = representation
        self.normalize = normalize
        self.deterministic = deterministic
        self.config = config
        self._held: HeldVecEnv | None = None
        self._hidden: Any = None
        self._episode_over = False

    def make_env(self, render_mode: str | None = None) -> gym.Env:
        """The env whose observations this agent takes: the run's env id, arguments and per-env preprocessing, as
        its test episodes play it (whole games, real rewards).

        :param render_mode: ``rgb_array`` for frames to watch; a pixel representation's own render mode is set.
        :raise ValueError: an agent made without its run's env spec.
        """
        if self.spec is None:
            raise ValueError("this agent was made without its run's env spec: load it with load_agent(run_dir)")
        extra = {**self.representation.make_kwargs, **({"render_mode": render_mode} if render_mode else {})}
        return make(self.spec, extra)

    def reset(self) -> None:
        """Start new episodes: forget stacked frames and recurrent states."""
        self._held, self._hidden, self._episode_over = None, None, False

    @overload
    def act(self, state: State) -> Any: ...
    @overload
    def act(self, state: StateArray) -> np.ndarray: ...
    def act(self, state: State | StateArray) -> Any:
        """The action for one state (or one per row of a batch)."""
        if isinstance(state, StateArray):
            observations, starts = np.asarray(state.observation), np.asarray(state.done, dtype=bool)
        else:
            observations = np.asarray(state.observation)[None]
            starts = np.array([self._episode_over or state.first])
            self._episode_over = state.done
        obs, starts = self._represent(observations, starts)
        if self.normalize is not None:
            obs = self.normalize(obs)
        actions, self._hidden = self.model.predict(
            obs, state=self._hidden, episode_start=starts, deterministic=self.deterministic
        )
        return actions if isinstance(state, StateArray) else actions[0]

    def _represent(self, observations: np.ndarray, starts: np.ndarray) -> tuple[Any, np.ndarray]:
        """The representation's output for ``observations`` and which rows begin episodes (rows in ``starts`` do;
        all do when the batch size changes)."""
        n = len(observations)
        if self._held is None or len(self._held) != n:
            self._held = HeldVecEnv(
                self.representation, observations, self.model.action_space, frame_stack=self.frame_stack
            )
            self._hidden = None
            return self._held.venv.reset(), np.ones(n, dtype=bool)
        finals = [o if start else None for o, start in zip(observations, starts, strict=True)]
        self._held.hold_step(StateArray(observations, np.zeros(n), starts, np.zeros(n, bool), finals))
        obs, _, _, _ = self._held.venv.step(np.zeros(n))
        return obs, starts
