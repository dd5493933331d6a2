"""The state of an arm env (:mod:`rlzoo.envs.kuka_button`) as plain arrays, for a checkpoint that a freshly built env
of the same config continues exactly.

What a step depends on: every body's base pose and velocity and every joint's position and velocity (read and set
through PyBullet's API: the arm's motor targets are set again before each physics step, the gripper's at every reset),
the end-effector target, the buttons, the episode's counters and a moving button's speed. Set into an env that has the
same bodies (one reset after it is built), the next steps are those of the saved env, bit for bit, as long as nothing
was in contact when it was saved (``benchmarks/arm_restore.py``, docs/resume.md): the solver starts a contact from the
impulses of the step before, which neither PyBullet's API nor its ``saveBullet`` file restores (a restored ``.bullet``
file moreover depends on the client's history, and PyBullet's parser of it crashes the process on some cut or altered
files). :func:`in_contact` tells when a checkpoint cannot hold an exact state. KukaRandButton loads its distractors at
each reset, so a fresh env has other bodies: it is not :func:`restorable`.

A restore checks every array against the fresh env's (bodies, joints, shapes, finite numbers, counters in range) and
refuses a mismatch in one line (:class:`~rlzoo.errors.Refused`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from rlzoo.envs.kuka_button import KukaButtonEnv
from rlzoo.envs.kuka_pybullet import p
from rlzoo.envs.kuka_rules import PressTally
from rlzoo.envs.kuka_variants import KukaRandButtonEnv
from rlzoo.errors import Refused

# Base position (3), orientation (4), linear and angular velocity (3 + 3) of a body.
BASE_VALUES = 13
FLOATS = ("bases", "joint_states", "buttons", "target", "speed")
KEYS = ("bodies", "joints", *FLOATS, "counters")


def restorable(env: gym.Env) -> bool:
    """An arm env whose bodies are the same in every episode (every arm env but KukaRandButton)."""
    return isinstance(env, KukaButtonEnv) and not isinstance(env, KukaRandButtonEnv)


def in_contact(env: KukaButtonEnv) -> bool:
    """Whether any two bodies are in contact (a saved state would not continue exactly)."""
    return len(p.getContactPoints(physicsClientId=env.scene.client)) > 0


def capture(env: KukaButtonEnv) -> dict[str, np.ndarray]:
    """``env``'s state as arrays (keys :data:`KEYS`)."""
    client = env.scene.client
    bodies = [p.getBodyUniqueId(i, physicsClientId=client) for i in range(p.getNumBodies(physicsClientId=client))]
    bases, joints, states = [], [], []
    for uid in bodies:
        position, orientation = p.getBasePositionAndOrientation(uid, physicsClientId=client)
        linear, angular = p.getBaseVelocity(uid, physicsClientId=client)
        bases.append([*position, *orientation, *linear, *angular])
        count = p.getNumJoints(uid, physicsClientId=client)
        joints.append(count)
        states += [p.getJointState(uid, j, physicsClientId=client)[:2] for j in range(count)]
    tally = env._tally
    return {
        "bodies": np.array(bodies, dtype=np.int64),
        "joints": np.array(joints, dtype=np.int64),
        "bases": np.array(bases, dtype=np.float64).reshape(-1, BASE_VALUES),
        "joint_states": np.array(states, dtype=np.float64).reshape(-1, 2),
        "buttons": env._buttons.astype(np.float64),
        "target": env.scene.arm.target.astype(np.float64),
        "speed": np.array([getattr(env, "button_speed", 0.0)], dtype=np.float64),
        "counters": np.array([env._ticks, tally.outside, tally.goal, *tally.contacts], dtype=np.int64),
    }


def restore(env: KukaButtonEnv, saved: Mapping[str, Any]) -> None:
    """Put ``saved`` (from :func:`capture` of an env of the same config) into ``env``, reset once since it was built."""
    _check(saved, capture(env))
    client = env.scene.client
    rows = iter(saved["joint_states"].tolist())
    for uid, count, base in zip(
        saved["bodies"].tolist(), saved["joints"].tolist(), saved["bases"].tolist(), strict=True
    ):
        p.resetBasePositionAndOrientation(uid, base[:3], base[3:7], physicsClientId=client)
        p.resetBaseVelocity(uid, base[7:10], base[10:], physicsClientId=client)
        for joint in range(count):
            position, velocity = next(rows)
            p.resetJointState(uid, joint, position, velocity, physicsClientId=client)
    restore_episode(env, saved)


def restore_episode(env: KukaButtonEnv, saved: Mapping[str, Any]) -> None:
    """Put the part of ``saved`` that PyBullet does not hold into ``env``: the counters, the buttons, the end-effector
    target, a moving button's speed (checked by :func:`restore`)."""
    ticks, outside, goal, *contacts = saved["counters"].tolist()
    env._ticks = ticks
    env._tally = PressTally(contacts=contacts, outside=outside, goal=goal)
    env._buttons = saved["buttons"].copy()
    env.scene.arm.target = saved["target"].copy()
    if hasattr(env, "button_speed"):
        env.button_speed = float(saved["speed"][0])


def _check(saved: Mapping[str, Any], fresh: dict[str, np.ndarray]) -> None:
    """Refuse, in one line, arrays that do not fit the fresh env (other bodies, shapes, numbers)."""
    for key in KEYS:
        value = saved.get(key)
        if not isinstance(value, np.ndarray) or value.shape != fresh[key].shape:
            raise Refused(f"run state of the arm env: {key} is not an array shaped {fresh[key].shape}")
        if key in FLOATS and not (value.dtype.kind == "f" and np.isfinite(value).all()):
            raise Refused(f"run state of the arm env: {key} holds values that are not finite numbers")
        if key not in FLOATS and value.dtype.kind not in "iu":
            raise Refused(f"run state of the arm env: {key} is not integers")
    for key in ("bodies", "joints"):
        if not np.array_equal(saved[key], fresh[key]):
            raise Refused(f"run state of the arm env: its {key} are not those of this env's scene")
    counters = saved["counters"]
    if counters.min() < 0 or counters[2] >= len(fresh["buttons"]):
        raise Refused("run state of the arm env: negative counters or a goal button that does not exist")
