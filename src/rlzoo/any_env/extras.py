"""Env families that come with an optional extra: ids registered on demand, one line when the extra is missing.

Gymnasium registers its Box2D and MuJoCo ids itself but imports their simulators only when an env is made; the Atari
ids (``ALE/Pong-v5``, ``PongNoFrameskip-v4`` ...) exist only once ``ale_py`` is imported. A missing simulator ends in
one line naming the ``pip install`` that fixes it, never in a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from rlzoo.errors import ConfigError


@dataclass(frozen=True)
class Extra:
    """An optional extra of rlzoo (``pip install -e ".[<name>]"``) and the envs it brings."""

    name: str
    module: str  # what it installs, as imported
    envs: str  # in words, for messages

    @property
    def pip(self) -> str:
        return f'pip install -e ".[{self.name}]"'


ATARI = Extra("atari", "ale_py", "Atari 2600 games (ALE; the ROMs ship with ale-py)")
MUJOCO = Extra("mujoco", "mujoco", "MuJoCo tasks (HalfCheetah, Hopper, Walker2d, Ant, Humanoid ...)")
BOX2D = Extra("box2d", "Box2D", "Box2D tasks (LunarLander, BipedalWalker, CarRacing)")

# Entry-point modules of Gymnasium's envs that need an extra.
ENTRY_POINT_EXTRAS = {"gymnasium.envs.box2d": BOX2D, "gymnasium.envs.mujoco": MUJOCO, "ale_py": ATARI}
# Ids that name an Atari game before ale_py registered them: ALE/<Game>-v5, <Game>NoFrameskip-v4, <Game>-v0 ...
ATARI_ID = re.compile(r"^(ALE/\w+-v\d+|[A-Z]\w*(NoFrameskip|Deterministic)?-v[04])$")


def extra_of(entry_point: object) -> Extra | None:
    """The extra an env's entry point (``module:Class``) needs, or None."""
    module = entry_point.split(":", 1)[0] if isinstance(entry_point, str) else getattr(entry_point, "__module__", "")
    return next((extra for prefix, extra in ENTRY_POINT_EXTRAS.items() if module.startswith(prefix)), None)


def keep_mujoco_log_out_of_cwd() -> None:
    """MuJoCo's warnings go to the console only: by default MuJoCo also appends them to ``MUJOCO_LOG.TXT`` in the
    working directory (a model's deprecation notice is enough). Before MuJoCo 4, a warning handler prints them."""
    import mujoco

    config_class: Any = getattr(mujoco, "MjLogConfig", None)
    if config_class is not None:
        config = config_class.get()
        if config.logto_file:
            config.logto_file = False
            config.set()
    elif mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(lambda message: print(f"MuJoCo warning: {message}", file=sys.stderr))


def missing(extra: Extra, env_id: str) -> ConfigError:
    """The one-line error for ``env_id`` without its extra."""
    return ConfigError(
        f"env.id={env_id!r} is one of the {extra.envs}, which need the [{extra.name}] extra: {extra.pip}"
    )


def register_atari() -> bool:
    """Import ale_py so that the Atari ids are registered (Gymnasium 1.x no longer does it); False without it."""
    try:
        ale_py = importlib.import_module("ale_py")
    except ImportError:
        return False
    gym.register_envs(ale_py)
    return True


def ensure_registered(env_id: str) -> None:
    """Register the ids of the extra that ``env_id`` belongs to, when it is not registered yet and looks like one.

    :raise ConfigError: an Atari id without the [atari] extra.
    """
    if env_id in gym.registry or not ATARI_ID.match(env_id):
        return
    if not register_atari() and env_id.startswith("ALE/"):
        raise missing(ATARI, env_id)


def atari_hint(env_id: str) -> str:
    """A hint for an unknown id that may be an Atari game when the [atari] extra is missing."""
    if ATARI_ID.match(env_id) and not _installed("ale_py"):
        return f"; if it is an Atari game: {ATARI.pip}"
    return ""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module blocked or half-imported
        return False


def missing_dependency(env_id: str, error: BaseException) -> ConfigError:
    """The one-line error for an env whose simulator (or another package it imports) is not installed."""
    registered = gym.registry.get(env_id)
    extra = extra_of(registered.entry_point) if registered is not None else None
    if extra is not None:
        return missing(extra, env_id)
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return ConfigError(f"env {env_id} needs a package that is not installed: {first}")


def env_creator(env_id: str) -> Any:
    """The class or function registered for ``env_id`` (imported); a missing simulator fails with one line."""
    ensure_registered(env_id)
    entry_point = gym.spec(env_id).entry_point
    try:
        return load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    except (gym.error.DependencyNotInstalled, ImportError) as error:
        raise missing_dependency(env_id, error) from None
