"""From a composed config to a model that learns from states handed in (the preset's side of ``train(cfg)``)."""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from omegaconf import DictConfig
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.utils import set_random_seed
from stable_baselines3.common.vec_env import VecNormalize

from rlzoo.agents.observation_transform import HeldVecEnv
from rlzoo.algos.factory import check_action_space
from rlzoo.srl.representation import Representation
from rlzoo.training.build import RunBuilder
from rlzoo.training.plan import RunPlan, plan_run


def first_input(env: gym.Env, representation: Representation, seed: int) -> np.ndarray:
    """An input of the kind states carry (a render or an observation), for wrappers that read one when built."""
    if not representation.renders:
        space = env.observation_space
        return np.zeros(space.shape or (), dtype=space.dtype)
    env.reset(seed=seed)
    return np.asarray(env.render())


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
        """Check ``cfg`` and build its model (seeded, on the configured device and threads); ``cfg`` is not changed.

        One env is made, for its spaces (and a first render for representations that read renders).
        """
        plan = plan_run(cfg, run_dir_state=False)
        build = RunBuilder(plan)
        plan.hardware.apply()
        set_random_seed(plan.seed)
        env = build.bare_env()
        try:
            check_action_space(plan.factory.algo_class, env.action_space)
            first = np.stack([first_input(env, plan.representation, plan.seed)] * plan.settings.n_envs)
            held = HeldVecEnv(
                plan.representation, first, env.action_space, env.observation_space, monitor=True,
                frame_stack=plan.spec.options.frame_stack,
            )  # fmt: skip
        finally:
            env.close()
        normalizer = build.normalizer(held.venv)
        return cls(plan, build.model(normalizer or held.venv, normalizer), held, normalizer)
