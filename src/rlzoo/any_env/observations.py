"""How a run observes its env, decided once in the run plan from the env's observation space.

=========  ==============================================================  =====================================
mode       observation spaces                                              normalisation (``normalize=true``)
=========  ==============================================================  =====================================
native     Box vectors; Discrete, MultiDiscrete, MultiBinary (SB3 one-hot)  Box only (one-hot inputs are not)
flatten    Tuple and Dict (nested too): one flat vector, one-hot parts     only when a part is a Box
image      uint8 frames, H x W x C (Atari, CarRacing): a CNN policy        never (SB3 scales pixels by 1/255)
=========  ==============================================================  =====================================

The mode and the normalisation actually used are recorded in ``config.yaml`` (``env.observation``, ``normalize``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import gymnasium as gym
from gymnasium import spaces
from stable_baselines3.common.preprocessing import is_image_space

from rlzoo.any_env.making import make
from rlzoo.any_env.options import ObservationMode
from rlzoo.any_env.spec import EnvSpec, Representation
from rlzoo.errors import ConfigError

SB3_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
# Entry points of envs whose observations are Box vectors.
VECTOR_ENTRY_POINTS = (
    "rlzoo.envs.",
    "gymnasium.envs.classic_control.",
    "gymnasium.envs.mujoco.",
    "gymnasium.envs.box2d.lunar_lander:",
    "gymnasium.envs.box2d.bipedal_walker:",
)


@dataclass(frozen=True)
class Observing:
    """The decided observation handling: the mode, whether to normalise, and the policy family (Mlp or Cnn)."""

    mode: ObservationMode
    normalize: bool
    policy_family: str


def own_states(representation: Representation) -> bool:
    """Whether the representation makes its own states (pixels, an encoder), so the env's observation is not used."""
    return representation.observation_wrapper is not None or representation.policy_family != "Mlp"


def probe_space(spec: EnvSpec) -> spaces.Space:
    """The observation space of one env made as ``spec`` says (before any flattening), then closed."""
    env = make(dataclasses.replace(spec, options=dataclasses.replace(spec.options, observation="native")))
    try:
        return env.observation_space
    finally:
        env.close()


def _has_box(space: spaces.Space) -> bool:
    if isinstance(space, spaces.Tuple):
        return any(_has_box(s) for s in space.spaces)
    if isinstance(space, spaces.Dict):
        return any(_has_box(s) for s in space.spaces.values())
    return isinstance(space, spaces.Box)


def _is_image(space: spaces.Space) -> bool:
    return isinstance(space, spaces.Box) and is_image_space(space, check_channels=False)


def _auto_mode(space: spaces.Space) -> ObservationMode:
    if _is_image(space):
        return "image"
    if isinstance(space, SB3_SPACES):
        return "native"
    if isinstance(space, spaces.Tuple | spaces.Dict):
        return "flatten"
    raise ConfigError(
        f"the observation space {space} is not one a policy can take; rlzoo trains on Box, Discrete, MultiDiscrete, "
        "MultiBinary, Tuple and Dict observations"
    )


def _check_mode(mode: str, space: spaces.Space) -> None:
    if mode == "image" and not _is_image(space):
        raise ConfigError(f"env.observation=image needs uint8 frames (height x width x channels), not {space}")
    if mode == "native" and not isinstance(space, SB3_SPACES):
        raise ConfigError(
            f"env.observation=native: SB3's policies cannot take {type(space).__name__} observations ({space}); use "
            "env.observation=flatten (or auto)"
        )


def plan_observation(spec: EnvSpec, representation: Representation, normalize: bool) -> Observing:
    """Decide how the run observes ``spec``'s env (makes one env to read its observation space, unless the
    representation makes its own states or the env is known to observe Box vectors).

    :raise ConfigError: a space no policy takes, a forced mode that does not fit, frame stacking of non-Box states.
    """
    mode = spec.options.observation
    known = mode in ("auto", "native") and spec.options.atari is None and _observes_vectors(spec.id)
    if own_states(representation) or known:
        return Observing("native" if mode == "auto" else mode, normalize, representation.policy_family)
    space = probe_space(spec)
    mode = _auto_mode(space) if mode == "auto" else mode
    _check_mode(mode, space)
    if spec.options.frame_stack > 1 and mode == "native" and not isinstance(space, spaces.Box):
        raise ConfigError(f"env.frame_stack={spec.options.frame_stack} stacks Box observations, not {space}")
    if mode == "image":
        return Observing(mode, False, "Cnn")
    if mode == "flatten":
        return Observing(mode, normalize and _has_box(space), representation.policy_family)
    return Observing(mode, normalize and isinstance(space, spaces.Box), representation.policy_family)


def observe(spec: EnvSpec, representation: Representation, normalize: bool) -> tuple[EnvSpec, Observing]:
    """``spec`` with its observation mode decided (``env.observation``), and the decision (:func:`plan_observation`)."""
    observing = plan_observation(spec, representation, normalize)
    options = dataclasses.replace(spec.options, observation=observing.mode)
    return dataclasses.replace(spec, options=options), observing


def _observes_vectors(env_id: str) -> bool:
    """Envs known to observe Box vectors, which need no probe: rlzoo's own, Gymnasium's classic control and MuJoCo
    tasks, LunarLander and BipedalWalker (a run then makes exactly the envs it uses)."""
    registered = gym.registry.get(env_id)
    entry_point = registered.entry_point if registered is not None else None
    return isinstance(entry_point, str) and entry_point.startswith(VECTOR_ENTRY_POINTS)
