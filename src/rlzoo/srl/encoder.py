"""The encoder-directory format of ``python -m rlzoo.srl.train``, loading an encoder, and choosing one.

An encoder directory holds::

    encoder.json   what the encoder is: method, kind (its file format, :data:`FORMATS`: cnn or pca), state_dim,
                   image_shape [H, W, 3], network, env_id and env_kwargs of its dataset, dataset path, training
                   summary; written LAST, so a folder with it is a finished encoder
    encoder.pt     the CNN's state_dict (kind cnn; ``torch.load(..., weights_only=True)``)
    pca.npz        mean, components, explained_variance_ratio as plain arrays (kind pca)
    config.yaml    the resolved training config; metrics.json, states.png, losses.csv, losses.png

A checkpoint is chosen as: a path (the folder, or a file in it), or ``latest``: the newest finished encoder of the
method trained on the env, searched under ``./outputs`` and ``./multirun`` (the entrypoints' output folders).
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.utils import get_device
from torch import nn

from rlzoo.confined import load_npz, read_json, read_weights
from rlzoo.errors import ConfigError
from rlzoo.files import atomic_write_text
from rlzoo.precision import resolve_precision, set_precision
from rlzoo.registry import Registered
from rlzoo.srl.dataset import LATEST, SEARCH_DIRS, newest
from rlzoo.srl.networks import ImageEncoder, PCAEncoder, images_to_tensor

METADATA = "encoder.json"
WEIGHTS = "encoder.pt"
PCA = "pca.npz"
ANY_METHOD = "learned"  # srl_model=learned takes an encoder of any method


@dataclass
class Encoder:
    """A loaded encoder: uint8 images ``(N, H, W, 3)`` -> float32 states ``(N, state_dim)``."""

    path: Path
    metadata: dict[str, Any]
    module: nn.Module
    device: torch.device

    @property
    def method(self) -> str:
        return str(self.metadata["method"])

    @property
    def state_dim(self) -> int:
        return int(self.metadata["state_dim"])

    @property
    def image_shape(self) -> tuple[int, int, int]:
        height, width, channels = self.metadata["image_shape"]
        return int(height), int(width), int(channels)

    def encode(self, observations: np.ndarray) -> np.ndarray:
        """States of a batch of images, in one forward pass.

        :param observations: uint8 ``(N, H, W, 3)`` images of the encoder's size.
        :return: float32 ``(N, state_dim)``.
        """
        if observations.shape[1:] != self.image_shape:
            raise ValueError(
                f"encoder {self.path} takes images of shape (N, {', '.join(map(str, self.image_shape))}), "
                f"got {observations.shape}"
            )
        with torch.no_grad():
            states = self.module(images_to_tensor(observations, self.device))
        return states.cpu().numpy().astype(np.float32)


FORMATS: dict[str, type[EncoderFormat]] = {}


class EncoderFormat(Registered, ABC, registry=FORMATS):
    """How an encoder's module is written to and read from its folder; a subclass with a ``name`` (recorded as
    ``kind`` in ``encoder.json``, named by an encoder kind's ``format``) is registered in :data:`FORMATS`."""

    @staticmethod
    @abstractmethod
    def save(folder: Path, module: nn.Module) -> None:
        """Write the module's numbers into ``folder`` (no pickle)."""

    @staticmethod
    @abstractmethod
    def load(folder: Path, metadata: dict[str, Any]) -> nn.Module:
        """The module of the encoder in ``folder``, whose ``encoder.json`` says ``metadata``."""


class CNNFormat(EncoderFormat):
    """An :class:`~rlzoo.srl.networks.ImageEncoder`: its network in ``encoder.json``, its ``state_dict`` in
    ``encoder.pt`` (read with ``weights_only=True``)."""

    name = "cnn"

    @staticmethod
    def save(folder: Path, module: nn.Module) -> None:
        torch.save({k: v.cpu() for k, v in module.state_dict().items()}, folder / WEIGHTS)

    @staticmethod
    def load(folder: Path, metadata: dict[str, Any]) -> nn.Module:
        height, width, _ = metadata["image_shape"]
        module = ImageEncoder(height, width, int(metadata["state_dim"]), **metadata["network"])
        module.load_state_dict(torch.load(read_weights(folder, WEIGHTS), map_location="cpu", weights_only=True))
        return module


class PCAFormat(EncoderFormat):
    """A :class:`~rlzoo.srl.networks.PCAEncoder`: its mean and components as plain arrays in ``pca.npz``."""

    name = "pca"

    @staticmethod
    def save(folder: Path, module: nn.Module) -> None:
        assert isinstance(module, PCAEncoder)
        with (folder / PCA).open("wb") as stream:
            np.savez(stream, mean=module.mean.cpu().numpy(), components=module.components.cpu().numpy())

    @staticmethod
    def load(folder: Path, metadata: dict[str, Any]) -> nn.Module:
        height, width, _ = metadata["image_shape"]
        arrays = load_npz(folder, PCA)
        return PCAEncoder(arrays["mean"], arrays["components"], (height, width, 3))


def encoder_format(name: Any) -> type[EncoderFormat]:
    """The registered file format ``name``, or one :class:`ConfigError` listing the formats."""
    if name not in FORMATS:
        raise ConfigError(f"encoder format {name!r} is unknown; known: {', '.join(FORMATS)}")
    return FORMATS[name]


def save_encoder(folder: Path, metadata: dict[str, Any], module: nn.Module) -> None:
    """Write the module in its format (``metadata["kind"]``), then ``encoder.json``, which marks the encoder
    finished."""
    encoder_format(metadata["kind"]).save(folder, module)
    atomic_write_text(folder / METADATA, json.dumps({**metadata, "created": time.time()}, indent=2) + "\n")


def encoder_folder(checkpoint: str | Path) -> Path:
    """The encoder folder of a path (the folder, or a file in it), checked to hold a finished encoder."""
    path = Path(checkpoint).expanduser()
    folder = path.parent if path.is_file() else path
    if not (folder / METADATA).is_file():
        raise ConfigError(
            f"srl_model.checkpoint={checkpoint}: not an encoder (no {folder / METADATA}); pass the folder "
            f"python -m rlzoo.srl.train wrote, or {LATEST}"
        )
    return folder.resolve()


def read_metadata(folder: Path) -> dict[str, Any]:
    values = read_json(folder, METADATA)
    if not isinstance(values, dict):
        raise ConfigError(f"{folder / METADATA} does not hold a mapping")
    return values


def load_encoder(checkpoint: str | Path, device: str | torch.device = "cpu", precision: str = "fp32") -> Encoder:
    """Load a finished encoder (weights with ``weights_only=True``) in eval mode on ``device``, its image network at
    ``precision`` (``fp32``, ``bf16``, ``auto``: :mod:`rlzoo.precision`); in bf16 its batch norms are folded into its
    convs (about 1.15 x faster; in fp32 the states stay bit for bit those its metrics were measured on)."""
    folder = encoder_folder(checkpoint)
    metadata = read_metadata(folder)
    module = encoder_format(metadata["kind"]).load(folder, metadata)
    torch_device = get_device(device)
    resolved = resolve_precision(precision, torch_device.type, "hardware.precision")
    if resolved == "bf16" and isinstance(module, ImageEncoder):
        module.fuse_for_inference()  # its floats change anyway; in fp32 the states stay those it was measured on
    set_precision(module, resolved)
    return Encoder(folder, metadata, module.to(torch_device).eval(), torch_device)


def find_encoder(
    checkpoint: str | Path, method: str, env_id: str | None, search_dirs: Iterable[str | Path] = SEARCH_DIRS
) -> Path:
    """Resolve a checkpoint choice to an encoder folder (see the module docstring)."""
    if str(checkpoint) != LATEST:
        return encoder_folder(checkpoint)
    if env_id is None:
        raise ConfigError(f"srl_model.checkpoint={LATEST} needs the env id to choose an encoder")

    def fits(content: dict[str, Any]) -> bool:
        return content.get("env_id") == env_id and method in (ANY_METHOD, content.get("method"))

    found = newest(METADATA, fits, search_dirs)
    if found is None:
        which = "encoder" if method == ANY_METHOD else f"{method} encoder"
        where = " and ".join(f"./{d}" for d in map(str, search_dirs))
        raise ConfigError(
            f"srl_model.checkpoint={LATEST}: no {which} trained on {env_id} under {where}; collect a dataset of "
            f"{env_id} (python -m rlzoo.collect env=...), train one (python -m rlzoo.srl.train "
            f"srl_model={method} dataset=<its folder>), or pass srl_model.checkpoint=<encoder dir>"
        )
    return found


def check_encoder(
    folder: Path, metadata: dict[str, Any], method: str, env_id: str | None, image_size: tuple[int, int] | None
) -> None:
    """Refuse an encoder of another method, another env or another image size than the run's."""
    if method not in (ANY_METHOD, metadata["method"]):
        raise ConfigError(
            f"encoder {folder} is a {metadata['method']} encoder, not {method}: use srl_model={metadata['method']} "
            f"(or srl_model={ANY_METHOD}) with it"
        )
    if env_id is not None and metadata["env_id"] != env_id:
        raise ConfigError(
            f"encoder {folder} was trained on frames of {metadata['env_id']}, not {env_id}: train one on {env_id} "
            "or choose the env it was trained on"
        )
    height, width, _ = metadata["image_shape"]
    if image_size is not None and tuple(image_size) != (height, width):
        raise ConfigError(
            f"encoder {folder} takes {height}x{width} images but the run renders {image_size[0]}x{image_size[1]}: "
            f"set srl_model.height={height} srl_model.width={width}"
        )


def pin_encoder(srl_values: dict[str, Any], env_id: str | None) -> dict[str, Any]:
    """A copy of the ``srl_model`` values with ``checkpoint`` (``latest``, a file, a folder) resolved to one checked
    encoder folder (``checkpoint`` and ``vec_wrapper.checkpoint``), so that the run's config records the encoder it
    trained with and replays use the same one. The values given are not changed.
    """
    method = str(srl_values["name"])
    folder = find_encoder(srl_values["checkpoint"], method, env_id)
    size = (int(srl_values["height"]), int(srl_values["width"]))
    check_encoder(folder, read_metadata(folder), method, env_id, size)
    pinned = {**srl_values, "checkpoint": str(folder)}
    if isinstance(srl_values.get("vec_wrapper"), dict):
        pinned["vec_wrapper"] = {**srl_values["vec_wrapper"], "checkpoint": str(folder)}
    return pinned
