"""DDPG and TD3 that explore by default: Gaussian action noise of sigma = 0.1, as rl-baselines3-zoo tunes them.

SB3's DDPG and TD3 default to no action noise, so their deterministic policies barely explore. Here
``action_noise`` also takes a number: the sigma of independent Gaussian noise on every action dimension, added (as SB3
adds any action noise) to the action scaled to [-1, 1]; an SB3 ``ActionNoise`` object works as before, and
``null`` switches noise off. Everything else is SB3's own class: saved models load with plain SB3.
"""

import inspect
from typing import Any

import numpy as np
import stable_baselines3
from gymnasium import spaces
from stable_baselines3.common.noise import ActionNoise, NormalActionNoise

from rlzoo.algos.sb3_base import require

DEFAULT_STD = 0.1
NOISE_HINT = ActionNoise | float | None


def _check_std(action_noise: ActionNoise | float | None) -> float | None:
    """The sigma when ``action_noise`` is a number (it must be > 0), else None."""
    if isinstance(action_noise, ActionNoise) or action_noise is None:
        return None
    require(action_noise > 0, f"algo.action_noise={action_noise} must be > 0 (a sigma), an ActionNoise, or null")
    return float(action_noise)


def gaussian_noise(action_space: spaces.Space, std: float) -> NormalActionNoise:
    """Independent zero-mean Gaussian noise of ``std`` on every dimension of a ``Box`` action space."""
    shape = action_space.shape or (1,)
    return NormalActionNoise(mean=np.zeros(shape), sigma=np.full(shape, std))


def _signature(base: type) -> inspect.Signature:
    """``base``'s constructor signature with ``action_noise: ActionNoise | float | None = 0.1`` (for rlzoo's checks)."""
    signature = inspect.signature(base)
    parameters = [
        p.replace(annotation=NOISE_HINT, default=DEFAULT_STD) if p.name == "action_noise" else p
        for p in signature.parameters.values()
    ]
    return signature.replace(parameters=parameters)


class TD3(stable_baselines3.TD3):
    """Twin Delayed DDPG (Fujimoto et al., 2018, "Addressing Function Approximation Error in Actor-Critic Methods"),
    SB3's, with Gaussian action noise sigma = 0.1 by default (``action_noise``: a sigma, an ``ActionNoise`` or None)."""

    def __init__(
        self, policy: Any, env: Any, action_noise: ActionNoise | float | None = DEFAULT_STD, **kwargs: Any
    ) -> None:
        std = _check_std(action_noise)
        noise = action_noise if isinstance(action_noise, ActionNoise) else None
        super().__init__(policy, env, action_noise=noise, **kwargs)
        if std is not None and getattr(self, "action_space", None) is not None:  # absent when loading
            self.action_noise = gaussian_noise(self.action_space, std)


class DDPG(stable_baselines3.DDPG):
    """Deep Deterministic Policy Gradient (Lillicrap et al., 2016, "Continuous control with deep reinforcement
    learning"), SB3's, with Gaussian action noise sigma = 0.1 by default (``action_noise``: a sigma, an
    ``ActionNoise`` or None)."""

    def __init__(
        self, policy: Any, env: Any, action_noise: ActionNoise | float | None = DEFAULT_STD, **kwargs: Any
    ) -> None:
        std = _check_std(action_noise)
        noise = action_noise if isinstance(action_noise, ActionNoise) else None
        super().__init__(policy, env, action_noise=noise, **kwargs)
        if std is not None and getattr(self, "action_space", None) is not None:  # absent when loading
            self.action_noise = gaussian_noise(self.action_space, std)


TD3.__signature__ = _signature(stable_baselines3.TD3)  # type: ignore[attr-defined]
DDPG.__signature__ = _signature(stable_baselines3.DDPG)  # type: ignore[attr-defined]
