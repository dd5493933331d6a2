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
each reset, so a fresh env has other bodies: it saves no state.

:class:`ArmState` gives the arm envs the ``Stateful`` protocol of a checkpoint (``rlzoo.stateful``: ``get_state``,
``set_state``). A restore checks every array against the fresh env's (bodies, joints, shapes, finite numbers, counters
in range) and raises ``ValueError`` in one line on a mismatch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rlzoo.envs.kuka_pybullet import p
from rlzoo.envs.kuka_rules import PressTally
from rlzoo.envs.kuka_scene import ArmScene

# Base position (3), orientation (4), linear and angular velocity (3 + 3) of a body.
BASE_VALUES = 13
FLOATS = ("bases", "joint_states", "buttons", "target", "speed")
KEYS = ("bodies", "joints", *FLOATS, "counters")


class ArmState:
    """What an arm env holds that its state is made of, and the ``Stateful`` protocol over it."""

    _scene: ArmScene
    _tally: PressTally
    _buttons: NDArray[np.float64]
    _ticks: int

    def get_state(self) -> dict[str, np.ndarray] | None:
        """The state as arrays (keys :data:`KEYS`); None while bodies are in contact (it would not continue
        exactly)."""
        return None if in_contact(self) else capture(self)

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Put back a state from :meth:`get_state` of an env of the same config, reset once since it was built."""
        restore(self, state)


def in_contact(env: ArmState) -> bool:
    """Whether any two bodies are in contact (a saved state would not continue exactly)."""
    return len(p.getContactPoints(physicsClientId=env._scene.client)) > 0


def capture(env: ArmState) -> dict[str, np.ndarray]:
    """``env``'s state as arrays (keys :data:`KEYS`)."""
    client = env._scene.client
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
        "target": env._scene.arm.target.astype(np.float64),
        "speed": np.array([getattr(env, "button_speed", 0.0)], dtype=np.float64),
        "counters": np.array([env._ticks, tally.outside, tally.goal, *tally.contacts], dtype=np.int64),
    }


def restore(env: ArmState, saved: Mapping[str, Any]) -> None:
    """Put ``saved`` (from :func:`capture` of an env of the same config) into ``env``, reset once since it was built."""
    _check(saved, capture(env))
    client = env._scene.client
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


def restore_episode(env: ArmState, saved: Mapping[str, Any]) -> None:
    """Put the part of ``saved`` that PyBullet does not hold into ``env``: the counters, the buttons, the end-effector
    target, a moving button's speed (checked by :func:`restore`)."""
    ticks, outside, goal, *contacts = saved["counters"].tolist()
    env._ticks = ticks
    env._tally = PressTally(contacts=contacts, outside=outside, goal=goal)
    env._buttons = saved["buttons"].copy()
    env._scene.arm.target = saved["target"].copy()
    if hasattr(env, "button_speed"):
        env.button_speed = float(saved["speed"][0])


def _check(saved: Mapping[str, Any], fresh: dict[str, np.ndarray]) -> None:
    """Refuse, in one line, arrays that do not fit the fresh env (other bodies, shapes, numbers)."""
    for key in KEYS:
        value = saved.get(key)
        if not isinstance(value, np.ndarray) or value.shape != fresh[key].shape:
            raise ValueError(f"{key}: not an array shaped {fresh[key].shape}")
        if key in FLOATS and not (value.dtype.kind == "f" and np.isfinite(value).all()):
            raise ValueError(f"{key}: values that are not finite numbers")
        if key not in FLOATS and value.dtype.kind not in "iu":
            raise ValueError(f"{key}: not integers")
    for key in ("bodies", "joints"):
        if not np.array_equal(saved[key], fresh[key]):
            raise ValueError(f"{key}: not those of this env's scene")
    counters = saved["counters"]
    if counters.min() < 0 or counters[2] >= len(fresh["buttons"]):
        raise ValueError("counters: negative, or a goal button that does not exist")
