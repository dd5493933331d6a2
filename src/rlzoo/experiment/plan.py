"""The checks ``train(cfg)`` (and a preset) runs before anything is written: a config becomes a typed run plan."""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
from omegaconf import DictConfig, OmegaConf

from rlzoo.algos.factory import AlgorithmFactory, build_algorithm_factory, check_action_space, fit_action_type
from rlzoo.experiment import environment as envs
from rlzoo.experiment.settings import Hardware, RunSettings


@dataclass(frozen=True)
class RunPlan:
    """What ``train(cfg)`` checks before it writes anything, typed: every bad input has failed once this exists.

    :param action_space: the env's action space.
    """

    settings: RunSettings
    hardware: Hardware
    factory: AlgorithmFactory
    spec: envs.EnvSpec
    representation: envs.Representation
    policy: str | type
    action_space: gym.Space


def plan_run(cfg: DictConfig) -> RunPlan:
    """Check ``cfg`` as ``train(cfg)`` does; record the action type the env resolved to in ``cfg.env.continuous``."""
    OmegaConf.resolve(cfg)
    settings = RunSettings.from_config(cfg)
    hardware = Hardware.from_config(cfg.hardware)
    factory = build_algorithm_factory(cfg.algo)
    spec = envs.EnvSpec.from_config(cfg.env)
    spec = envs.EnvSpec(spec.id, fit_action_type(spec.kwargs, factory.algo_class))
    if "continuous" in spec.kwargs:
        cfg.env.continuous = spec.kwargs["continuous"]
    representation = envs.Representation.from_config(cfg.srl_model, spec.id)  # pins a learned encoder
    policy = factory.policy_for(representation.policy_family)
    _, action_space = envs.probe_spaces(spec, representation)  # builds the representation's per-env wrapper too
    check_action_space(factory.algo_class, action_space)
    if settings.vec_env == "batched":  # its own checks (env family, representation, image size), before any write
        envs.make_batched_env(spec, representation, n_envs=1, seed=settings.seed).close()
    return RunPlan(settings, hardware, factory, spec, representation, policy, action_space)
