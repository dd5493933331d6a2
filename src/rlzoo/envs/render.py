"""A fast pure-numpy top-down renderer for the MobileRobot arena.

Image orientation (the same at every size): row 0 is the top of the arena (y = 4), the last row its bottom (y = 0);
column 0 is its left side (x = 0), the last column its right side (x = 4). A world point (x, y) lies in the pixel
``(row, col) = (floor((4 - y) * s), floor(x * s))`` with ``s = size / 4`` pixels per metre.

The static background (ground plane and the four coloured walls) is drawn once per size; each frame copies it and
paints the targets and the robot with slice assignments and one precomputed disc mask, so no per-pixel Python runs.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

Colour = tuple[int, int, int]

ARENA_SIZE = 4.0  # the arena is [0, 4]² metres
WALL_THICKNESS = 0.1  # metres: the margin the robot keeps from the border, so it touches a wall but never overlaps it

GROUND: Colour = (128, 128, 128)  # grey ground plane
WALL_Y0: Colour = (255, 0, 0)  # red wall along y = 0 (bottom rows)
WALL_X4: Colour = (0, 0, 0)  # black wall along x = 4 (right columns)
WALL_Y4: Colour = (0, 255, 0)  # green wall along y = 4 (top rows)
WALL_X0: Colour = (0, 0, 255)  # blue wall along x = 0 (left columns)
ROBOT: Colour = (255, 255, 255)  # white robot
TARGET: Colour = (255, 255, 0)  # yellow target (disc or band)
SECOND_TARGET: Colour = (255, 0, 255)  # magenta second target: the original's red would be confused with the red wall


class TopDownRenderer:
    """Draws the arena seen from above into ``size`` x ``size`` x 3 uint8 images.

    :param size: image side in pixels
    :param target_radius: radius of a target disc in metres
    """

    def __init__(self, size: int, target_radius: float = 0.2) -> None:
        if size < 8:
            raise ValueError(f"render_size must be at least 8 pixels, got {size}")
        self.size = size
        self.scale = size / ARENA_SIZE
        self.background = self._draw_background()
        radius_px = target_radius * self.scale
        self._disc_half = max(1, math.ceil(radius_px))
        offsets = np.arange(-self._disc_half, self._disc_half + 1)
        self._disc_mask: NDArray[np.bool_] = (offsets[:, None] ** 2 + offsets[None, :] ** 2) <= max(radius_px, 1.0) ** 2

    def _draw_background(self) -> NDArray[np.uint8]:
        image = np.empty((self.size, self.size, 3), dtype=np.uint8)
        image[:] = GROUND
        wall = max(1, round(WALL_THICKNESS * self.scale))
        image[:, :wall] = WALL_X0
        image[:, -wall:] = WALL_X4
        image[:wall, :] = WALL_Y4
        image[-wall:, :] = WALL_Y0
        image.flags.writeable = False
        return image

    def pixel(self, x: float, y: float) -> tuple[int, int]:
        """:return: the (row, column) of the pixel holding the world point (x, y), clipped to the image."""
        row = min(max(int((ARENA_SIZE - y) * self.scale), 0), self.size - 1)
        col = min(max(int(x * self.scale), 0), self.size - 1)
        return row, col

    def new_frame(self) -> NDArray[np.uint8]:
        """:return: a fresh, writable copy of the static background."""
        return self.background.copy()

    def fill_rect(
        self, image: NDArray[np.uint8], x_min: float, x_max: float, y_min: float, y_max: float, colour: Colour
    ) -> None:
        """Paint the axis-aligned world rectangle [x_min, x_max] x [y_min, y_max] (at least one pixel wide)."""
        s, n = self.scale, self.size
        c0 = min(max(round(x_min * s), 0), n - 1)
        c1 = min(max(round(x_max * s), c0 + 1), n)
        r0 = min(max(round((ARENA_SIZE - y_max) * s), 0), n - 1)
        r1 = min(max(round((ARENA_SIZE - y_min) * s), r0 + 1), n)
        image[r0:r1, c0:c1] = colour

    def fill_vertical_band(self, image: NDArray[np.uint8], x: float, half_width: float, colour: Colour) -> None:
        """Paint a band across the whole arena (between the top and bottom walls) centred on x."""
        wall = WALL_THICKNESS
        self.fill_rect(image, x - half_width, x + half_width, wall, ARENA_SIZE - wall, colour)

    def fill_disc(self, image: NDArray[np.uint8], x: float, y: float, colour: Colour) -> None:
        """Paint the target disc centred on the world point (x, y), cropped at the image border."""
        row, col = self.pixel(x, y)
        h, n = self._disc_half, self.size
        r0, r1, c0, c1 = row - h, row + h + 1, col - h, col + h + 1
        mask = self._disc_mask
        if r0 < 0 or c0 < 0 or r1 > n or c1 > n:  # crop the mask at the image border
            mask = mask[max(0, -r0) : mask.shape[0] - max(0, r1 - n), max(0, -c0) : mask.shape[1] - max(0, c1 - n)]
            r0, c0, r1, c1 = max(r0, 0), max(c0, 0), min(r1, n), min(c1, n)
        image[r0:r1, c0:c1][mask] = colour
