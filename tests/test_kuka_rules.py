"""The rules of the arm tasks without physics: action decoding, rewards, termination, the moving button's bounce.

These need no pybullet (:mod:`rlzoo.envs.kuka_rules` imports numpy only); the physics is tested in test_kuka_envs.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlzoo.envs import kuka_rules as rules
from rlzoo.envs.kuka_rules import Measure, PressTally

QUIET = Measure(contact=False, table=False, distance=0.3, far=False)
TOUCH = Measure(contact=True, table=False, distance=0.01, far=False)
TABLE = Measure(contact=False, table=True, distance=0.2, far=False)
FAR = Measure(contact=False, table=False, distance=1.0, far=True)


@pytest.mark.parametrize(
    ("action", "force_down", "expected"),
    [
        (0, True, [-1, 0, 0]),
        (1, True, [1, 0, 0]),
        (2, True, [0, -1, 0]),
        (3, True, [0, 1, 0]),
        (4, True, [0, 0, -1]),
        (5, True, [0, 0, -1]),
        (5, False, [0, 0, 1]),
    ],
)
def test_discrete_moves(action: int, force_down: bool, expected: list[float]) -> None:
    assert rules.discrete_move(action, 0.03, force_down) == pytest.approx(0.03 * np.array(expected))


def test_discrete_move_refuses_unknown_actions() -> None:
    with pytest.raises(ValueError, match=r"expected an integer in \[0, 6\)"):
        rules.discrete_move(6, 0.03, True)


def test_cartesian_and_joint_moves_clip_and_scale() -> None:
    move = rules.cartesian_move(np.array([2.0, -0.5, 1.0]), 0.0035, force_down=True)
    assert move == pytest.approx([0.0035, -0.00175, -0.0035])  # clipped, z forced down
    assert rules.cartesian_move(np.array([0.0, 0.0, 1.0]), 0.0035, force_down=False)[2] == pytest.approx(0.0035)
    assert rules.joint_move(np.array([1, -1, 0.5, 0, 0, 0, 3.0]), 0.1) == pytest.approx([0.1, -0.1, 0.05, 0, 0, 0, 0.1])


def test_five_contact_steps_terminate_with_success() -> None:
    tally = PressTally()
    outcomes = [rules.press_rule(tally, step, 5000) for step in [TOUCH, QUIET, TOUCH, TOUCH, QUIET, TOUCH]]
    assert outcomes == [(1.0, False), (0.0, False), (1.0, False), (1.0, False), (0.0, False), (1.0, False)]
    assert not tally.pressed
    assert rules.press_rule(tally, TOUCH, 5000) == (1.0, True)  # the 5th contact step, not necessarily in a row
    assert tally.pressed


def test_table_contact_terminates_with_minus_one() -> None:
    tally = PressTally()
    assert rules.press_rule(tally, TABLE, 5000) == (-1.0, True)
    assert not tally.pressed


def test_out_of_bounds_counts_consecutive_steps() -> None:
    tally = PressTally()
    assert [rules.press_rule(tally, FAR, 3) for _ in range(2)] == [(-1.0, False), (-1.0, False)]
    assert rules.press_rule(tally, QUIET, 3) == (0.0, False)  # back inside: the count starts again
    assert [rules.press_rule(tally, FAR, 3)[1] for _ in range(3)] == [False, False, True]


def test_contact_out_of_bounds_counts_but_rewards_minus_one() -> None:
    tally = PressTally()
    far_touch = Measure(contact=True, table=False, distance=1.0, far=True)
    assert rules.press_rule(tally, far_touch, 5000) == (-1.0, False)
    assert tally.contacts == [1]


def test_shaped_rewards() -> None:
    assert rules.shaped_press_reward(0.0, False, 0.3, continuous=True) == pytest.approx(-0.3)
    assert rules.shaped_press_reward(1.0, True, 0.01, continuous=True) == 50.0
    assert rules.shaped_press_reward(-1.0, True, 0.2, continuous=True) == -250.0
    assert rules.shaped_press_reward(1.0, True, 0.01, continuous=False) == pytest.approx(-0.01)  # discrete: -distance


def test_two_buttons_count_in_order() -> None:
    tally = PressTally(contacts=[0, 0])
    # Contacts are measured with the current goal (the first button): 5 of them move the goal on.
    rewards = [rules.two_button_rule(tally, TOUCH, 5000)[0] for _ in range(5)]
    assert rewards == [0.0] * 5  # the sparse reward counts the last button only
    assert tally.goal == 1 and tally.contacts == [5, 0]
    outcomes = [rules.two_button_rule(tally, TOUCH, 5000) for _ in range(5)]
    assert outcomes == [(1.0, False)] * 4 + [(1.0, True)]
    assert tally.pressed and tally.goal == 1


def test_two_button_shaped_rewards() -> None:
    assert rules.shaped_two_button_reward(0.0, False, TOUCH, contacts_before=2) == 25.0
    assert rules.shaped_two_button_reward(1.0, True, TOUCH, contacts_before=4) == 50.0
    assert rules.shaped_two_button_reward(-1.0, True, TABLE, contacts_before=0) == -250.0
    assert rules.shaped_two_button_reward(-1.0, False, FAR, contacts_before=0) == -20.0
    assert rules.shaped_two_button_reward(0.0, False, QUIET, contacts_before=0) == pytest.approx(-0.3)


def test_two_buttons_terminate_one_step_early_outside() -> None:
    tally = PressTally(contacts=[0, 0])
    assert [rules.two_button_rule(tally, FAR, 3)[1] for _ in range(2)] == [False, True]


def test_bounce_stays_within_the_limits() -> None:
    y, speed, ys = 0.0, 0.001, []
    for _ in range(2000):
        y, speed = rules.bounce(y, speed, -0.3, 0.3)
        ys.append(y)
    assert min(ys) >= -0.3021 and max(ys) <= 0.3021
    assert max(ys) > 0.29 and min(ys) < -0.29  # it travels the whole range both ways
