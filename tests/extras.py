"""Tests of an optional extra: skipped (with the pip command that fixes it) where it is missing, failed under CI.

One mechanism for all of them: :func:`require_extra` for a test or a test file that needs an extra, and
:func:`require_extras_of` (called for every test by ``conftest.py``) for parametrised tests whose parameters name a
config option that needs one (``algo=sbx_sac``, a parameter ``algo`` set to ``sbx_ppo``, ``env=HalfCheetah`` ...).
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import gymnasium as gym
import pytest
from omegaconf import OmegaConf

from rlzoo.any_env.extras import ATARI, ATARI_ID, extra_of
from rlzoo.config import CONFIG_DIR
from rlzoo.loggers.live_plot import INSTALL as LIVE_INSTALL

# Top-level packages of an ``algo._target_`` or an env's entry point that come with an extra: (module, extra).
PACKAGE_EXTRAS = {"sbx": ("sbx", "jax"), "rlzoo.envs.kuka": ("pybullet", "arm")}
GROUPS = ("algo", "env")
# Extras whose README install is more than ``pip install -e ".[<extra>]"``.
INSTALL = {"live": LIVE_INSTALL}


def require_extra(module: str, extra: str) -> ModuleType:
    """Import ``module`` from the optional extra ``extra``, or skip the calling test (module) saying how to install it
    (the README's command: :data:`INSTALL` where a plain ``pip install -e ".[<extra>]"`` is not enough).

    Under ``CI=true`` a missing extra fails instead: CI installs every extra, so a skip there would hide a broken
    install. Call it at module level to cover a whole test file.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        message = f"{module} is not installed ({error}): {install_command(extra)}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but the [{extra}] extra is missing: {message}", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def install_command(extra: str) -> str:
    """The README's command that installs ``extra``."""
    return INSTALL.get(extra, f'pip install -e ".[{extra}]"')


def require_extras_of(item: pytest.Item) -> None:
    """Skip (or, under CI, fail) a parametrised test whose parameters name a config option of a missing extra."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return
    for group, option in _options(callspec.params):
        needed = option_extra(group, option)
        if needed is not None:
            require_extra(*needed)


def _options(params: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(group, option) pairs named by test parameters: ``algo=<x>`` / ``env=<x>`` strings anywhere in a value (or a
    list of them), and a parameter called ``algo`` or ``env`` whose value is an option's name."""
    for name, value in params.items():
        if name in GROUPS and isinstance(value, str):
            yield name, value
        for token in value if isinstance(value, list | tuple) else [value]:
            if isinstance(token, str) and "=" in token:
                key, option = token.split("=", 1)
                if key in GROUPS:
                    yield key, option


@functools.cache
def option_extra(group: str, option: str) -> tuple[str, str] | None:
    """The (module, extra) that the config option ``<group>/<option>.yaml`` needs, or None."""
    path = CONFIG_DIR / group / f"{option}.yaml"
    if not path.is_file():
        return None
    values = OmegaConf.load(path)
    if group == "algo":
        return _package_extra(str(values.get("_target_", "")))
    env_id = str(values.get("id", ""))
    if ATARI_ID.match(env_id) and env_id not in gym.registry:
        return ATARI.module, ATARI.name
    spec = gym.registry.get(env_id)
    if spec is None:
        return None
    extra = extra_of(spec.entry_point)
    if extra is not None:
        return extra.module, extra.name
    return _package_extra(spec.entry_point if isinstance(spec.entry_point, str) else "")


def _package_extra(dotted: str) -> tuple[str, str] | None:
    return next((needed for package, needed in PACKAGE_EXTRAS.items() if dotted.startswith(package)), None)
