"""Rules of the arm tasks, free of physics: action decoding, rewards, termination (the S-RL Toolbox's constants).

The env measures (contact, table contact, distance) and these functions decide, so each rule is tested on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

N_DISCRETE_ACTIONS = 6
DELTA_V = 0.03  # metres the end-effector target moves per discrete action
DELTA_V_CONTINUOUS = 0.0035  # metres per unit of a continuous Cartesian action
DELTA_THETA = 0.1  # radians per unit of a joint-space action
NOISE_STD = 0.01  # std of the Gaussian noise added to DELTA_V (discrete)
NOISE_STD_CONTINUOUS = 1e-4
NOISE_STD_JOINTS = 0.002
N_CONTACTS_BEFORE_TERMINATION = 5
N_STEPS_OUTSIDE_SAFETY_SPHERE = 5000
SUCCESS_BONUS = 50.0  # shaped reward of a successful termination (continuous actions)
FAILURE_PENALTY = -250.0  # shaped reward of a termination by table contact or out of bounds (continuous actions)
CONTACT_BONUS = 25.0  # 2-button shaped reward of a contact step with the current button
OUT_OF_BOUNDS_PENALTY = -20.0  # 2-button shaped reward out of the safety sphere
# Directions of the discrete actions 0..5: -x, +x, -y, +y, down, up (or down with force_down).
_DISCRETE_DIRECTIONS = np.array(
    [[-1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0], [0.0, 0.0, 1.0]]
)

Vector = NDArray[np.float64]


def discrete_move(action: int, step: float, force_down: bool) -> Vector:
    """:return: the end-effector displacement of discrete ``action`` (0..5) moving ``step`` metres."""
    if not 0 <= action < N_DISCRETE_ACTIONS:
        raise ValueError(f"invalid action {action!r}: expected an integer in [0, {N_DISCRETE_ACTIONS})")
    direction = _DISCRETE_DIRECTIONS[4 if force_down and action == 5 else action]
    return direction * step


def cartesian_move(action: Vector, step: float, force_down: bool) -> Vector:
    """:return: the displacement of a continuous action in [-1, 1]³ (clipped) scaled by ``step``; z ≤ 0 with
    ``force_down``."""
    move = np.clip(np.asarray(action, dtype=np.float64).reshape(3), -1.0, 1.0) * step
    if force_down:
        move[2] = -abs(move[2])
    return move


def joint_move(action: Vector, step: float, n_joints: int = 7) -> Vector:
    """:return: the joint deltas (radians) of a joint-space action in [-1, 1]^7 (clipped) scaled by ``step``."""
    return np.clip(np.asarray(action, dtype=np.float64).reshape(n_joints), -1.0, 1.0) * step


@dataclass
class PressTally:
    """What an episode counts: contact steps with each button, consecutive steps outside the safety sphere.

    :param goal: the index of the button to press now (the 2-button task presses them in order).
    """

    contacts: list[int] = field(default_factory=lambda: [0])
    outside: int = 0
    goal: int = 0

    @property
    def pressed(self) -> bool:
        """Whether the last button got its contacts (the task's success)."""
        return self.contacts[-1] >= N_CONTACTS_BEFORE_TERMINATION


@dataclass(frozen=True)
class Measure:
    """What the physics says after a step: contact with the goal button's cap, with the table; gripper-goal
    distance; whether the distance exceeds the safety sphere (``max_distance``)."""

    contact: bool
    table: bool
    distance: float
    far: bool


def press_rule(tally: PressTally, measure: Measure, max_outside: int) -> tuple[float, bool]:
    """One step of the 1-button tasks; updates ``tally``.

    :return: the sparse reward (+1 contact; -1 out of the sphere or on the table, taking precedence; else 0) and
        whether the episode terminates (table contact, 5 contact steps, or ``max_outside`` steps outside in a row).
    """
    tally.contacts[0] += int(measure.contact)
    reward = float(measure.contact)
    if measure.far or measure.table:
        reward = -1.0
        tally.outside += 1
    else:
        tally.outside = 0
    terminated = measure.table or tally.pressed or tally.outside >= max_outside
    return reward, terminated


def shaped_press_reward(sparse: float, terminated: bool, distance: float, continuous: bool) -> float:
    """Shaped reward of the 1-button tasks: -distance; with continuous actions +50 on a termination with a positive
    sparse reward, -250 on one with a negative sparse reward."""
    if continuous and terminated and sparse > 0:
        return SUCCESS_BONUS
    if continuous and terminated and sparse < 0:
        return FAILURE_PENALTY
    return -distance


def two_button_rule(tally: PressTally, measure: Measure, max_outside: int) -> tuple[float, bool]:
    """One step of the 2-button task (buttons pressed in order); updates ``tally`` (the goal moves on to the next
    button once the current one has 5 contact steps).

    :return: the sparse reward (+1 per contact step with the last button only; -1 out of the sphere or on the table)
        and whether the episode terminates (table contact, the last button pressed, ``max_outside - 1`` steps outside
        in a row, as the original).
    """
    last = len(tally.contacts) - 1
    reward = float(measure.contact and tally.goal == last)
    tally.contacts[tally.goal] += int(measure.contact)
    if tally.contacts[tally.goal] >= N_CONTACTS_BEFORE_TERMINATION and tally.goal < last:
        tally.goal += 1
    if measure.far or measure.table:
        reward = -1.0
        tally.outside += 1
    else:
        tally.outside = 0
    terminated = measure.table or tally.pressed or tally.outside >= max_outside - 1
    return reward, terminated


def shaped_two_button_reward(sparse: float, terminated: bool, measure: Measure, contacts_before: int) -> float:
    """Shaped reward of the 2-button task: +50 on success, +25 per contact step with the current button (while it
    has fewer than 5), -250 on the table, -20 out of the sphere, else -distance.

    :param contacts_before: the current button's contact steps before this step.
    """
    if terminated and sparse > 0:
        return SUCCESS_BONUS
    if measure.contact and contacts_before < N_CONTACTS_BEFORE_TERMINATION:
        return CONTACT_BONUS
    if measure.table:
        return FAILURE_PENALTY
    if measure.far:
        return OUT_OF_BOUNDS_PENALTY
    return -measure.distance


def bounce(position: float, speed: float, low: float, high: float) -> tuple[float, float]:
    """:return: the next (position, speed) of a button sliding at ``speed`` per step, reversing once past a bound."""
    if position > high or position < low:
        speed = -speed
    return position + speed, speed
