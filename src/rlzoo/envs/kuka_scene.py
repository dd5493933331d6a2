"""The scene of the arm tasks in its own DIRECT PyBullet client: floor, table, the Kuka arm, buttons and cameras.

Constants are the S-RL Toolbox's (``kuka_button_gym_env.py``); the button is built here: a green pedestal with a
coloured cap, sized so that the goal point :data:`GOAL_HEIGHT` above its base is where the gripper position lies when
the fingers rest on the cap.
"""

from __future__ import annotations

import os

import numpy as np
from numpy.typing import NDArray

from rlzoo.envs import kuka_camera as camera
from rlzoo.envs.kuka_arm import SMALL_WORKSPACE, KukaArm, Workspace
from rlzoo.envs.kuka_pybullet import data_path, p

TIMESTEP = 1.0 / 240.0  # seconds per physics step; one physics step per agent step (action_repeat=1)
SOLVER_ITERATIONS = 150
GRAVITY = -10.0
FLOOR_POSITION = (0.0, 0.0, -1.0)
TABLE_POSITION = (0.5, 0.0, -0.82)
TABLE_TOP = -0.2  # z of the table top where the buttons stand (the original's Z_TABLE)
PEDESTAL_RADIUS, PEDESTAL_HEIGHT = 0.1, 0.1
CAP_RADIUS, CAP_HEIGHT = 0.09, 0.03
GOAL_HEIGHT = 0.28  # goal point above the button's base (the original's BUTTON_DISTANCE_HEIGHT)
PEDESTAL_COLOUR = (0.1, 0.6, 0.1, 1.0)
CAP_COLOURS = ((1.0, 0.85, 0.0, 1.0), (0.1, 0.3, 1.0, 1.0))  # first button yellow, second blue
IDENTITY = (0.0, 0.0, 0.0, 1.0)
# The bodies that never move, rendered once per image size and camera (rlzoo.envs.kuka_camera).
STATIC_BODIES = (("plane.urdf", FLOOR_POSITION), ("table/table.urdf", TABLE_POSITION))

Image = camera.Image


def goal_point(button_xy: NDArray[np.float64]) -> NDArray[np.float64]:
    """:return: the goal point (x, y, z) of a button standing on the table at ``button_xy``."""
    return np.array([button_xy[0], button_xy[1], TABLE_TOP + GOAL_HEIGHT])


class ArmScene:
    """Floor, table, arm and ``n_buttons`` buttons in a new DIRECT client, closed by :meth:`close`.

    :param n_buttons: buttons to build (placed with :meth:`place_button`).
    :param workspace: the box of the arm's end-effector target.
    :param null_space: null-space inverse kinematics (see :class:`KukaArm`).
    :param cached_background: render the floor and table once per image size and camera and only the moving bodies
        in each image (the same image, faster: :mod:`rlzoo.envs.kuka_camera`); False renders the whole scene each time.
    """

    def __init__(
        self,
        n_buttons: int = 1,
        workspace: Workspace = SMALL_WORKSPACE,
        null_space: bool = False,
        cached_background: bool = True,
    ) -> None:
        self.client: int = p.connect(p.DIRECT)
        try:
            p.setPhysicsEngineParameter(numSolverIterations=SOLVER_ITERATIONS, physicsClientId=self.client)
            p.setTimeStep(TIMESTEP, physicsClientId=self.client)
            p.setGravity(0.0, 0.0, GRAVITY, physicsClientId=self.client)
            self.floor, self.table = (self.load_urdf(name, position) for name, position in STATIC_BODIES)
            self.buttons = [self._make_button(CAP_COLOURS[i % len(CAP_COLOURS)]) for i in range(n_buttons)]
            self.arm = KukaArm(self.client, workspace, null_space)
        except BaseException:
            self.close()
            raise
        self._views = tuple(c.view_matrix() for c in camera.CAMERAS)
        self._projection = camera.projection_matrix()
        self._background = camera.Background(STATIC_BODIES) if cached_background else None
        if cached_background:
            for uid in (self.floor, self.table):
                camera.hide(self.client, uid)

    @property
    def connected(self) -> bool:
        return self.client >= 0 and bool(p.getConnectionInfo(physicsClientId=self.client)["isConnected"])

    def close(self) -> None:
        """Disconnect the client (safe to call more than once)."""
        if self.connected:
            p.disconnect(physicsClientId=self.client)
        self.client = -1

    def load_urdf(self, name: str, position: tuple[float, float, float] | NDArray[np.float64]) -> int:
        """Load ``pybullet_data``'s ``name`` at ``position``; :return: its body id."""
        path = os.path.join(data_path(), name)
        return int(p.loadURDF(path, [float(v) for v in position], IDENTITY, physicsClientId=self.client))

    def _make_button(self, colour: tuple[float, float, float, float]) -> int:
        """A static pedestal (the base) with the cap as link 0 on a fixed joint."""
        c = self.client
        pedestal = p.createCollisionShape(
            p.GEOM_CYLINDER, radius=PEDESTAL_RADIUS, height=PEDESTAL_HEIGHT, physicsClientId=c
        )
        pedestal_look = p.createVisualShape(
            p.GEOM_CYLINDER,
            radius=PEDESTAL_RADIUS,
            length=PEDESTAL_HEIGHT,
            rgbaColor=PEDESTAL_COLOUR,
            physicsClientId=c,
        )
        cap = p.createCollisionShape(p.GEOM_CYLINDER, radius=CAP_RADIUS, height=CAP_HEIGHT, physicsClientId=c)
        cap_look = p.createVisualShape(
            p.GEOM_CYLINDER, radius=CAP_RADIUS, length=CAP_HEIGHT, rgbaColor=colour, physicsClientId=c
        )
        return int(
            p.createMultiBody(
                baseMass=0.0,
                baseCollisionShapeIndex=pedestal,
                baseVisualShapeIndex=pedestal_look,
                basePosition=(0.5, 0.0, TABLE_TOP + PEDESTAL_HEIGHT / 2),
                linkMasses=[0.0],
                linkCollisionShapeIndices=[cap],
                linkVisualShapeIndices=[cap_look],
                linkPositions=[(0.0, 0.0, (PEDESTAL_HEIGHT + CAP_HEIGHT) / 2)],
                linkOrientations=[IDENTITY],
                linkInertialFramePositions=[(0.0, 0.0, 0.0)],
                linkInertialFrameOrientations=[IDENTITY],
                linkParentIndices=[0],
                linkJointTypes=[p.JOINT_FIXED],
                linkJointAxis=[(0.0, 0.0, 1.0)],
                physicsClientId=c,
            )
        )

    def place_button(self, index: int, xy: NDArray[np.float64]) -> None:
        """Stand button ``index`` on the table at ``xy``."""
        position = (float(xy[0]), float(xy[1]), TABLE_TOP + PEDESTAL_HEIGHT / 2)
        p.resetBasePositionAndOrientation(self.buttons[index], position, IDENTITY, physicsClientId=self.client)

    def step(self) -> None:
        """One physics step (:data:`TIMESTEP` seconds)."""
        p.stepSimulation(physicsClientId=self.client)

    def touches_button(self, index: int) -> bool:
        """:return: whether the arm touched the cap of button ``index`` in the last physics step."""
        contacts = p.getContactPoints(self.buttons[index], self.arm.uid, 0, physicsClientId=self.client)
        return len(contacts) > 0

    def touches_table(self) -> bool:
        """:return: whether the arm touched the table in the last physics step."""
        return len(p.getContactPoints(self.table, self.arm.uid, physicsClientId=self.client)) > 0

    def save(self) -> int:
        """:return: the id of an in-memory snapshot of the whole simulation (see :meth:`restore`)."""
        return int(p.saveState(physicsClientId=self.client))

    def restore(self, state: int) -> None:
        """Return to snapshot ``state`` exactly (positions, velocities, contacts), with the same bodies as then."""
        p.restoreState(stateId=state, physicsClientId=self.client)

    def render(self, size: int, multi_view: bool = False) -> Image:
        """:return: a ``size`` x ``size`` RGB image from the main camera (TinyRenderer), or with ``multi_view`` the
        main and the side camera's images stacked on the channel axis (6 channels)."""
        views = self._views if multi_view else self._views[:1]
        images = [self._image(size, view) for view in views]
        return images[0] if len(images) == 1 else np.concatenate(images, axis=2)

    def _image(self, size: int, view: camera.Matrix) -> Image:
        front = camera.snap(self.client, size, view, self._projection)
        if self._background is None:
            return front[0].copy()
        return self._background.composite(front, size, view, self._projection)
