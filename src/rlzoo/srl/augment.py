"""CNN policies on pixels: DrQ's random shift (Kostrikov et al., 2020; Yarats et al., 2021) and bfloat16 convolutions.

``srl_model.augment: <pixels>`` (raw pixels) gives the CNN policy :class:`ShiftedNatureCNN`, which pads every image by
that many pixels (replicating the border) and crops it back at a random offset per image. SB3 puts the policy in
training mode only for its gradient updates, so the shift applies there and never to the actions of rollouts, tests
or replays. ``hardware.precision`` (``bf16``, ``auto``: :mod:`rlzoo.precision`) runs its conv layers in bfloat16.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
import torch.nn.functional as F
from stable_baselines3.common.torch_layers import NatureCNN
from torch import nn

from rlzoo.errors import ConfigError
from rlzoo.precision import autocast, check_precision, resolve_precision


class RandomShift(nn.Module):
    """Shift each image of a batch by a random whole number of pixels in [-pad, pad] along each axis (the border
    replicated into the gap), in training mode only; the identity in eval mode.

    :param pad: the largest shift in pixels (DrQ: 4 at 84 x 84).
    """

    def __init__(self, pad: int = 4) -> None:
        super().__init__()
        self.pad = pad

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """:param images: float ``(N, C, H, W)``."""
        if not self.training or self.pad == 0:
            return images
        n, _, height, width = images.shape
        pad = self.pad
        padded = F.pad(images, (pad, pad, pad, pad), mode="replicate")
        # Sampling at pixel centres of the padded image: a whole-pixel shift, no interpolation.
        xs = torch.linspace(-1.0, 1.0, width + 2 * pad + 1, device=images.device)[:width] + 1.0 / (width + 2 * pad)
        ys = torch.linspace(-1.0, 1.0, height + 2 * pad + 1, device=images.device)[:height] + 1.0 / (height + 2 * pad)
        grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
        base = torch.stack([grid_x, grid_y], dim=-1).expand(n, height, width, 2)
        steps = torch.tensor([2.0 / (width + 2 * pad), 2.0 / (height + 2 * pad)], device=images.device)
        shift = torch.randint(0, 2 * pad + 1, (n, 1, 1, 2), device=images.device) * steps
        return F.grid_sample(padded, base + shift, mode="nearest", padding_mode="border", align_corners=False)


class ShiftedNatureCNN(NatureCNN):
    """SB3's NatureCNN with :class:`RandomShift` in front (training mode only), its conv layers at ``precision``
    (the last linear layer and the features stay fp32).

    :param pad: the largest shift in pixels (0: none).
    :param precision: ``fp32``, ``bf16`` or ``auto`` (decided on the device of the observations).
    """

    def __init__(
        self,
        observation_space: gym.Space,
        features_dim: int = 512,
        normalized_image: bool = False,
        pad: int = 4,
        precision: str = "fp32",
    ) -> None:
        super().__init__(observation_space, features_dim, normalized_image)
        self.shift = RandomShift(pad)
        self.precision_setting = check_precision(precision, "hardware.precision")

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        device_type = observations.device.type
        with autocast(resolve_precision(self.precision_setting, device_type), device_type):
            hidden = self.cnn(self.shift(observations))
        return self.linear(hidden.float())


def augment_policy_kwargs(augment: Any, policy_family: str, precision: Any = "fp32") -> dict[str, Any]:
    """The policy keywords of ``srl_model.augment`` (pixels of random shift; 0 or null: none) and of
    ``hardware.precision`` for a CNN policy (fp32: SB3's own NatureCNN)."""
    precision = check_precision(precision, "hardware.precision")
    if augment is None or augment == 0:
        if precision == "fp32" or policy_family != "Cnn":
            return {}
        augment = 0
    if isinstance(augment, bool) or not isinstance(augment, int) or augment < 0:
        raise ConfigError(f"srl_model.augment={augment!r} must be a whole number of pixels ≥ 0 (DrQ: 4), or 0 for none")
    if policy_family != "Cnn":
        raise ConfigError(f"srl_model.augment shifts images; this srl_model gives a {policy_family} policy vectors")
    kwargs: dict[str, Any] = {"pad": augment} if precision == "fp32" else {"pad": augment, "precision": precision}
    return {"features_extractor_class": ShiftedNatureCNN, "features_extractor_kwargs": kwargs}


def merge_policy_kwargs(algo_kwargs: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``algo_kwargs`` with the representation's policy keywords added to ``policy_kwargs`` (refusing a clash)."""
    if not extra:
        return algo_kwargs
    policy_kwargs = dict(algo_kwargs.get("policy_kwargs") or {})
    clash = sorted(set(policy_kwargs) & set(extra))
    if clash:
        raise ConfigError(
            f"the representation (srl_model.augment, hardware.precision) sets algo.policy_kwargs.{clash[0]}, which "
            "the algo config sets too"
        )
    return {**algo_kwargs, "policy_kwargs": {**policy_kwargs, **extra}}
