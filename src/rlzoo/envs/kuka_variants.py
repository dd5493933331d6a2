"""The variants of :class:`~rlzoo.envs.kuka_button.KukaButtonEnv`: distractors, two buttons in order, a moving button.

Each overrides only the hooks that differ; their docstrings state the differences from the 1-button task.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rlzoo.envs import kuka_rules as rules
from rlzoo.envs.kuka_button import KukaButtonEnv, Vector
from rlzoo.envs.kuka_pybullet import p
from rlzoo.envs.kuka_scene import TABLE_TOP

DISTRACTORS = ("duck_vhacd.urdf", "lego/lego.urdf", "cube_small.urdf")
N_DISTRACTORS = 10  # draws; those falling near the button are not placed
DISTRACTOR_CLEARANCE = 0.15  # half-width of the square around the button kept free (pedestal radius 0.1 + object)
SPHERE_START = (0.25, -0.2, TABLE_TOP + 0.3)
SPHERE_PUSH_STEP = 10  # the sphere is pushed before this physics step (0-based)
SPHERE_FORCE = 10.0  # newtons, horizontal, for one physics step
BUTTON_SPEED = 0.001  # metres per agent step along y
BUTTON_Y_LIMITS = (-0.3, 0.3)


class KukaRandButtonEnv(KukaButtonEnv):
    """KukaButton with distractors: up to 10 objects (duck, lego brick, cube) drawn on the table away from the
    button at every reset, and a small sphere that rolls once pushed at physics step 10.

    Objects are drawn uniformly in x ∈ 0.5 ± 0.15, y ∈ ±0.3 and skipped within 0.15 of the button on either axis;
    they stand on the table at the start (the original dropped them from 0.1 m and let them settle with the arm).
    Everything else (spaces, rewards, episode end, arguments) is :class:`KukaButtonEnv`'s.

    ## Version History
    - v0: as :class:`KukaButtonEnv`; distractors drawn with the env's seeded generator (the original used numpy's
      global one) and the push applied at the sphere's centre (the original's at the world origin).
    """

    _distractors: list[int]

    def get_state(self) -> None:
        """None: a fresh env holds other distractors, so no saved state continues exactly."""
        return None

    def _load_extras(self) -> None:
        self._distractors = []
        self._sphere = self._scene.load_urdf("sphere_small.urdf", SPHERE_START)

    def _clear_episode(self) -> None:
        for uid in self._distractors:
            p.removeBody(uid, physicsClientId=self._scene.client)
        self._distractors = []

    def _start_episode(self) -> None:
        button = self._buttons[0]
        for _ in range(N_DISTRACTORS):
            name = DISTRACTORS[int(self.np_random.integers(len(DISTRACTORS)))]
            xy = np.array([0.5, 0.0]) + self.np_random.uniform(-1.0, 1.0, size=2) * (0.15, 0.3)
            if np.all(np.abs(xy - button) <= DISTRACTOR_CLEARANCE):
                continue
            self._distractors.append(self._stand_on_table(name, xy))

    def _stand_on_table(self, name: str, xy: Vector) -> int:
        """Load ``name`` with its lowest point just above the table top at ``xy``; :return: its body id."""
        c = self._scene.client
        uid = self._scene.load_urdf(name, (xy[0], xy[1], 1.0))
        bottom = p.getAABB(uid, physicsClientId=c)[0][2]
        top = p.getAABB(self._scene.table, physicsClientId=c)[1][2]
        position = (float(xy[0]), float(xy[1]), 1.0 - bottom + top + 1e-3)
        p.resetBasePositionAndOrientation(uid, position, (0.0, 0.0, 0.0, 1.0), physicsClientId=c)
        return uid

    def _before_physics(self) -> None:
        if not self._ticks <= SPHERE_PUSH_STEP < self._ticks + self.action_repeat:
            return
        force = self.np_random.normal(size=3)
        force[2] = 0.0
        force = np.abs(force / np.linalg.norm(force) * SPHERE_FORCE)  # towards the table's centre
        force[2] = 1.0  # a little lift against friction
        centre = p.getBasePositionAndOrientation(self._sphere, physicsClientId=self._scene.client)[0]
        p.applyExternalForce(
            self._sphere, -1, force.tolist(), centre, p.WORLD_FRAME, physicsClientId=self._scene.client
        )


class Kuka2ButtonEnv(KukaButtonEnv):
    """Two buttons pressed in order: first the yellow one at (0.5, 0.125), then the blue one at (0.5, -0.125).

    The goal point (observation, distance, ``info["target_position"]``) is the first button's until it has 5 contact
    steps, then the second's. ``random_target``: x ∈ 0.5 ± 0.15 for both, y ∈ 0.125 + 0.175·U(0, 1) for the first,
    -0.125 - 0.175·U(0, 1) for the second. The target box is the large one and inverse kinematics uses the null space.

    ## Rewards
    +1 per contact step with the last button only; -1 out of the safety sphere or on the table. ``shape_reward``: +50
    on success, +25 per contact step with the current button (while it has fewer than 5), -250 on table contact, -20
    out of the sphere, else -distance.

    ## Episode End
    Terminated once the last button has 5 contact steps, on table contact, or after 4999 steps in a row outside the
    sphere (the original's off-by-one); truncated after ``max_steps``.

    ## Arguments
    As :class:`KukaButtonEnv`, with other defaults: ``force_down=False``, ``max_distance=2.0``, ``max_steps=1500``.

    ## Version History
    - v0: as :class:`KukaButtonEnv`; ``random_target`` moves both buttons (the original overwrote the first's draw).
    """

    default_buttons: ClassVar[tuple[tuple[float, float], ...]] = ((0.5, 0.125), (0.5, -0.125))
    null_space: ClassVar[bool] = True
    large_workspace: ClassVar[bool] = True

    def __init__(
        self, *, force_down: bool = False, max_distance: float = 2.0, max_steps: int = 1500, **kwargs: Any
    ) -> None:
        super().__init__(force_down=force_down, max_distance=max_distance, max_steps=max_steps, **kwargs)

    def _sample_buttons(self) -> Vector:
        x = 0.5 + 0.15 * self.np_random.uniform(-1.0, 1.0, size=2)
        y = np.array([0.125, -0.125]) + 0.175 * self.np_random.uniform(0.0, 1.0, size=2) * (1.0, -1.0)
        return np.stack([x, y], axis=1)

    def _rule(self, measure: rules.Measure) -> tuple[float, bool]:
        before = self._tally.contacts[self._tally.goal]
        sparse, terminated = rules.two_button_rule(self._tally, measure, self.max_steps_outside)
        if not self.shape_reward:
            return sparse, terminated
        return rules.shaped_two_button_reward(sparse, terminated, measure, before), terminated


class KukaMovingButtonEnv(KukaButtonEnv):
    """The button slides along y at 0.001 m per agent step within [-0.3, 0.3], bouncing at the ends, in a random
    initial direction (per agent step, as the original); the goal point moves with it. Episodes are truncated after
    ``max_steps`` (default 1500) physics steps.

    Everything else is :class:`KukaButtonEnv`'s.

    ## Version History
    - v0: as :class:`KukaButtonEnv`.
    """

    def __init__(self, *, max_steps: int = 1500, **kwargs: Any) -> None:
        super().__init__(max_steps=max_steps, **kwargs)
        self.button_speed = BUTTON_SPEED

    def _start_episode(self) -> None:
        self.button_speed = BUTTON_SPEED * float(self.np_random.choice((-1.0, 1.0)))

    def _before_physics(self) -> None:
        y, self.button_speed = rules.bounce(float(self._buttons[0, 1]), self.button_speed, *BUTTON_Y_LIMITS)
        self._buttons[0, 1] = y
        self._scene.place_button(0, self._buttons[0])
