"""From a composed config to a model that learns from states handed in (the preset's side of ``train(cfg)``)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from omegaconf import DictConfig
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.utils import set_random_seed
from stable_baselines3.common.vec_env import VecNormalize

from rlzoo.agents.held import HeldVecEnv
from rlzoo.experiment import environment as envs
from rlzoo.experiment.plan import RunPlan, plan_run


def renders(representation: envs.Representation) -> bool:
    """Whether the representation reads the env's ``rgb_array`` render: its states carry ``env.render()``."""
    return representation.make_kwargs.get("render_mode") == "rgb_array"


def env_observation_space(plan: RunPlan) -> gym.Space:
    """The env's own observation space: what states carry before the representation's wrappers."""
    bare = dataclasses.replace(plan.representation, observation_wrapper=None, vec_wrapper=None)
    return envs.probe_spaces(plan.spec, bare)[0]


def first_input(plan: RunPlan, observation_space: gym.Space) -> np.ndarray:
    """An input of the kind states carry (a render or an observation), for wrappers that read one when built."""
    if not renders(plan.representation):
        return np.zeros(observation_space.shape or (), dtype=observation_space.dtype)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    env = gym.make(plan.spec.id, **{**plan.spec.kwargs, **plan.representation.make_kwargs})
    try:
        env.reset(seed=plan.settings.seed)
        return np.asarray(env.render())
    finally:
        env.close()


@dataclass
class Learner:
    """A model built as ``train(cfg)`` builds it, on held envs that the training agent feeds with states.

    :param model: the algorithm; its env is ``held``'s vec env (+ ``normalizer``).
    :param held: the representation's wrappers around held envs, one per ``n_envs``.
    :param normalizer: the running observation normalisation (None when ``normalize`` is off).
    """

    plan: RunPlan
    model: BaseAlgorithm
    held: HeldVecEnv
    normalizer: VecNormalize | None

    @classmethod
    def build(cls, cfg: DictConfig) -> Learner:
        """Check ``cfg`` and build its model (seeded, on the configured device and threads)."""
        plan = plan_run(cfg)
        plan.hardware.apply()
        set_random_seed(plan.settings.seed)
        observation_space = env_observation_space(plan)
        first = np.stack([first_input(plan, observation_space)] * plan.settings.n_envs)
        held = HeldVecEnv(plan.representation, first, plan.action_space, observation_space, monitor=True)
        normalizer = envs.normalize_observations(held.venv) if plan.settings.normalize else None
        model = plan.factory(
            env=normalizer or held.venv, policy=plan.policy, seed=plan.settings.seed,
            device=plan.hardware.device, verbose=plan.settings.verbose,
        )  # fmt: skip
        return cls(plan, model, held, normalizer)

    def normalize(self) -> Any:
        """The current statistics as a function that does not update them (None when not normalising)."""
        return None if self.normalizer is None else self.normalizer.normalize_obs
