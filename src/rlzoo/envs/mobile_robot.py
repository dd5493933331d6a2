"""MobileRobot: a Gymnasium re-implementation of the S-RL Toolbox's ``MobileRobotGymEnv-v0`` (2-D navigation).

:class:`MobileRobotEnv` is the 2-D task and the base of the variants in :mod:`rlzoo.envs.mobile_robot_variants`, which
override only what differs (actions, targets, distance, ground truth, drawing of the targets).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, TypeAlias

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from rlzoo.envs import render
from rlzoo.envs.render import ARENA_SIZE, TopDownRenderer

Action: TypeAlias = "int | np.integer | NDArray[np.generic]"
Position: TypeAlias = NDArray[np.float64]

STEP = 0.1  # metres moved by one discrete action, and the scale of continuous actions
ROBOT_LENGTH = 0.65  # along x
ROBOT_WIDTH = 0.2  # along y
WALL_MARGIN = 0.1
# Robot centre limits: the wall margin plus half the robot's size on that axis -> x in [0.425, 3.575], y in [0.2, 3.8].
X_LIMITS = (WALL_MARGIN + ROBOT_LENGTH / 2, ARENA_SIZE - WALL_MARGIN - ROBOT_LENGTH / 2)
Y_LIMITS = (WALL_MARGIN + ROBOT_WIDTH / 2, ARENA_SIZE - WALL_MARGIN - ROBOT_WIDTH / 2)
START_LIMITS = (2.0 - 4.0 / 3.0, 2.0 + 4.0 / 3.0)  # robot start, each axis: [0.667, 3.333]
TARGET_LIMITS = (0.4, 3.6)  # random targets, each axis
EPS = 1e-9  # tolerance on thresholds, so positions on the 0.1 grid are not decided by float round-off

# The rules below take floats (one env) or arrays (all envs of rlzoo.envs.mobile_robot_batched at once) through the
# same operators.
Values: TypeAlias = "float | NDArray[np.float64]"


def inside_walls(x: Values, y: Values) -> Any:
    """:return: whether robot centres (x, y) lie within the wall limits (a bool, or a bool array)."""
    return (X_LIMITS[0] - EPS <= x) & (x <= X_LIMITS[1] + EPS) & (Y_LIMITS[0] - EPS <= y) & (y <= Y_LIMITS[1] + EPS)


def step_reward(distance: Values, on_target: Any, bumped: Any, shape_reward: bool) -> Any:
    """:return: -distance with ``shape_reward``; else -1 on a bump (taking precedence), +1 on target, 0 otherwise."""
    if shape_reward:
        return -distance
    return on_target * (1.0 - bumped) - 1.0 * bumped


def next_target(current: Any, on_target: Any, n_targets: int) -> Any:
    """:return: the index of the current target after a step: reaching it moves on to the next; the last stays."""
    return current + on_target * (current < n_targets - 1)


def checked_state(saved: Mapping[str, Any], held: Mapping[str, Any], n_targets: int) -> dict[str, NDArray[Any]]:
    """``saved`` (a checkpoint's ``robot``, ``targets``, ``current``, ``steps``, of one env or of all) as arrays of
    the shapes and dtypes of ``held``, the env's own.

    :raise ValueError: a value that is missing, of another shape or kind, not finite, or out of range."""
    found = {}
    for name, now in held.items():
        value, like = saved.get(name), np.asarray(now)
        array = np.asarray(value) if isinstance(value, int | np.ndarray) and not isinstance(value, bool) else None
        if array is None or array.shape != like.shape or (array.dtype.kind == "f") != (like.dtype.kind == "f"):
            kind = "numbers" if like.dtype.kind == "f" else "integers"
            raise ValueError(f"{name}: expected {kind} shaped {like.shape}")
        if not np.isfinite(array).all() or (array.dtype.kind != "f" and array.min(initial=0) < 0):
            raise ValueError(f"{name}: holds values that are not finite, or negative counts")
        found[name] = array.astype(like.dtype)
    if found["current"].max(initial=0) >= n_targets:
        raise ValueError(f"current: a target that does not exist (there are {n_targets})")
    return found


class MobileRobotEnv(gym.Env[NDArray[np.float32], Action]):
    """A robot seen from above drives in a walled 4 x 4 m arena to a target and stays on it.

    Re-implements the S-RL Toolbox ``MobileRobotGymEnv-v0`` (Raffin et al., "Decoupling feature extraction from policy
    learning", 2018), without PyBullet: the robot (0.65 m along x, 0.2 m along y, never rotating) moves kinematically;
    the four walls have different colours (red along y = 0, black along x = 4, green along y = 4, blue along x = 0).

    ## Action Space
    ``Discrete(4)`` by default: 0: x -= 0.1, 1: x += 0.1, 2: y -= 0.1, 3: y += 0.1. With ``continuous=True``:
    ``Box(-1, 1, (2,), float32)``; the action is clipped to [-1, 1] and scaled by 0.1 into a displacement (dx, dy).

    ## Observation Space
    The ground-truth state, a float32 ``Box``. Relative (default, as the original): robot_xy - target_xy, 2 values in
    [-4, 4]. Absolute (``relative_ground_truth=False``, the fix of the original's issue #54): robot_x, robot_y,
    target_x, target_y, 4 values in [0, 4]. Raw pixels are not the observation: with ``render_mode="rgb_array"``,
    :meth:`render` returns the top-down image (``render_size`` x ``render_size`` x 3 uint8, a new array each call; row 0
    is y = 4, column 0 is x = 0; see :mod:`rlzoo.envs.render`), which pixel pipelines read at every step.

    ## Starting State
    Robot uniform in [0.667, 3.333]²; target fixed at (3.6, 3.0), or with ``random_target`` uniform in [0.4, 3.6]²,
    redrawn at every reset. ``reset(options={"robot_position": (x, y), "target_position": (x, y)})`` places either one
    exactly (the robot must lie within its wall limits, the target in the arena).

    ## Rewards
    If a move would take the robot centre out of x ∈ [0.425, 3.575] or y ∈ [0.2, 3.8] (wall margin 0.1 plus half its
    size), the move is undone and the step is a bump: -1. Otherwise +1 when the distance robot-target is ≤ 0.4, else 0.
    The bump takes precedence over the +1. With ``shape_reward``: -distance instead (walls are not penalised).

    ## Episode End
    Reaching the target does not end the episode (the agent should stay and collect +1 per step): the episode is never
    terminated. It is truncated after exactly ``max_steps`` (250) steps by the env itself (the original ran 251 by an
    off-by-one), so the registered ids carry no ``TimeLimit``: the limit has a single source.

    ``info`` (at reset and every step): ``robot_position`` and ``target_position`` (the current target, float64 (x, y)
    arrays), ``is_success`` (the robot is on the target and the move was not undone: the step earns the +1, so a policy
    that keeps pushing into the wall beside the target, at -1 a step, never reads as a success), ``bumped`` (the move
    was undone; False at reset).

    ## Arguments
    - ``continuous`` (bool, False): Box actions instead of Discrete.
    - ``random_target`` (bool, False): draw the target at every reset.
    - ``shape_reward`` (bool, False): reward -distance instead of the sparse +1/-1.
    - ``relative_ground_truth`` (bool, True): relative (robot - target) or absolute (robot and target) observation.
    - ``render_mode`` (str | None, None): ``"rgb_array"`` or None.
    - ``render_size`` (int, 224): side of the rendered image in pixels (also the attribute ``render_size``), so images
      are rendered natively at the size a pixel pipeline trains on.
    - ``max_steps`` (int, 250): episode length before truncation.

    ## Version History
    - v0: first Gymnasium version of the S-RL Toolbox task: exactly 250 steps, truncation instead of ``done``, absolute
      ground truth with robot and target, pure-numpy renderer in place of PyBullet's TinyRenderer. ``is_success`` is
      False on a bumped step, in every variant: an ``info`` flag, not the dynamics, rewards or spaces, so returns
      stay comparable with earlier v0 runs and the id keeps -v0.
    """

    # gymnasium.Env declares metadata an instance variable, so mypy refuses ClassVar here.
    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 30}  # noqa: RUF012

    n_actions: ClassVar[int] = 4  # discrete actions
    supports_continuous: ClassVar[bool] = True
    reward_radius: ClassVar[float] = 0.4  # the robot is on the target within this distance
    fixed_y: ClassVar[float | None] = None  # the y of robot and targets, for variants that move along a line
    default_targets: ClassVar[tuple[tuple[float, float], ...]] = ((3.6, 3.0),)
    target_colours: ClassVar[tuple[render.Colour, ...]] = (render.TARGET,)

    # Displacement of each discrete action.
    _ACTION_STEPS: ClassVar[NDArray[np.float64]] = STEP * np.array([[-1.0, 0.0], [1.0, 0.0], [0.0, -1.0], [0.0, 1.0]])

    def __init__(
        self,
        continuous: bool = False,
        random_target: bool = False,
        shape_reward: bool = False,
        relative_ground_truth: bool = True,
        render_mode: str | None = None,
        render_size: int = 224,
        max_steps: int = 250,
    ) -> None:
        if continuous and not self.supports_continuous:
            raise ValueError(f"{type(self).__name__} has discrete actions only: continuous=True is not supported")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        if max_steps < 1:
            raise ValueError(f"max_steps must be positive, got {max_steps}")
        self.continuous = continuous
        self.random_target = random_target
        self.shape_reward = shape_reward
        self.relative_ground_truth = relative_ground_truth
        self.render_mode = render_mode
        self.render_size = render_size
        self.max_steps = max_steps
        self._renderer = TopDownRenderer(render_size)
        # The background with the targets drawn, redrawn only when the targets change (once per episode).
        self._scene: NDArray[np.uint8] | None = None
        self._scene_key: tuple[bytes, int] | None = None

        self.action_space: spaces.Space[Any] = (
            spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32) if continuous else spaces.Discrete(self.n_actions)
        )
        low, high = self._observation_bounds()
        self.observation_space = spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)

        self._robot: Position = np.array([2.0, self.fixed_y if self.fixed_y is not None else 2.0])
        self._targets: Position = np.array(self.default_targets, dtype=np.float64)
        self._current = 0  # index of the current target
        self._steps = 0

    # --- what the variants override -------------------------------------------------------------------------------
    def _observation_bounds(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """:return: low and high of the ground-truth observation."""
        if self.relative_ground_truth:
            return np.full(2, -ARENA_SIZE), np.full(2, ARENA_SIZE)
        return np.zeros(4), np.full(4, ARENA_SIZE)

    def _ground_truths(self, robots: Position, targets: Position) -> NDArray[np.float64]:
        """:return: the observations (before the cast to float32) of robots (..., 2) about current targets (..., 2)."""
        if self.relative_ground_truth:
            return robots - targets
        return np.concatenate([robots, targets], axis=-1)

    @staticmethod
    def _distances(robots: Position, targets: Position) -> NDArray[np.float64]:
        """:return: the distances of robots (..., 2) to targets (..., 2), compared with ``reward_radius``."""
        d = robots - targets
        return np.sqrt(d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1])

    def _distance(self) -> float:
        """:return: :meth:`_distances` for this env in plain floats (faster; the same IEEE operations, same result)."""
        dx, dy = (self._robot - self._targets[self._current]).tolist()
        return math.sqrt(dx * dx + dy * dy)

    def _sample_target(self) -> Position:
        """:return: a random target position (``random_target``)."""
        return self._sample_position(TARGET_LIMITS)

    def _parse_target(self, value: Any, name: str) -> Position:
        """:return: a target position from a reset option."""
        return self._parse_position(value, name)

    def _draw_targets(self, image: NDArray[np.uint8]) -> None:
        for (x, y), colour in zip(self._targets, self.target_colours, strict=True):
            self._renderer.fill_disc(image, x, y, colour)

    # --- shared machinery -----------------------------------------------------------------------------------------
    def _displacement(self, action: Action) -> NDArray[np.float64]:
        if self.continuous:
            return np.clip(np.asarray(action, dtype=np.float64).reshape(2), -1.0, 1.0) * STEP
        index = int(np.asarray(action).item())
        if not 0 <= index < self.n_actions:
            raise ValueError(f"invalid action {action!r}: expected an integer in [0, {self.n_actions})")
        return self._ACTION_STEPS[index]

    @staticmethod
    def _inside_walls(position: Position) -> bool:
        x, y = position.tolist()
        return bool(inside_walls(x, y))

    def _sample_position(self, limits: tuple[float, float]) -> Position:
        if self.fixed_y is not None:
            return np.array([self.np_random.uniform(*limits), self.fixed_y])
        return self.np_random.uniform(*limits, size=2)

    def _parse_position(self, value: Any, name: str) -> Position:
        """:return: an (x, y) array from a reset option; a lone x is accepted where y is fixed."""
        xy = np.asarray(value, dtype=np.float64).reshape(-1)
        if xy.size == 1 and self.fixed_y is not None:
            xy = np.array([xy[0], self.fixed_y])
        if xy.size != 2:
            raise ValueError(f"reset option {name!r} must be an (x, y) pair, got {value!r}")
        if self.fixed_y is not None and abs(xy[1] - self.fixed_y) > EPS:
            raise ValueError(f"{type(self).__name__} keeps y at {self.fixed_y}: {name}={value!r}")
        return xy

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Start an episode.

        :param seed: seeds ``self.np_random`` (same seed, same trajectory)
        :param options: ``robot_position`` (x, y), ``target_position`` (x, y) of the first target, or
            ``target_positions`` (one (x, y) per target) place them instead of drawing them
        :return: the observation and the info dict
        """
        super().reset(seed=seed)
        options = options or {}
        self._steps = 0
        self._current = 0
        if self.random_target:
            self._targets = np.stack([self._sample_target() for _ in self.default_targets])
        else:
            self._targets = np.array(self.default_targets, dtype=np.float64)
        self._robot = self._sample_position(START_LIMITS)

        if "target_positions" in options:
            targets = [self._parse_target(t, "target_positions") for t in options["target_positions"]]
            if len(targets) != len(self.default_targets):
                raise ValueError(f"target_positions needs {len(self.default_targets)} positions, got {len(targets)}")
            self._targets = np.stack(targets)
        if "target_position" in options:
            self._targets[0] = self._parse_target(options["target_position"], "target_position")
        if not np.all((self._targets >= 0.0) & (self._targets <= ARENA_SIZE)):
            raise ValueError(f"targets must lie in the arena [0, {ARENA_SIZE}]², got {self._targets.tolist()}")
        if "robot_position" in options:
            self._robot = self._parse_position(options["robot_position"], "robot_position")
            if not self._inside_walls(self._robot):
                raise ValueError(f"robot_position must lie in x ∈ {X_LIMITS}, y ∈ {Y_LIMITS}, got {self._robot}")
        return self._observation(), self._info(bumped=False)

    def get_state(self) -> dict[str, Any]:
        """The episode's state (its generator aside): the robot, the targets, the current target, the steps taken
        (the ``Stateful`` protocol of a checkpoint, ``rlzoo.stateful``)."""
        return {"robot": self._robot.copy(), "targets": self._targets.copy(), "current": self._current,
                "steps": self._steps}  # fmt: skip

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Put back a state from :meth:`get_state` of an env of the same config (checked: ``ValueError``)."""
        found = checked_state(state, self.get_state(), len(self._targets))
        self._robot, self._targets = found["robot"], found["targets"]
        self._current, self._steps = int(found["current"]), int(found["steps"])

    def step(self, action: Action) -> tuple[NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        moved = self._robot + self._displacement(action)
        bumped = not self._inside_walls(moved)
        if not bumped:
            self._robot = moved
        self._steps += 1
        distance = self._distance()
        on_target = distance <= self.reward_radius + EPS
        reward = float(step_reward(distance, on_target, bumped, self.shape_reward))
        self._current = next_target(self._current, on_target, len(self._targets))
        truncated = self._steps >= self.max_steps
        return self._observation(), reward, False, truncated, self._info(bumped=bumped)

    def _observation(self) -> NDArray[np.float32]:
        return self._ground_truths(self._robot, self._targets[self._current]).astype(np.float32)

    def _info(self, bumped: bool) -> dict[str, Any]:
        on_last = self._current == len(self._targets) - 1
        return self._make_info(
            self._robot, self._targets, self._current, self._distance() <= self.reward_radius + EPS and on_last, bumped
        )

    @classmethod
    def _make_info(
        cls, robot: Position, targets: Position, current: int, success: bool, bumped: bool
    ) -> dict[str, Any]:
        """:return: the info dict of one env (copies: later steps leave it as it is)."""
        return {
            "robot_position": robot.copy(),
            "target_position": targets[current].copy(),
            "is_success": success and not bumped,  # the step that earns the target's +1: a bump never counts
            "bumped": bumped,
        }

    def render(self) -> NDArray[np.uint8] | None:
        """:return: the top-down RGB image, a new array each call (None, with a warning, without a render mode)."""
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode: pass render_mode='rgb_array' at construction")
            return None
        key = (self._targets.tobytes(), self._current)
        if self._scene is None or key != self._scene_key:
            self._scene = self._renderer.new_frame()
            self._draw_targets(self._scene)
            self._scene_key = key
        image = self._scene.copy()
        x, y = self._robot.tolist()
        self._renderer.fill_rect(
            image, x - ROBOT_LENGTH / 2, x + ROBOT_LENGTH / 2, y - ROBOT_WIDTH / 2, y + ROBOT_WIDTH / 2, render.ROBOT
        )
        return image
