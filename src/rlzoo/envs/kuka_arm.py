"""The Kuka iiwa with its two-finger gripper (``pybullet_data``'s ``kuka_with_gripper2.sdf``) in one PyBullet client.

Two ways to move it, as in the S-RL Toolbox: Cartesian control (an end-effector target moved by deltas, clipped to a
workspace box and reached through inverse kinematics with the gripper pointing down) and joint-space control (deltas
added to the current positions of the 7 arm joints). Both drive position motors limited to 0.35 rad/s and 200 N·m.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from rlzoo.envs.kuka_pybullet import data_path, p

ARM_JOINTS = 7  # the revolute joints of the arm; the gripper's joints follow
END_EFFECTOR_LINK = 6  # the flange: the link inverse kinematics places
GRIPPER_LINK = 8  # the left finger: its position is the gripper position of the ground truth (as the original)
BASE_POSITION = (-0.1, 0.0, -0.15)
# Initial positions of all 14 joints (arm, then gripper), and the end-effector target they come close to.
REST_JOINTS = (
    0.006418, 0.113184, -0.011401, -1.289317, 0.005379, 1.737684, -0.006539,
    0.000048, -0.299912, 0.0, -0.000043, 0.299960, 0.0, -0.0002,
)  # fmt: skip
HOME = (0.537, 0.0, 0.5)
MAX_FORCE = 200.0
MAX_VELOCITY = 0.35  # rad/s: about 0.0015 rad per physics step at 240 Hz
POSITION_GAIN = 0.3
VELOCITY_GAIN = 1.0
# The gripper stays closed: (joint, target, force) of the wrist rotation and the fingers.
GRIPPER_MOTORS = ((7, 0.0, MAX_FORCE), (8, 0.0, 2.0), (11, 0.0, 2.5), (10, 0.0, 2.0), (13, 0.0, 2.0))
POINTING_DOWN = (0.0, -math.pi, 0.0)  # Euler angles of the flange
JOINT_DAMPING = (1e-5,) * 14
# Null-space inverse kinematics (the original's 2-button task): limits, ranges and rest poses of the arm joints.
NULL_SPACE_LOWER = (-0.967, -2.0, -2.96, 0.19, -2.96, -2.09, -3.05)
NULL_SPACE_UPPER = (0.967, 2.0, 2.96, 2.29, 2.96, 2.09, 3.05)
NULL_SPACE_RANGES = (5.8, 4.0, 5.8, 4.0, 5.8, 4.0, 6.0)
NULL_SPACE_REST = (0.0, 0.0, 0.0, 0.5 * math.pi, 0.0, -math.pi * 0.5 * 0.66, 0.0)

Vector = NDArray[np.float64]


@dataclass(frozen=True)
class Workspace:
    """The box the end-effector target of Cartesian control is clipped to (x, y, z lows and highs, metres)."""

    low: tuple[float, float, float]
    high: tuple[float, float, float]

    def clip(self, point: Vector) -> Vector:
        return np.clip(point, self.low, self.high)


# The original's boxes: the small one around the fixed button, the large one for random buttons.
SMALL_WORKSPACE = Workspace((0.50, -0.17, 0.0), (0.65, 0.22, 0.5))
LARGE_WORKSPACE = Workspace((0.35, -0.30, 0.0), (0.65, 0.30, 0.5))


class KukaArm:
    """The arm in the client ``client``: loading, control and state.

    :param client: the PyBullet client id.
    :param workspace: the box of the end-effector target (Cartesian control).
    :param null_space: inverse kinematics with the null-space limits and rest poses (the 2-button task).
    """

    def __init__(self, client: int, workspace: Workspace = SMALL_WORKSPACE, null_space: bool = False) -> None:
        self.client = client
        self.workspace = workspace
        self.null_space = null_space
        sdf = os.path.join(data_path(), "kuka_iiwa", "kuka_with_gripper2.sdf")
        self.uid: int = p.loadSDF(sdf, physicsClientId=client)[0]
        p.resetBasePositionAndOrientation(self.uid, BASE_POSITION, (0.0, 0.0, 0.0, 1.0), physicsClientId=client)
        infos = [p.getJointInfo(self.uid, j, physicsClientId=client) for j in range(ARM_JOINTS)]
        self.joint_low = np.array([info[8] for info in infos])
        self.joint_high = np.array([info[9] for info in infos])
        self._down = p.getQuaternionFromEuler(POINTING_DOWN)
        self.target = np.array(HOME)

    def reset_pose(self) -> None:
        """Put every joint at its rest position, at rest, and the end-effector target at home."""
        for joint, position in enumerate(REST_JOINTS):
            p.resetJointState(self.uid, joint, position, 0.0, physicsClientId=self.client)
        self.reset_target()

    def reset_target(self) -> None:
        """Put the end-effector target back at home and command the gripper closed (after a snapshot restore)."""
        self.target = np.array(HOME)
        self.close_gripper()

    def close_gripper(self) -> None:
        """Command the wrist and fingers to their closed positions (kept until changed)."""
        for joint, position, force in GRIPPER_MOTORS:
            p.setJointMotorControl2(
                self.uid, joint, p.POSITION_CONTROL, targetPosition=position, force=force, physicsClientId=self.client
            )

    def move_cartesian(self, delta: Vector) -> None:
        """Move the end-effector target by ``delta`` (clipped to the workspace) and command the joints to reach it."""
        self.target = self.workspace.clip(self.target + delta)
        self.command(self._inverse_kinematics(self.target))

    def move_joints(self, delta: Vector, position_gain: float = POSITION_GAIN) -> None:
        """Command the arm joints to their current positions plus ``delta`` (clipped to the joint limits).

        :param position_gain: the motors' gain: the speed they aim at is ``position_gain`` x error / time step (at most
            :data:`MAX_VELOCITY`), so a low gain makes the speed proportional to ``delta``.
        """
        positions, _ = self.joint_state()
        self.command(np.clip(positions + delta, self.joint_low, self.joint_high), position_gain)

    def hold_rest_pose(self) -> None:
        """Command the arm joints to their rest positions."""
        self.command(np.array(REST_JOINTS[:ARM_JOINTS]))

    def command(self, joint_targets: Vector, position_gain: float = POSITION_GAIN) -> None:
        """Position targets of the 7 arm joints, reached at most at :data:`MAX_VELOCITY`."""
        for joint, position in enumerate(joint_targets.tolist()):
            p.setJointMotorControl2(
                self.uid,
                joint,
                p.POSITION_CONTROL,
                targetPosition=position,
                targetVelocity=0.0,
                force=MAX_FORCE,
                maxVelocity=MAX_VELOCITY,
                positionGain=position_gain,
                velocityGain=VELOCITY_GAIN,
                physicsClientId=self.client,
            )

    def _inverse_kinematics(self, position: Vector) -> Vector:
        target = position.tolist()
        if self.null_space:
            joints = p.calculateInverseKinematics(
                self.uid, END_EFFECTOR_LINK, target, self._down, NULL_SPACE_LOWER, NULL_SPACE_UPPER,
                NULL_SPACE_RANGES, NULL_SPACE_REST, physicsClientId=self.client,
            )  # fmt: skip
        else:
            joints = p.calculateInverseKinematics(
                self.uid, END_EFFECTOR_LINK, target, self._down, jointDamping=JOINT_DAMPING, physicsClientId=self.client
            )
        return np.asarray(joints[:ARM_JOINTS])

    def gripper_position(self) -> Vector:
        """:return: the (x, y, z) of the gripper (the left finger's centre of mass, as the original)."""
        return np.asarray(p.getLinkState(self.uid, GRIPPER_LINK, physicsClientId=self.client)[0])

    def joint_state(self) -> tuple[Vector, Vector]:
        """:return: the current positions and velocities of the 7 arm joints."""
        states = p.getJointStates(self.uid, range(ARM_JOINTS), physicsClientId=self.client)
        return np.array([s[0] for s in states]), np.array([s[1] for s in states])
