"""KukaButton: a Gymnasium re-implementation of the S-RL Toolbox's ``KukaButtonGymEnv`` on PyBullet (an extra:
``pip install -e ".[arm]"``).

:class:`KukaButtonEnv` is the task and the base of the variants in :mod:`rlzoo.envs.kuka_variants`, which override
the hooks of the section "what the variants override".
"""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar, Literal, TypeAlias

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from rlzoo.envs import kuka_rules as rules
from rlzoo.envs.kuka_arm import ARM_JOINTS, LARGE_WORKSPACE, MAX_VELOCITY, SMALL_WORKSPACE
from rlzoo.envs.kuka_scene import TABLE_POSITION, TIMESTEP, ArmScene, goal_point
from rlzoo.envs.kuka_state import ArmState

Action: TypeAlias = "int | np.integer | NDArray[np.generic]"
Observation: TypeAlias = NDArray[np.float32]
Vector: TypeAlias = NDArray[np.float64]

ARM_STATES = ("ground_truth", "joints", "joints_position")
SETTLE_STEPS = 500  # physics steps the arm rests before the first episode
N_RANDOM_ACTIONS_AT_INIT = 5
POSITION_BOUND = 2.0  # metres: bound of observed positions (the arm reaches about 1.3 m)
ANGLE_BOUND = np.pi
VELOCITY_BOUND = 10.0  # rad/s (the motors move at most 0.35 rad/s)
TABLE_HALF_SIZE = (0.75, 0.5)  # the table top around TABLE_POSITION, for placed buttons
# Motor gain of joint-space actions: a delta of DELTA_THETA (action 1) aims at MAX_VELOCITY, so joint speeds are
# proportional to the action (with the Cartesian gain, 0.3, any action above 0.05 would move at full speed).
JOINT_POSITION_GAIN = MAX_VELOCITY * TIMESTEP / rules.DELTA_THETA


class KukaButtonEnv(ArmState, gym.Env[Observation, Action]):
    """A Kuka iiwa arm with a gripper presses a button on a table (real PyBullet physics at 240 Hz).

    Re-implements the S-RL Toolbox ``KukaButtonGymEnv-v0`` (Raffin et al., "S-RL Toolbox", 2018). Each env runs its
    own DIRECT PyBullet client, loaded and settled once (500 physics steps); every reset restores that snapshot,
    places the button(s) and takes 5 random actions, so an episode starts as the original's, without reloading.

    ## Action Space
    ``Discrete(6)`` by default (``continuous`` False or None): 0/1: x -/+, 2/3: y -/+, 4: z down, 5: z down
    (``force_down``, default) or up; the end-effector target moves 0.03 m (+ Gaussian noise, std 0.01) and the arm
    follows by inverse kinematics. ``continuous=True``: ``Box(-1, 1, (3,))``, the target moves 0.0035 m per unit
    (noise std 1e-4; z ≤ 0 with ``force_down``). ``action_joints=True``: ``Box(-1, 1, (7,))``, deltas of 0.1 rad per
    unit (noise std 0.002) added to the current positions of the 7 arm joints, reached at a speed proportional to the
    action (0.35 rad/s at 1); always continuous (``continuous`` is then not used). The Cartesian target is clipped to
    a box around the button (the original's); the joints move at most 0.35 rad/s.

    ## Observation Space
    A float32 ``Box``, by ``arm_state``: ``"ground_truth"`` (default): gripper - goal point (3 values in [-2, 2]),
    or with ``relative_ground_truth=False`` gripper and goal point (6 values); ``"joints"``: positions and velocities
    of the 7 arm joints (14 values, read from the simulation at every step); ``"joints_position"``: the ground truth
    followed by the joints (17 or 20 values). The gripper position is the left finger's centre of mass; the goal point
    lies 0.28 m above the button's base, where the gripper is when the fingers rest on the cap. Pixels are not the
    observation: with ``render_mode="rgb_array"``, :meth:`render` returns the camera image (``render_size``² x 3
    uint8, TinyRenderer; 6 channels with ``multi_view``), which pixel pipelines read at every step.

    ## Starting State
    The arm at rest above the table; the button at (0.5, 0), or with ``random_target`` at (0.5 + 0.15·U(-1, 1),
    0.3·U(-1, 1)); then 5 random actions. ``reset(options={"button_position": (x, y)})`` places the button
    (``"button_positions"``: one (x, y) per button).

    ## Rewards
    +1 per step in which the gripper touches the button's cap; -1 when the gripper is more than ``max_distance`` from
    the goal point or the arm touches the table (taking precedence); else 0. ``shape_reward``: -distance to the goal
    point; with continuous actions (Cartesian or joint) +50 on a termination with a positive sparse reward and -250 on
    one with a negative sparse reward.

    ## Episode End
    Terminated after 5 contact steps (``info["is_success"]``), on table contact, or after 5000 steps in a row outside
    the safety sphere. Truncated after ``max_steps`` (1000) physics steps, as the original counted them (an agent
    step is ``action_repeat`` of them), by the env itself (the ids carry no
    ``TimeLimit``). ``info``: ``robot_position`` (gripper) and ``target_position`` (goal point) as float64 (x, y, z),
    ``is_success``, ``contacts`` (contact steps with the goal button), ``table_contact``, ``out_of_bounds``.

    ## Arguments
    - ``continuous`` (bool | None, False): Cartesian Box actions instead of Discrete (None: Discrete).
    - ``action_joints`` (bool, False): joint-space actions (7 joint deltas).
    - ``random_target`` (bool, False): draw the button position at every reset.
    - ``shape_reward`` (bool, False): the shaped reward above.
    - ``action_repeat`` (int, 1): physics steps per agent step, the action applied at each.
    - ``multi_view`` (bool, False): render a second camera too (6 channels).
    - ``force_down`` (bool, True): no upward move (discrete 5 and continuous z go down).
    - ``max_distance`` (float, 0.8): radius of the safety sphere around the goal point.
    - ``max_steps`` (int, 1000): episode length in physics steps before truncation.
    - ``arm_state`` (str, "ground_truth"): ``"ground_truth"``, ``"joints"`` or ``"joints_position"`` (the srl_model
      options of the same names pass it).
    - ``relative_ground_truth`` (bool, True): gripper - goal, or gripper and goal.
    - ``render_mode`` (str | None, None): ``"rgb_array"`` or None.
    - ``render_size`` (int, 224): side of the rendered image in pixels (64 for training on pixels).

    ## Version History
    - v0: first Gymnasium version: Gymnasium API (truncation instead of ``done``), one client per env closed by
      ``close()``, seeded through ``reset(seed=)``, snapshot restore instead of reloading the scene, a built button
      (pedestal and cap), the real joint states (the original's were constant), joint deltas from the current joint
      positions at speeds proportional to the action, Gaussian random initial actions (the original drew one
      scalar), ``max_steps`` in physics steps as the original.
    """

    # gymnasium.Env declares metadata an instance variable, so mypy refuses ClassVar here.
    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 60}  # noqa: RUF012

    default_buttons: ClassVar[tuple[tuple[float, float], ...]] = ((0.5, 0.0),)
    null_space: ClassVar[bool] = False  # null-space inverse kinematics
    large_workspace: ClassVar[bool] = False  # the large target box even without random_target
    max_steps_outside: int = rules.N_STEPS_OUTSIDE_SAFETY_SPHERE  # may be lowered on an instance (tests)

    def __init__(
        self,
        continuous: bool | None = False,
        action_joints: bool = False,
        random_target: bool = False,
        shape_reward: bool = False,
        action_repeat: int = 1,
        multi_view: bool = False,
        force_down: bool = True,
        max_distance: float = 0.8,
        max_steps: int = 1000,
        arm_state: str = "ground_truth",
        relative_ground_truth: bool = True,
        render_mode: str | None = None,
        render_size: int = 224,
    ) -> None:
        _check_arguments(action_repeat, max_distance, max_steps, arm_state, render_mode, render_size)
        self.action_mode: Literal["discrete", "cartesian", "joints"] = (
            "joints" if action_joints else "cartesian" if continuous else "discrete"
        )
        self.continuous = self.action_mode != "discrete"
        self.random_target = random_target
        self.shape_reward = shape_reward
        self.action_repeat = action_repeat
        self.multi_view = multi_view
        self.force_down = force_down
        self.max_distance = max_distance
        self.max_steps = max_steps
        self.arm_state = arm_state
        self.relative_ground_truth = relative_ground_truth
        self.render_mode = render_mode
        self.render_size = render_size
        self.action_space: spaces.Space[Any] = _action_space(self.action_mode)
        self._high = self._observation_high()
        self.observation_space = spaces.Box(-self._high, self._high, dtype=np.float32)

        workspace = LARGE_WORKSPACE if random_target or self.large_workspace else SMALL_WORKSPACE
        self._scene = ArmScene(len(self.default_buttons), workspace, self.null_space)
        self._buttons: Vector = np.array(self.default_buttons, dtype=np.float64)
        self._tally = rules.PressTally(contacts=[0] * len(self.default_buttons))
        self._ticks = 0  # physics steps of the episode
        self._measure = rules.Measure(contact=False, table=False, distance=0.0, far=False)
        try:
            self._load_extras()
            self._settled = self._settle()
        except BaseException:
            self._scene.close()
            raise

    # --- what the variants override -------------------------------------------------------------------------------
    def _load_extras(self) -> None:
        """Load bodies present in every episode (they settle with the arm)."""

    def _clear_episode(self) -> None:
        """Remove what :meth:`_start_episode` added (called before the snapshot is restored)."""

    def _start_episode(self) -> None:
        """Set up an episode after the buttons are placed (before the random initial actions)."""

    def _before_physics(self) -> None:
        """Act on the scene before the physics steps of an agent step."""

    def _sample_buttons(self) -> Vector:
        """:return: random button positions (``random_target``), one (x, y) row per button."""
        offset = self.np_random.uniform(-1.0, 1.0, size=2) * (0.15, 0.3)
        return np.array(self.default_buttons) + offset

    def _rule(self, measure: rules.Measure) -> tuple[float, bool]:
        """:return: the reward and termination of a step, updating ``self._tally``."""
        sparse, terminated = rules.press_rule(self._tally, measure, self.max_steps_outside)
        if not self.shape_reward:
            return sparse, terminated
        return rules.shaped_press_reward(sparse, terminated, measure.distance, self.continuous), terminated

    # --- Gymnasium API ----------------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Observation, dict]:
        """Start an episode.

        :param seed: seeds ``self.np_random`` (same seed, same episode)
        :param options: ``button_position`` (x, y) of the first button, or ``button_positions`` (one per button)
        :return: the observation and the info dict
        """
        super().reset(seed=seed)
        self._clear_episode()
        self._scene.restore(self._settled)
        self._scene.arm.reset_target()
        self._buttons = self._sample_buttons() if self.random_target else np.array(self.default_buttons, dtype=float)
        self._buttons = _placed_buttons(self._buttons, options or {})
        for index, xy in enumerate(self._buttons):
            self._scene.place_button(index, xy)
        self._start_episode()
        for _ in range(N_RANDOM_ACTIONS_AT_INIT):
            self._apply(self._random_move())
            self._scene.step()
        self._ticks = 0
        self._tally = rules.PressTally(contacts=[0] * len(self._buttons))
        self._measure = self._measure_step()
        return self._observe(), self._info()

    def step(self, action: Action) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        move = self._move(action)
        self._before_physics()
        for _ in range(self.action_repeat):
            self._apply(move)
            self._scene.step()
        self._ticks += self.action_repeat
        self._measure = self._measure_step()
        reward, terminated = self._rule(self._measure)
        truncated = not terminated and self._ticks >= self.max_steps
        return self._observe(), float(reward), terminated, truncated, self._info()

    def render(self) -> NDArray[np.uint8] | None:
        """:return: the camera image, a new array each call (None, with a warning, without a render mode)."""
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode: pass render_mode='rgb_array' at construction")
            return None
        return self._scene.render(self.render_size, self.multi_view)

    def close(self) -> None:
        """Disconnect this env's PyBullet client."""
        self._scene.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._scene.close()

    # --- shared machinery -------------------------------------------------------------------------------------------
    @property
    def goal(self) -> Vector:
        """The goal point (x, y, z) of the button to press now."""
        return goal_point(self._buttons[self._tally.goal])

    @property
    def scene(self) -> ArmScene:
        """The PyBullet scene (client id, arm, buttons), for tests and tools."""
        return self._scene

    def _settle(self) -> int:
        """Rest the arm for :data:`SETTLE_STEPS` physics steps; :return: the snapshot every reset restores."""
        arm = self._scene.arm
        arm.reset_pose()
        for _ in range(SETTLE_STEPS):
            if self.action_mode == "joints":
                arm.hold_rest_pose()
            else:
                arm.move_cartesian(np.zeros(3))
            self._scene.step()
        return self._scene.save()

    def _move(self, action: Action) -> Vector:
        """:return: the displacement (Cartesian) or joint deltas of ``action``, with the original's action noise."""
        if self.action_mode == "discrete":
            index = int(np.asarray(action).item())
            return rules.discrete_move(
                index, rules.DELTA_V + self.np_random.normal(0.0, rules.NOISE_STD), self.force_down
            )
        if self.action_mode == "cartesian":
            step = rules.DELTA_V_CONTINUOUS + self.np_random.normal(0.0, rules.NOISE_STD_CONTINUOUS)
            return rules.cartesian_move(np.asarray(action), step, self.force_down)
        step = rules.DELTA_THETA + self.np_random.normal(0.0, rules.NOISE_STD_JOINTS)
        return rules.joint_move(np.asarray(action), step, ARM_JOINTS)

    def _random_move(self) -> Vector:
        """:return: one of the random initial moves: ±0.03 m along one axis (discrete), 0.0035 m in a random
        direction (Cartesian) or Gaussian joint deltas of std 0.1 rad (joints)."""
        if self.action_mode == "discrete":
            move = np.zeros(3)
            move[self.np_random.integers(3)] = rules.DELTA_V * self.np_random.choice((-1.0, 1.0))
            return move
        if self.action_mode == "cartesian":
            direction = self.np_random.normal(size=3)
            return rules.DELTA_V_CONTINUOUS * direction / np.linalg.norm(direction)
        return rules.DELTA_THETA * self.np_random.normal(size=ARM_JOINTS)

    def _apply(self, move: Vector) -> None:
        if self.action_mode == "joints":
            self._scene.arm.move_joints(move, JOINT_POSITION_GAIN)
        else:
            self._scene.arm.move_cartesian(move)

    def _measure_step(self) -> rules.Measure:
        distance = float(np.linalg.norm(self._scene.arm.gripper_position() - self.goal))
        return rules.Measure(
            contact=self._scene.touches_button(self._tally.goal),
            table=self._scene.touches_table(),
            distance=distance,
            far=distance > self.max_distance,
        )

    def _observation_high(self) -> NDArray[np.float32]:
        """:return: the upper bounds of the observation (the lower ones are their negatives)."""
        truth = np.full(3 if self.relative_ground_truth else 6, POSITION_BOUND)
        joints = np.concatenate([np.full(ARM_JOINTS, ANGLE_BOUND), np.full(ARM_JOINTS, VELOCITY_BOUND)])
        parts = {"ground_truth": [truth], "joints": [joints], "joints_position": [truth, joints]}[self.arm_state]
        return np.concatenate(parts).astype(np.float32)

    def _observe(self) -> Observation:
        parts: list[Vector] = []
        if self.arm_state != "joints":
            gripper = self._scene.arm.gripper_position()
            parts.append(gripper - self.goal if self.relative_ground_truth else np.concatenate([gripper, self.goal]))
        if self.arm_state != "ground_truth":
            parts.extend(self._scene.arm.joint_state())
        return np.clip(np.concatenate(parts), -self._high, self._high).astype(np.float32)

    def _info(self) -> dict[str, Any]:
        return {
            "robot_position": self._scene.arm.gripper_position(),
            "target_position": self.goal,
            "is_success": self._tally.pressed,
            "contacts": self._tally.contacts[self._tally.goal],
            "table_contact": self._measure.table,
            "out_of_bounds": self._measure.far,
        }


def _check_arguments(
    action_repeat: int, max_distance: float, max_steps: int, arm_state: str, render_mode: str | None, size: int
) -> None:
    """Fail with one line naming the bad argument and what is allowed."""
    modes = KukaButtonEnv.metadata["render_modes"]
    problems = [
        (render_mode is not None and render_mode not in modes, f"render_mode must be one of {modes} or None"),
        (arm_state not in ARM_STATES, f"arm_state must be one of {', '.join(ARM_STATES)}"),
        (isinstance(size, bool) or not isinstance(size, int) or size < 1, "render_size must be a positive int"),
        (isinstance(action_repeat, bool) or not isinstance(action_repeat, int) or action_repeat < 1,
         "action_repeat must be a positive int"),
        (not max_distance > 0, "max_distance must be positive"),
        (max_steps < 1, "max_steps must be positive"),
    ]  # fmt: skip
    given: dict[str, object] = {"render_mode": render_mode, "arm_state": arm_state, "render_size": size}
    given |= {"action_repeat": action_repeat, "max_distance": max_distance, "max_steps": max_steps}
    for failed, message in problems:
        if failed:
            name = message.split(" ")[0]
            raise ValueError(f"{message}, got {name}={given[name]!r}")


def _action_space(mode: str) -> spaces.Space[Any]:
    if mode == "discrete":
        return spaces.Discrete(rules.N_DISCRETE_ACTIONS)
    return spaces.Box(-1.0, 1.0, shape=(ARM_JOINTS if mode == "joints" else 3,), dtype=np.float32)


def _placed_buttons(buttons: Vector, options: dict[str, Any]) -> Vector:
    """:return: ``buttons`` with the positions of the reset options, checked to lie on the table."""
    buttons = buttons.copy()
    if "button_positions" in options:
        placed = np.asarray(options["button_positions"], dtype=np.float64)
        if placed.shape != buttons.shape:
            raise ValueError(f"button_positions needs {len(buttons)} (x, y) pairs, got {options['button_positions']!r}")
        buttons = placed
    if "button_position" in options:
        buttons[0] = np.asarray(options["button_position"], dtype=np.float64).reshape(2)
    centre, half = np.array(TABLE_POSITION[:2]), np.array(TABLE_HALF_SIZE)
    if np.any(np.abs(buttons - centre) > half):
        raise ValueError(
            f"buttons must stand on the table (x in [-0.25, 1.25], y in [-0.5, 0.5]), got {buttons.tolist()}"
        )
    return buttons
