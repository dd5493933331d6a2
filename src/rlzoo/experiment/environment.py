"""Environments of a run: the env group (which Gymnasium id) composed with the srl_model group (which states)."""

from __future__ import annotations

import copy
import difflib
import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize

from rlzoo.config import instantiate
from rlzoo.envs.batched import BatchedMobileRobot, PerEnvMonitor
from rlzoo.errors import ConfigError
from rlzoo.srl.encoder import pin_encoder
from rlzoo.srl.pixels import rendered_pixels

VEC_ENV_CLASSES: dict[str, type[DummyVecEnv] | type[SubprocVecEnv]] = {
    "dummy": DummyVecEnv,
    "subproc": SubprocVecEnv,
}


@dataclass(frozen=True)
class EnvSpec:
    """A Gymnasium id and the keyword arguments for ``gymnasium.make``."""

    id: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, env_cfg: DictConfig) -> EnvSpec:
        values = OmegaConf.to_container(env_cfg, resolve=True)
        assert isinstance(values, dict)
        env_id = values.pop("id", None)
        if env_id == "???":
            raise ConfigError("env=gym needs the Gymnasium id: add env.id=<id>, e.g. env.id=LunarLander-v3")
        if not isinstance(env_id, str) or not env_id:
            raise ConfigError(f"env.id must be a Gymnasium id such as CartPole-v1, got {env_id!r}")
        return cls(env_id, {str(k): v for k, v in values.items()})


@dataclass(frozen=True)
class Representation:
    """How observations become states: extra make kwargs, a per-env wrapper and a vec-env wrapper."""

    name: str
    policy_family: str
    make_kwargs: dict[str, Any]
    observation_wrapper: Callable[[gym.Env], gym.Env] | None
    vec_wrapper: Callable[[VecEnv], VecEnv] | None

    @classmethod
    def from_config(cls, srl_cfg: DictConfig, env_id: str | None = None) -> Representation:
        """The representation of ``srl_cfg``. A learned encoder's ``checkpoint`` (``latest``, a path) is resolved
        to one encoder folder checked against ``env_id`` and written back into ``srl_cfg``, so that the run's config
        records it (:func:`rlzoo.srl.encoder.pin_encoder`)."""
        family = srl_cfg.policy
        if family not in ("Mlp", "Cnn"):
            raise ConfigError(f"srl_model.policy={family!r} is not a policy family; allowed: Mlp, Cnn")
        if "checkpoint" in srl_cfg:
            pin_encoder(srl_cfg, env_id)
        return cls(
            name=str(srl_cfg.name),
            policy_family=family,
            make_kwargs=dict(instantiate(srl_cfg.make_kwargs) or {}),
            observation_wrapper=instantiate(srl_cfg.observation_wrapper),
            vec_wrapper=instantiate(srl_cfg.vec_wrapper),
        )


def check_env_id(env_id: str) -> None:
    """Fail with close matches when ``env_id`` is not registered (``module:Id`` imports ``module`` first)."""
    if ":" in env_id:
        module, _, env_id = env_id.partition(":")
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ConfigError(f"env.id: cannot import module {module!r} ({error})") from None
    if env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, list(gym.registry), n=5, cutoff=0.6)
    hint = f"; did you mean: {', '.join(close)}" if close else "; see gymnasium.pprint_registry() for the ids"
    raise ConfigError(f"env.id={env_id!r} is not a registered Gymnasium id{hint}")


def probe_spaces(spec: EnvSpec, representation: Representation) -> tuple[gym.Space, gym.Space]:
    """Build one env as training will (checks its kwargs and rendering) and return (observation, action) spaces."""
    check_env_id(spec.id)
    kwargs = {**spec.kwargs, **representation.make_kwargs}
    try:
        env = gym.make(spec.id, **kwargs)
    except TypeError as error:
        raise ConfigError(f"env {spec.id} rejected its arguments {kwargs}: {error}") from None
    try:
        render_mode = kwargs.get("render_mode")
        modes = env.metadata.get("render_modes", [])
        if render_mode is not None and render_mode not in modes:
            raise ConfigError(
                f"srl_model={representation.name} needs render_mode={render_mode!r}, which {spec.id} does not "
                f"offer (its render modes: {', '.join(modes) or 'none'})"
            )
        if representation.observation_wrapper is not None:
            env = representation.observation_wrapper(env)
        return env.observation_space, env.action_space
    finally:
        env.close()


def make_env(
    spec: EnvSpec,
    representation: Representation,
    *,
    n_envs: int,
    seed: int,
    vec_env: str = "dummy",
    monitor_dir: Path | None = None,
    monitor_append: bool = False,
) -> VecEnv:
    """The vectorised env: ``n_envs`` copies (seeds ``seed + rank``), Monitor, representation wrappers.

    :param vec_env: ``dummy`` or ``subproc`` (:data:`VEC_ENV_CLASSES`), or ``batched`` (:func:`make_batched_env`).
    :param monitor_append: continue existing monitor files (a resumed run) instead of starting them afresh.
    """
    if vec_env == "batched":
        venv = make_batched_env(spec, representation, n_envs, seed, monitor_dir, monitor_append)
    else:
        venv = make_vec_env(
            spec.id,
            n_envs=n_envs,
            seed=seed,
            env_kwargs={**spec.kwargs, **representation.make_kwargs},
            monitor_dir=str(monitor_dir) if monitor_dir is not None else None,
            monitor_kwargs={"override_existing": not monitor_append},
            wrapper_class=representation.observation_wrapper,
            vec_env_cls=VEC_ENV_CLASSES[vec_env],
        )
    if representation.vec_wrapper is not None:
        venv = representation.vec_wrapper(venv)
    return venv


def make_batched_env(
    spec: EnvSpec,
    representation: Representation,
    n_envs: int,
    seed: int,
    monitor_dir: Path | None = None,
    monitor_append: bool = False,
) -> VecEnv:
    """``vec_env=batched``: the MobileRobot family with all envs stepped as one array operation, one monitor file per
    env as with ``make_vec_env``; observations are the ground truth or the env's render at its own size (raw pixels).
    """
    wrapper = representation.observation_wrapper
    pixels = isinstance(wrapper, functools.partial) and wrapper.func is rendered_pixels
    if wrapper is not None and not pixels:
        raise ConfigError(
            f"vec_env=batched observes the ground truth or rendered pixels, not srl_model={representation.name}'s "
            "per-env wrapper: use vec_env=dummy"
        )
    try:
        venv = BatchedMobileRobot(spec.id, n_envs, seed, pixels, **spec.kwargs, **representation.make_kwargs)
    except ValueError as error:
        raise ConfigError(f"vec_env=batched: {error}") from None
    size = (wrapper.keywords.get("height"), wrapper.keywords.get("width")) if pixels else None  # type: ignore[union-attr]
    if size is not None and size != venv.observation_space.shape[:2]:  # type: ignore[index]
        raise ConfigError(f"vec_env=batched renders {spec.id} at env.render_size, not at {size}: use vec_env=dummy")
    return PerEnvMonitor(venv, monitor_dir, spec.id, override_existing=not monitor_append)


def normalize_observations(venv: VecEnv) -> VecNormalize:
    """Running mean/std normalisation of observations (rewards are left as they are)."""
    return VecNormalize(venv, norm_obs=True, norm_reward=False)


def frozen_copy(venv: VecEnv, normalizer: VecNormalize | None) -> VecEnv:
    """Wrap ``venv`` with a copy of ``normalizer``'s statistics that no longer updates (test episodes, replay)."""
    if normalizer is None:
        return venv
    frozen = VecNormalize(venv, training=False, norm_obs=True, norm_reward=False, clip_obs=normalizer.clip_obs)
    frozen.obs_rms = copy.deepcopy(normalizer.obs_rms)
    return frozen
