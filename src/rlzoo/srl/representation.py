"""How observations become states: the ``srl_model`` group as objects (make kwargs, per-env and vec-env wrappers)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from stable_baselines3.common.vec_env import VecEnv

from rlzoo.config import instantiate
from rlzoo.errors import ConfigError
from rlzoo.srl.augment import augment_policy_kwargs
from rlzoo.srl.encoder import pin_encoder

POLICY_FAMILIES = ("Mlp", "Cnn")


@dataclass(frozen=True)
class Representation:
    """A representation: extra ``gymnasium.make`` kwargs, a per-env wrapper and a vec-env wrapper.

    :param name: the ``srl_model`` option (``ground_truth``, ``raw_pixels``, ``srl_splits`` ...).
    :param policy_family: ``Mlp`` (vector states) or ``Cnn`` (images).
    :param envs: the envs whose constructor takes ``make_kwargs`` (``an arm env (rlzoo/Kuka*-v0)``), for messages;
        empty when any env fits.
    :param policy_kwargs: policy keywords it adds to the algorithm's (``srl_model.augment``: a shifting CNN;
        ``hardware.precision``: a CNN in bfloat16).
    """

    name: str
    policy_family: str
    make_kwargs: dict[str, Any]
    observation_wrapper: Callable[[gym.Env], gym.Env] | None
    vec_wrapper: Callable[[VecEnv], VecEnv] | None
    envs: str = ""
    policy_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def renders(self) -> bool:
        """Whether it reads the env's ``rgb_array`` render (so states handed to agents carry ``env.render()``)."""
        return self.make_kwargs.get("render_mode") == "rgb_array"

    @classmethod
    def from_values(cls, srl_values: dict[str, Any]) -> Representation:
        """The representation of resolved ``srl_model`` values (a learned encoder's checkpoint already pinned)."""
        family = srl_values.get("policy")
        if family not in POLICY_FAMILIES:
            raise ConfigError(
                f"srl_model.policy={family!r} is not a policy family; allowed: {', '.join(POLICY_FAMILIES)}"
            )
        return cls(
            name=str(srl_values["name"]),
            policy_family=family,
            make_kwargs=dict(instantiate(srl_values.get("make_kwargs")) or {}),
            observation_wrapper=instantiate(srl_values.get("observation_wrapper")),
            vec_wrapper=instantiate(srl_values.get("vec_wrapper")),
            envs=str(srl_values.get("envs") or ""),
            policy_kwargs=augment_policy_kwargs(srl_values.get("augment"), family, srl_values.get("precision", "fp32")),
        )


def pin_representation(srl_values: dict[str, Any], env_id: str | None) -> dict[str, Any]:
    """The ``srl_model`` values with a learned encoder's ``checkpoint`` (``latest``, a path) resolved to one encoder
    folder checked against ``env_id`` (:func:`rlzoo.srl.encoder.pin_encoder`); other representations as given."""
    return pin_encoder(srl_values, env_id) if "checkpoint" in srl_values else dict(srl_values)
