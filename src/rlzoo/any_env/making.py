"""One env of a run made with its wrappers: ``gymnasium.make``, then Atari preprocessing or action repeat, then the
flattening of Tuple/Dict observations. The run builder makes every env through :func:`make`."""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any

import gymnasium as gym
from gymnasium import spaces
from gymnasium.wrappers import FlattenObservation

from rlzoo.any_env.extras import (
    MUJOCO,
    ensure_registered,
    env_creator,
    extra_of,
    keep_mujoco_log_out_of_cwd,
    missing_dependency,
)
from rlzoo.any_env.spec import EnvSpec
from rlzoo.any_env.wrappers import ActionRepeat, atari
from rlzoo.errors import ConfigError

if TYPE_CHECKING:
    from stable_baselines3.common.vec_env import VecEnv

ATARI_FRAME_SKIP = 4  # AtariWrapper's default, when env.frame_skip is not set


@functools.cache
def takes_frame_skip(env_id: str) -> bool:
    """Whether the env's constructor skips frames itself (MuJoCo's ``frame_skip``)."""
    try:
        return "frame_skip" in inspect.signature(env_creator(env_id)).parameters
    except (TypeError, ValueError):  # no signature
        return False


def step_cap(spec: EnvSpec, cap: int) -> int | None:
    """``cap`` for the test and replay episodes of an env without a step limit (none registered, none given as
    ``env.max_episode_steps``, no ALE frame limit); None for an env that has one."""
    ensure_registered(spec.id)
    registered = gym.registry.get(spec.id)
    limited = spec.kwargs.get("max_episode_steps") or (registered is not None and registered.max_episode_steps)
    own_limit = {**(registered.kwargs if registered is not None else {}), **spec.kwargs}.get(
        "max_num_frames_per_episode"
    )  # ALE ends a game itself (v5: after 108,000 frames)
    return None if limited or own_limit else cap


def make(spec: EnvSpec, extra_kwargs: dict[str, Any] | None = None, *, training: bool = False) -> gym.Env:
    """One env as ``spec`` says, with rlzoo's env keys applied.

    :param extra_kwargs: ``gymnasium.make`` keywords a representation adds (``render_mode``).
    :param training: a training env (Atari: life-loss episodes and clipped rewards); test and replay envs play whole
        episodes with their real rewards.
    """
    ensure_registered(spec.id)
    options = spec.options
    kwargs = {**spec.kwargs, **(extra_kwargs or {})}
    native_skip = options.frame_skip is not None and options.atari is None and takes_frame_skip(spec.id)
    if native_skip:
        kwargs["frame_skip"] = options.frame_skip
    if extra_of(gym.spec(spec.id).entry_point) is MUJOCO:
        keep_mujoco_log_out_of_cwd()
    try:
        env = gym.make(spec.id, **kwargs)
    except (gym.error.DependencyNotInstalled, ImportError) as error:
        raise missing_dependency(spec.id, error) from None
    except TypeError as error:
        raise ConfigError(f"env {spec.id} rejected its arguments {kwargs}: {error}") from None
    except ValueError as error:  # a constructor's check of its arguments' values (Gymnasium's convention)
        raise ConfigError(f"env {spec.id} rejected its arguments: {error}") from None
    if options.atari is not None:
        env = atari(env, options.atari, options.frame_skip or ATARI_FRAME_SKIP, training)
    elif options.frame_skip is not None and options.frame_skip > 1 and not native_skip:
        env = ActionRepeat(env, options.frame_skip)
    if options.observation == "flatten" or (
        options.observation == "auto" and isinstance(env.observation_space, spaces.Tuple | spaces.Dict)
    ):
        env = FlattenObservation(env)
    return env


def batched_vec_env(env_id: str, n_envs: int, seed: int, pixels: bool, **env_kwargs: Any) -> VecEnv:
    """``n_envs`` envs of ``env_id`` stepped as one array operation (``vec_env=batched``: the MobileRobot family's
    vec env, :mod:`rlzoo.envs.mobile_robot_batched`), observing the ground truth or, with ``pixels``, renders.

    :raise ValueError: an id it does not step, or pixels without ``render_mode="rgb_array"``."""
    from rlzoo.envs.mobile_robot_batched import BatchedMobileRobot  # SB3: only for vec_env=batched

    return BatchedMobileRobot(env_id, n_envs, seed, pixels, **env_kwargs)
