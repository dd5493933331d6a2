"""The S-RL Toolbox's MobileRobot variants: 1-D, line target and two targets.

Each overrides only what differs from :class:`~rlzoo.envs.mobile_robot.MobileRobotEnv`; the arena, walls, bump rule,
``shape_reward``, truncation after ``max_steps`` (250), seeding, reset options and the renderer are shared.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from rlzoo.envs import render
from rlzoo.envs.mobile_robot import EPS, STEP, TARGET_LIMITS, MobileRobotEnv, Position
from rlzoo.envs.render import ARENA_SIZE

LINE_Y = ARENA_SIZE / 2  # the y of the 1-D robot's line


class MobileRobot1DEnv(MobileRobotEnv):
    """The robot moves along the line y = 2 towards a target on the same line (a debugging task).

    ## Action Space
    ``Discrete(2)``: 0: x -= 0.1, 1: x += 0.1. Discrete only: ``continuous=True`` raises ``ValueError``.

    ## Observation Space
    float32 ``Box``. Relative (default): robot_x - target_x, 1 value in [-4, 4]. Absolute: robot_x, target_x, 2 values
    in [0, 4] (the robot and target y are always 2, so they are left out).

    ## Starting State
    Robot x uniform in [0.667, 3.333], y = 2; target x fixed at 3.6, or uniform in [0.4, 3.6] with ``random_target``.
    Reset options take a lone x or an (x, 2) pair.

    ## Rewards
    +1 when |robot_x - target_x| ≤ 0.4; -1 when the move is undone at a wall (x ∉ [0.425, 3.575]), taking precedence;
    else 0. With ``shape_reward``: -|robot_x - target_x|.

    ## Episode End
    Never terminated; truncated after exactly ``max_steps`` (250) steps. ``info`` as in ``MobileRobotEnv``, with (x, 2)
    positions.

    ## Arguments
    As ``MobileRobotEnv``, without ``continuous`` (accepted only as False).

    ## Version History
    - v0: first Gymnasium version. Rendered as the same top-down arena as the 2-D task (robot and target disc on the
      line y = 2), where the original's camera showed a single wall.
    """

    n_actions: ClassVar[int] = 2
    supports_continuous: ClassVar[bool] = False
    fixed_y: ClassVar[float | None] = LINE_Y
    default_targets: ClassVar[tuple[tuple[float, float], ...]] = ((3.6, LINE_Y),)
    _ACTION_STEPS: ClassVar[NDArray[np.float64]] = STEP * np.array([[-1.0, 0.0], [1.0, 0.0]])

    def _observation_bounds(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        if self.relative_ground_truth:
            return np.full(1, -ARENA_SIZE), np.full(1, ARENA_SIZE)
        return np.zeros(2), np.full(2, ARENA_SIZE)

    def _ground_truths(self, robots: Position, targets: Position) -> NDArray[np.float64]:
        if self.relative_ground_truth:
            return robots[..., :1] - targets[..., :1]
        return np.concatenate([robots[..., :1], targets[..., :1]], axis=-1)


class MobileRobotLineTargetEnv(MobileRobotEnv):
    """The robot moves in 2-D to a target band that crosses the arena at x = target_x, and stays in it.

    ## Action Space
    As ``MobileRobotEnv``: ``Discrete(4)``, or ``Box(-1, 1, (2,))`` x 0.1 with ``continuous=True``.

    ## Observation Space
    float32 ``Box``, dimensions made consistent (the original mixed a 2-D robot with a 1-D target). Relative (default):
    robot_x - target_x, robot_y: 2 values, the second in [0, 4] (the band spans every y, so y has no target
    reference). Absolute: robot_x, robot_y, target_x: 3 values in [0, 4].

    ## Starting State
    Robot uniform in [0.667, 3.333]²; band at x = 3.6, or uniform x in [0.4, 3.6] with ``random_target``. Reset options:
    ``target_position`` takes a lone x or an (x, 2) pair.

    ## Rewards
    +1 when |target_x - robot_x| ≤ 0.1; -1 on a wall bump (precedence); else 0. With ``shape_reward``: -|dx|.

    ## Episode End
    Never terminated; truncated after exactly ``max_steps`` (250) steps. ``info["target_position"]`` is (target_x, 2),
    the centre of the band.

    ## Arguments
    As ``MobileRobotEnv``.

    ## Version History
    - v0: first Gymnasium version; consistent ground-truth dimensions. Drawn as a yellow band 0.2 m wide (the +1 zone)
      between the top and bottom walls.
    """

    reward_radius: ClassVar[float] = 0.1
    default_targets: ClassVar[tuple[tuple[float, float], ...]] = ((3.6, LINE_Y),)

    def _observation_bounds(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        if self.relative_ground_truth:
            return np.array([-ARENA_SIZE, 0.0]), np.full(2, ARENA_SIZE)
        return np.zeros(3), np.full(3, ARENA_SIZE)

    def _ground_truths(self, robots: Position, targets: Position) -> NDArray[np.float64]:
        if self.relative_ground_truth:
            return np.concatenate([robots[..., :1] - targets[..., :1], robots[..., 1:]], axis=-1)
        return np.concatenate([robots, targets[..., :1]], axis=-1)

    @staticmethod
    def _distances(robots: Position, targets: Position) -> NDArray[np.float64]:
        return np.abs(robots[..., 0] - targets[..., 0])

    def _distance(self) -> float:
        return abs(float(self._robot[0] - self._targets[0, 0]))

    def _sample_target(self) -> Position:
        return np.array([self.np_random.uniform(*TARGET_LIMITS), LINE_Y])

    def _parse_target(self, value: Any, name: str) -> Position:
        xy = np.asarray(value, dtype=np.float64).reshape(-1)
        if xy.size == 1:
            xy = np.array([xy[0], LINE_Y])
        if xy.size != 2 or abs(xy[1] - LINE_Y) > EPS:
            raise ValueError(f"reset option {name!r} must be a band x or an (x, {LINE_Y}) pair, got {value!r}")
        return xy

    def _draw_targets(self, image: NDArray[np.uint8]) -> None:
        self._renderer.fill_vertical_band(image, self._targets[0, 0], self.reward_radius, render.TARGET)


class MobileRobot2TargetEnv(MobileRobotEnv):
    """The robot reaches a first target, then a second one, and stays on it.

    ## Action Space
    ``Discrete(4)`` as ``MobileRobotEnv``. Discrete only: ``continuous=True`` raises ``ValueError``.

    ## Observation Space
    float32 ``Box`` about the *current* target. Relative (default): robot_xy - current_target_xy, 2 values in [-4, 4].
    Absolute: robot_x, robot_y, current_target_x, current_target_y, 4 values in [0, 4]. Which target is current is thus
    part of the state, so the observation stays Markov.

    ## Starting State
    Robot uniform in [0.667, 3.333]²; targets at (3.6, 3.0) (first, yellow) and (0.4, 3.0) (second, magenta: the
    original's red would be confused with the red wall); both uniform in [0.4, 3.6]² with ``random_target``. The first
    is current. Reset options: ``target_positions`` ((x1, y1), (x2, y2)), or ``target_position`` for the first only.

    ## Rewards
    +1 per step within 0.4 of the current target; -1 on a wall bump (precedence); else 0. With ``shape_reward``:
    -distance to the current target. The step that reaches the first target earns its +1, then the second becomes
    current for the next steps (observation and ``info`` returned by that step already refer to the second); the
    second stays current until the episode ends. The first target is no longer drawn once reached, so the image also
    shows which target is current.

    ## Episode End
    Never terminated; truncated after exactly ``max_steps`` (250) steps: the original declared 1500 but ran 250, and 250
    is kept. ``info`` adds ``target_positions`` (both, a (2, 2) array) and ``current_target`` (0 or 1);
    ``is_success`` is True only on the second target.

    ## Arguments
    As ``MobileRobotEnv``, without ``continuous`` (accepted only as False).

    ## Version History
    - v0: first Gymnasium version; 250 steps; current-target ground truth.
    """

    supports_continuous: ClassVar[bool] = False
    default_targets: ClassVar[tuple[tuple[float, float], ...]] = ((3.6, 3.0), (0.4, 3.0))
    target_colours: ClassVar[tuple[render.Colour, ...]] = (render.TARGET, render.SECOND_TARGET)

    @classmethod
    def _make_info(
        cls, robot: Position, targets: Position, current: int, success: bool, bumped: bool
    ) -> dict[str, Any]:
        info = super()._make_info(robot, targets, current, success, bumped)
        info["target_positions"] = targets.copy()
        info["current_target"] = current
        return info

    def _draw_targets(self, image: NDArray[np.uint8]) -> None:
        for index in range(self._current, len(self.default_targets)):  # reached targets are no longer drawn
            (x, y), colour = self._targets[index], self.target_colours[index]
            self._renderer.fill_disc(image, x, y, colour)
