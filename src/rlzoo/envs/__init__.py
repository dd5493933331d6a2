"""Gymnasium environments of rlzoo, registered under the ``rlzoo/`` namespace on import.

The ids carry no ``max_episode_steps``: each env truncates its own episodes after ``max_steps`` (250 by default, a
constructor argument), so the limit has a single source and ``gymnasium.make(..., max_steps=N)`` changes it.
This package imports only numpy, gymnasium and the standard library; the arm envs (``rlzoo/Kuka*-v0``) import
pybullet, an optional extra (``pip install -e ".[arm]"``), only when one is made.
"""

from __future__ import annotations

import gymnasium

from rlzoo.envs.mobile_robot import MobileRobotEnv
from rlzoo.envs.mobile_robot_variants import MobileRobot1DEnv, MobileRobot2TargetEnv, MobileRobotLineTargetEnv

__all__ = [
    "ENV_IDS",
    "MobileRobot1DEnv",
    "MobileRobot2TargetEnv",
    "MobileRobotEnv",
    "MobileRobotLineTargetEnv",
    "register_envs",
]

ENV_IDS: dict[str, str] = {
    "rlzoo/MobileRobot-v0": "rlzoo.envs.mobile_robot:MobileRobotEnv",
    "rlzoo/MobileRobot1D-v0": "rlzoo.envs.mobile_robot_variants:MobileRobot1DEnv",
    "rlzoo/MobileRobotLineTarget-v0": "rlzoo.envs.mobile_robot_variants:MobileRobotLineTargetEnv",
    "rlzoo/MobileRobot2Target-v0": "rlzoo.envs.mobile_robot_variants:MobileRobot2TargetEnv",
    "rlzoo/KukaButton-v0": "rlzoo.envs.kuka_button:KukaButtonEnv",
    "rlzoo/KukaRandButton-v0": "rlzoo.envs.kuka_variants:KukaRandButtonEnv",
    "rlzoo/Kuka2Button-v0": "rlzoo.envs.kuka_variants:Kuka2ButtonEnv",
    "rlzoo/KukaMovingButton-v0": "rlzoo.envs.kuka_variants:KukaMovingButtonEnv",
}


def register_envs() -> None:
    """Register every id of :data:`ENV_IDS` that is not registered yet (safe to call more than once)."""
    for env_id, entry_point in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry_point)


register_envs()
