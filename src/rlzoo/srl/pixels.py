"""Raw pixels: the env's ``rgb_array`` render as the observation."""

from __future__ import annotations

import os

import gymnasium as gym
from gymnasium.wrappers import AddRenderObservation, ResizeObservation


def rendered_pixels(env: gym.Env, height: int, width: int) -> gym.Env:
    """Replace the observation with the env's render, resized to ``height`` x ``width`` (uint8, channels last).

    A render that already has that size is not resized.

    :param env: an env made with ``render_mode="rgb_array"``.
    :param height: image height in pixels.
    :param width: image width in pixels.
    :return: the wrapped env.
    """
    if env.render_mode != "rgb_array":
        name = env.spec.id if env.spec else type(env).__name__
        raise ValueError(f"raw pixels need render_mode='rgb_array', got {env.render_mode!r} for {name}")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame-rendered envs: no display needed
    pixels: gym.Env = AddRenderObservation(env, render_only=True)
    if pixels.observation_space.shape[:2] != (height, width):  # type: ignore[index]
        pixels = ResizeObservation(pixels, (height, width))
    return pixels
