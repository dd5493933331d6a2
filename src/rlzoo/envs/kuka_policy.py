"""A scripted policy for the arm tasks: move the gripper over the goal button, then press it.

It reads only ``info["robot_position"]`` and ``info["target_position"]`` (gripper and goal point, (x, y, z)), so it
drives any arm env with Cartesian actions (discrete or continuous). It fits the collection-policy protocol of
:mod:`rlzoo.srl.collection` (``policy(info, action_space, rng) -> action``), as the arm version of its
``TowardTarget``, and serves the tests as a reference controller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlzoo.errors import ConfigError

# Discrete actions of the arm envs.
MINUS_X, PLUS_X, MINUS_Y, PLUS_Y, DOWN, UP = range(6)


@dataclass(frozen=True)
class TowardButton:
    """Over the goal (within ``press_radius`` in x, y) go down; elsewhere move in x, y (continuous actions also go
    down to ``hover`` metres above the goal point). A uniform random action with ``random_fraction``.

    :param random_fraction: probability of a uniform random action instead.
    :param press_radius: horizontal gripper-goal distance under which the gripper goes down (metres).
    :param hover: height above the goal point of the moves in x, y (metres).
    :param gain: metres of error giving a full continuous action.
    :param lift: also go up to the hover height before moving in x, y (envs with ``force_down=False``, such as
        Kuka2Button, where the up action goes up).
    """

    random_fraction: float = 0.0
    press_radius: float = 0.05
    hover: float = 0.1
    gain: float = 0.01
    lift: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.random_fraction <= 1.0:
            raise ConfigError(f"collect_policy.random_fraction={self.random_fraction!r} must lie in [0, 1]")

    def __call__(self, info: dict[str, Any], action_space: gym.Space, rng: np.random.Generator) -> Any:
        if rng.random() < self.random_fraction:
            return action_space.sample()
        error = np.asarray(info["target_position"], dtype=np.float64) - np.asarray(info["robot_position"])
        if error.shape != (3,):
            raise ConfigError(
                f"collect_policy=toward_button moves an arm's gripper in (x, y, z), but the env reports "
                f"{error.size}-D positions; with a MobileRobot env use collect_policy=toward_target"
            )
        over = float(np.hypot(error[0], error[1])) < self.press_radius
        if isinstance(action_space, spaces.Discrete):
            return self._discrete(error, over)
        if action_space.shape != (3,):
            raise ConfigError(
                f"collect_policy=toward_button drives Cartesian actions (discrete or Box of shape (3,)), not "
                f"{action_space}: with env.action_joints=true collect with collect_policy=random or an agent"
            )
        dz = -1.0 if over else float(np.clip((error[2] + self.hover) / self.gain, -1.0, 1.0 if self.lift else 0.0))
        xy = np.clip(error[:2] / self.gain, -1.0, 1.0)
        return np.array([xy[0], xy[1], dz], dtype=action_space.dtype)

    def _discrete(self, error: np.ndarray, over: bool) -> int:
        if over:
            return DOWN
        if self.lift and error[2] + self.hover > 0.03:  # below the hover height
            return UP
        if abs(error[0]) >= abs(error[1]):
            return PLUS_X if error[0] > 0 else MINUS_X
        return PLUS_Y if error[1] > 0 else MINUS_Y
