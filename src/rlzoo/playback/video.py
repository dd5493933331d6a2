"""The one writer of replay videos: MP4 (H.264) or looping GIF files for ``rlzoo.enjoy``, GIF bytes for the report."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import imageio.v2 as imageio
import numpy as np


def scaled(frames: Sequence[np.ndarray], size: int, *, shrink: bool = False) -> list[np.ndarray]:
    """``frames`` (RGB uint8) resized by an integer factor, nearest pixel: enlarged until the shorter side reaches
    ``size`` (a raw-pixels env renders at the policy's input size), or with ``shrink`` also reduced to about ``size``.
    Sides are cut to even numbers (H.264 needs them)."""
    side = min(frames[0].shape[:2])
    step = max(1, side // size) if shrink else 1
    scale = max(1, size // side) if shrink else max(1, -(-size // side))
    height = (frames[0][::step].shape[0] * scale // 2) * 2
    width = (frames[0][:, ::step].shape[1] * scale // 2) * 2
    return [
        np.ascontiguousarray(f[::step, ::step, :3].repeat(scale, axis=0).repeat(scale, axis=1)[:height, :width])
        for f in frames
    ]


def write_video(path: Path, frames: Sequence[np.ndarray], fps: int, min_size: int = 256) -> Path:
    """Write ``frames`` (RGB uint8) as an MP4 (H.264) or a looping GIF, by ``path``'s suffix, enlarged to at least
    ``min_size`` pixels a side. A GIF shows identical consecutive frames as one longer frame (Pillow merges them);
    the duration is the same."""
    images: list[Any] = scaled(frames, min_size)
    if path.suffix == ".gif":
        imageio.mimsave(path, images, duration=1000 / fps, loop=0)
    else:
        imageio.mimwrite(path, images, fps=fps, codec="libx264", macro_block_size=1)
    return path


def gif_bytes(frames: Sequence[np.ndarray], fps: int = 25, stride: int = 2, size: int = 160) -> bytes:
    """An endless GIF of every ``stride``-th frame, at about ``size`` pixels a side (for pages that embed it)."""
    images: list[Any] = scaled(frames[::stride], size, shrink=True)
    stream = io.BytesIO()
    imageio.mimsave(stream, images, format="GIF", duration=1000 * stride / fps, loop=0)
    return stream.getvalue()
