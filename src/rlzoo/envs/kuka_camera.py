"""Cameras of the arm tasks and their TinyRenderer images, with the bodies that never move rendered once.

The floor and the table never move. They are rendered once per image size and camera, in a PyBullet client of their
own, and hidden in the scene's client; each image then renders only the moving bodies (arm, buttons, objects) and
takes the background's pixel wherever the background is nearer (a depth test). The image is the same pixel for pixel
as a render of the whole scene (``tests/test_kuka_envs.py`` checks it) at a fraction of the cost: most of
TinyRenderer's time goes into filling the large floor and table.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from rlzoo.envs.kuka_pybullet import data_path, p

FOV, NEAR, FAR = 60.0, 0.1, 100.0
IDENTITY = (0.0, 0.0, 0.0, 1.0)

Image = NDArray[np.uint8]
Depth = NDArray[np.float32]
Matrix = tuple[float, ...]


@dataclass(frozen=True)
class Camera:
    """A camera looking at ``target`` from ``distance`` metres, at ``yaw`` and ``pitch`` degrees (z up)."""

    target: tuple[float, float, float]
    distance: float
    yaw: float
    pitch: float

    def view_matrix(self) -> Matrix:
        return tuple(p.computeViewMatrixFromYawPitchRoll(self.target, self.distance, self.yaw, self.pitch, 0.0, 2))


# The original's cameras (``kuka_button_gym_env.py``); the second one is multi_view's.
CAMERAS = (Camera((0.316, -0.2, -0.1), 1.1, 145.0, -36.0), Camera((0.316, 0.316, -0.105), 1.05, 32.0, -13.0))


def projection_matrix() -> Matrix:
    """:return: the projection of square images (field of view 60°)."""
    return tuple(p.computeProjectionMatrixFOV(FOV, 1.0, NEAR, FAR))


def snap(client: int, size: int, view: Matrix, projection: Matrix) -> tuple[Image, Depth]:
    """:return: the RGB image (``size`` x ``size`` x 3, uint8) and depth buffer of client ``client`` (TinyRenderer)."""
    _, _, rgba, depth, _ = p.getCameraImage(
        size, size, view, projection, renderer=p.ER_TINY_RENDERER,
        flags=p.ER_NO_SEGMENTATION_MASK, physicsClientId=client,
    )  # fmt: skip
    rgb = np.asarray(rgba, dtype=np.uint8).reshape(size, size, 4)[:, :, :3]
    return rgb, np.asarray(depth, dtype=np.float32).reshape(size, size)


def hide(client: int, uid: int) -> None:
    """Make body ``uid``'s visual shapes transparent: TinyRenderer then draws nothing of it (physics unchanged)."""
    p.changeVisualShape(uid, -1, rgbaColor=(1.0, 1.0, 1.0, 0.0), physicsClientId=client)


class Background:
    """Images of bodies that never move (``pybullet_data`` URDFs at fixed positions), rendered once per image size
    and camera in a DIRECT client made for it and closed at once.

    :param bodies: (URDF name in ``pybullet_data``, position) of each body.
    """

    def __init__(self, bodies: Sequence[tuple[str, tuple[float, float, float]]]) -> None:
        self.bodies = tuple(bodies)
        self._layers: dict[tuple[int, Matrix], tuple[Image, Depth]] = {}

    def layer(self, size: int, view: Matrix, projection: Matrix) -> tuple[Image, Depth]:
        """:return: the bodies' image and depth buffer from ``view`` at ``size`` pixels a side."""
        key = (size, view)
        if key not in self._layers:
            client = p.connect(p.DIRECT)
            try:
                for name, position in self.bodies:
                    p.loadURDF(os.path.join(data_path(), name), position, IDENTITY, physicsClientId=client)
                self._layers[key] = snap(client, size, view, projection)
            finally:
                p.disconnect(physicsClientId=client)
        return self._layers[key]

    def composite(self, front: tuple[Image, Depth], size: int, view: Matrix, projection: Matrix) -> Image:
        """:return: ``front`` (an image of the other bodies and its depth) over the background, by depth."""
        image, depth = front
        back, back_depth = self.layer(size, view, projection)
        return np.where((depth < back_depth)[:, :, None], image, back)
