"""Turn an ``algo`` config into an algorithm factory whose every keyword was checked before any work starts.

SB3 constructors accept ``gamma="0.9"`` or unknown keywords in ways that only fail inside ``learn()`` (or never):
here each keyword must be a constructor parameter and its value must match the parameter's type hint.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gymnasium import spaces
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.base_class import BaseAlgorithm
from typeguard import TypeCheckError, check_type

from rlzoo.algos import jax_backend
from rlzoo.algos.constraints import check_constraints, describe_hint
from rlzoo.config import CONFIG_DIR, instantiate
from rlzoo.errors import ConfigError
from rlzoo.kwargs_check import coerce_yaml

# Keywords rlzoo sets from run keys; an algo config must not set them.
RUN_LEVEL_KEYWORDS = {
    "env": "the env group",
    "seed": "the run key seed",
    "device": "hardware.device",
    "verbose": "the run key verbose",
    "tensorboard_log": "the logger group",
    "_init_setup_model": "rlzoo",
}


@dataclass(frozen=True)
class AlgorithmFactory:
    """An algorithm class with checked keyword arguments; call it with the env to build the model."""

    algo_class: type[BaseAlgorithm]
    kwargs: dict[str, Any]
    policy: str | type | None = None

    @property
    def name(self) -> str:
        return self.algo_class.__name__

    def policy_for(self, family: str) -> str | type:
        """The policy to use for a representation needing ``family`` (``Mlp`` or ``Cnn``)."""
        if self.policy is not None:
            return self.policy
        names = [n for n in self.algo_class.policy_aliases if n.startswith(family)]
        if not names:
            fitting = sorted(
                k for k, c in algorithm_classes().items() if any(n.startswith(family) for n in c.policy_aliases)
            )
            raise ConfigError(
                f"{self.name} has no {family} policy for this srl_model (it offers "
                f"{', '.join(self.algo_class.policy_aliases)}); algorithms with one: {', '.join(fitting)}"
            )
        return names[0]

    def check_device(self, device: str) -> None:
        """Fail before any work when the algorithm's backend cannot use ``hardware.device`` (JAX without a GPU)."""
        if jax_backend.is_jax_class(self.algo_class):
            jax_backend.jax_device(device)

    def use_device(self, device: str) -> None:
        """Place the networks of models built or loaded from now on on ``device``: SBX ignores its ``device`` keyword
        (JAX places arrays), so JAX's default device is set; SB3 models take the keyword and need nothing here."""
        if jax_backend.is_jax_class(self.algo_class):
            jax_backend.use_device(device)

    def __call__(self, *, env: Any, policy: str | type, **run_kwargs: Any) -> BaseAlgorithm:
        """Build the model on ``env`` with ``policy`` (see :meth:`policy_for`) and run-level keywords."""
        self.use_device(str(run_kwargs.get("device", "auto")))
        return self.algo_class(policy=policy, env=env, **run_kwargs, **self.kwargs)


# The action spaces of the algorithms other libraries pass from their constructors (SB3 2.x has no class attribute
# for them), by (package, class name); tests/test_algos_defaults.py checks every entry against the constructors.
_BOX, _DISCRETE = (spaces.Box,), (spaces.Discrete,)
_ANY_KIND = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
LIBRARY_ACTION_SPACES: dict[tuple[str, str], tuple[type[spaces.Space], ...]] = {
    **{("stable_baselines3", name): _ANY_KIND for name in ("A2C", "PPO")},
    **{("stable_baselines3", name): _BOX for name in ("SAC", "TD3", "DDPG")},
    ("stable_baselines3", "DQN"): _DISCRETE,
    **{("sb3_contrib", name): _ANY_KIND for name in ("TRPO", "RecurrentPPO")},
    **{("sb3_contrib", name): _BOX for name in ("TQC", "CrossQ")},
    ("sb3_contrib", "QRDQN"): _DISCRETE,
    ("sb3_contrib", "ARS"): (spaces.Box, spaces.Discrete),
    ("sb3_contrib", "MaskablePPO"): (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary),
    ("sbx", "PPO"): _ANY_KIND,
    **{("sbx", name): _BOX for name in ("SAC", "TD3", "DDPG", "TQC", "CrossQ")},
    ("sbx", "DQN"): _DISCRETE,
}


def supported_action_spaces(algo_class: type[BaseAlgorithm]) -> tuple[type[spaces.Space], ...] | None:
    """The action spaces an algorithm accepts, or None for any: the class's own ``supported_action_spaces``
    (rlzoo's algorithms state it beside their code), else the table of other libraries' algorithms, for the class or
    the nearest base class either names."""
    for cls in algo_class.__mro__:
        if "supported_action_spaces" in vars(cls):
            found = vars(cls)["supported_action_spaces"]
            return None if found is None else tuple(found)
        key = (cls.__module__.split(".")[0], cls.__name__)
        if key in LIBRARY_ACTION_SPACES:
            return LIBRARY_ACTION_SPACES[key]
    return None


def check_action_space(algo_class: type[BaseAlgorithm], action_space: spaces.Space) -> None:
    """Fail with one message naming the algorithm, the action space and the algorithms that fit."""
    supported = supported_action_spaces(algo_class)
    if supported is None or isinstance(action_space, supported):
        return
    fitting = sorted(
        name
        for name, cls in algorithm_classes().items()
        if (found := supported_action_spaces(cls)) is None or isinstance(action_space, found)
    )
    raise ConfigError(
        f"{algo_class.__name__} cannot handle the action space {action_space} "
        f"(it supports {', '.join(s.__name__ for s in supported)}); algorithms that fit: {', '.join(fitting)}"
    )


def fit_action_type(env_kwargs: dict[str, Any], algo_class: type[BaseAlgorithm]) -> dict[str, Any]:
    """Resolve an env's ``continuous: null`` to what the algorithm takes: discrete when it can, else continuous.

    Envs offering both (the MobileRobot family) thus train as written with SAC and with DQN, and algorithms that
    take both (PPO, A2C, TRPO, ARS, RecurrentPPO) get discrete actions, as in the S-RL Toolbox papers.
    """
    if "continuous" not in env_kwargs or env_kwargs["continuous"] is not None:
        return env_kwargs
    supported = supported_action_spaces(algo_class)
    return {**env_kwargs, "continuous": supported is not None and spaces.Discrete not in supported}


def _check_kwargs(algo_class: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    signature = inspect.signature(algo_class)
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    allowed = [n for n in signature.parameters if n not in ("self", "policy", *RUN_LEVEL_KEYWORDS)]
    checked = {}
    for key, value in kwargs.items():
        if key in RUN_LEVEL_KEYWORDS:
            raise ConfigError(f"algo.{key} is set by {RUN_LEVEL_KEYWORDS[key]}, not by the algo config")
        if key not in signature.parameters and not accepts_any:
            raise ConfigError(
                f"algo.{key} is not a keyword of {algo_class.__name__}; allowed: {', '.join(sorted(allowed))}"
            )
        hint = _type_hint(signature.parameters.get(key))
        if hint is not None:
            value = coerce_yaml(value, hint)
            try:
                check_type(value, hint)
            except TypeCheckError as error:
                detail = str(error)  # typeguard's reason, when it fits on the one line
                raise ConfigError(
                    f"algo.{key}={value!r} has the wrong type for {algo_class.__name__}: expected "
                    f"{describe_hint(hint)}" + (f" ({detail})" if "\n" not in detail else "")
                ) from None
        checked[key] = value
    return checked


def _type_hint(parameter: inspect.Parameter | None) -> Any:
    """A parameter's annotation as a type, or None when it has none or it cannot be resolved here.

    (``typing.get_type_hints`` fails on SB3 constructors as a whole: some hints name ``TYPE_CHECKING``-only types.)
    """
    if parameter is None or parameter.annotation is inspect.Parameter.empty:
        return None
    hint = parameter.annotation
    # A string annotation (postponed evaluation) is not checked rather than evaluated.
    return None if isinstance(hint, str) else hint


def build_algorithm_factory(algo_cfg: DictConfig) -> AlgorithmFactory:
    """Instantiate the ``algo`` group (a ``_partial_`` of the algorithm class) and check every keyword."""
    if "_target_" not in algo_cfg:
        raise ConfigError("the algo config has no _target_ (the algorithm class, e.g. stable_baselines3.PPO)")
    cfg = OmegaConf.to_container(algo_cfg, resolve=True)
    assert isinstance(cfg, dict)
    jax_backend.require_jax(str(cfg["_target_"]))  # the [jax] extra: one line naming it when missing
    cfg["_partial_"] = True
    try:
        partial = instantiate(cfg)
    except Exception as error:  # an import error or a nested _target_ that fails
        raise ConfigError(f"the algo config could not be built: {error}") from None
    assert isinstance(partial, functools.partial)
    algo_class = partial.func
    if not (inspect.isclass(algo_class) and issubclass(algo_class, BaseAlgorithm)):
        raise ConfigError(f"algo._target_={algo_cfg._target_} is not a Stable-Baselines3 algorithm class")
    kwargs = dict(partial.keywords)
    policy = kwargs.pop("policy", None)
    if policy is not None and isinstance(policy, str) and policy not in algo_class.policy_aliases:
        raise ConfigError(
            f"algo.policy={policy!r} is not a policy of {algo_class.__name__}; "
            f"allowed: {', '.join(algo_class.policy_aliases)}"
        )
    checked = _check_kwargs(algo_class, kwargs)
    check_constraints(checked)  # counts ≥ 1, discounts in [0, 1] ...: what SB3 only trips over inside learn()
    check_ranges = getattr(algo_class, "check_keywords", None)  # rlzoo's own algorithms: ranges and combinations
    if callable(check_ranges):
        check_ranges(**checked)
    return AlgorithmFactory(algo_class, checked, policy)


def algorithm_classes(config_dirs: Iterable[Path] = (CONFIG_DIR,)) -> dict[str, type[BaseAlgorithm]]:
    """The algorithm class of every option of the ``algo`` group found in ``config_dirs`` (for error messages)."""
    found: dict[str, type[BaseAlgorithm]] = {}
    for folder in config_dirs:
        for path in sorted((folder / "algo").glob("*.yaml")):
            option = OmegaConf.load(path)
            target = option.get("_target_") if isinstance(option, DictConfig) else None
            if not target:
                continue
            algo_class = _class_if_importable(str(target))
            if algo_class is not None:
                found[path.stem] = algo_class
    return found


def _class_if_importable(target: str) -> type[BaseAlgorithm] | None:
    """The class at ``target`` (``module.Class``), or None when its module is not installed here (an extra's
    algorithm: SBX without ``[jax]``); quietly, unlike ``hydra.utils.get_class``, which logs every failure."""
    module_name, _, name = target.rpartition(".")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError):
        return None
    return found if isinstance(found, type) else None
