"""Networks of state representation learning: the image encoder (the original's small CNN), its decoder, PCA.

Every encoder maps a batch of uint8 images ``(N, H, W, 3)`` (channels last, as envs render them) to float states
``(N, state_dim)``; :func:`images_to_tensor` is the one place that turns images into network input.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from rlzoo.errors import ConfigError
from rlzoo.precision import autocast

# The original normalised its 224 x 224 inputs with ImageNet's statistics.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
DOWNSAMPLING = 16  # the encoder halves the image 4 times; the decoder doubles it 4 times


def images_to_tensor(images: np.ndarray | torch.Tensor, device: torch.device | str = "cpu") -> torch.Tensor:
    """uint8 ``(N, H, W, 3)`` images as float ``(N, 3, H, W)`` in [0, 1]."""
    tensor = torch.as_tensor(images, device=device)
    return tensor.permute(0, 3, 1, 2).float().div_(255.0)


def encode_in_batches(
    module: nn.Module, images: np.ndarray, device: torch.device | str = "cpu", batch: int = 256
) -> np.ndarray:
    """The states of many uint8 images, ``batch`` at a time, without gradients."""
    with torch.no_grad():
        parts = [module(images_to_tensor(images[i : i + batch], device)).cpu() for i in range(0, len(images), batch)]
    return torch.cat(parts).numpy()


def fold_whitening(encoder: ImageEncoder, states: np.ndarray, regulariser: float) -> None:
    """Whiten ``encoder``'s states in place: ZCA, ``W (s - mean)`` with ``W = C^-1/2`` of the covariance ``C`` of
    ``states`` (its own states of the training frames) after adding ``regulariser`` x the largest eigenvalue to every
    eigenvalue, folded into the last linear layer (the module and its saved format stay the same)."""
    values = states.astype(np.float64)
    mean = values.mean(axis=0)
    eigenvalues, vectors = np.linalg.eigh(np.cov(values, rowvar=False))
    floor = regulariser * max(float(eigenvalues.max()), np.finfo(np.float64).tiny)
    whitening = vectors @ np.diag(1.0 / np.sqrt(np.clip(eigenvalues, 0.0, None) + floor)) @ vectors.T
    with torch.no_grad():
        weight, bias = encoder.head.weight.double().cpu().numpy(), encoder.head.bias.double().cpu().numpy()
        encoder.head.weight.copy_(torch.as_tensor(whitening @ weight))
        encoder.head.bias.copy_(torch.as_tensor(whitening @ (bias - mean)))


def check_image_size(height: int, width: int) -> None:
    """The encoder and decoder need sides that are multiples of 16 (16, 32, 64, ..., 224)."""
    if height < DOWNSAMPLING or width < DOWNSAMPLING or height % DOWNSAMPLING or width % DOWNSAMPLING:
        raise ConfigError(
            f"image size {height}x{width}: the SRL encoder needs sides that are multiples of {DOWNSAMPLING} "
            "(16, 32, 64, 128, 224 ...)"
        )


class ImageEncoder(nn.Module):
    """The S-RL Toolbox's encoder: 7x7/2 conv + BN + ReLU + max-pool, two 3x3 conv + BN + ReLU + max-pool blocks,
    then a linear layer to the state (Raffin et al., 2018; srl-zoo's ``CustomCNN``).

    With ``keypoints`` the state is instead ``keypoints`` image positions (a deep spatial autoencoder's feature points,
    Finn et al., 2016): after the first conv and one 3x3 block at a quarter of the image size, a 1x1 conv makes one map
    per keypoint and a spatial softmax turns each map into its expected (x, y) in [-1, 1]. The state is those
    coordinates, ``(x1, y1, x2, y2, ...)``, so ``state_dim`` is ``2 * keypoints``; the last layer stays (frozen as
    the identity) so that whitening can fold into it.

    :param height: input image height (a multiple of 16).
    :param width: input image width (a multiple of 16).
    :param state_dim: size of the state.
    :param channels: channels of every conv layer (64 in the original).
    :param keypoints: 0 for the original encoder, else the number of keypoints.

    ``precision`` (``fp32`` or ``bf16``, :mod:`rlzoo.precision`) is the conv trunk's; the keypoint maps, the spatial
    softmax and the last layer always run in fp32, so that a whitened state keeps its small-variance directions.
    """

    def __init__(self, height: int, width: int, state_dim: int, channels: int = 64, keypoints: int = 0) -> None:
        super().__init__()
        self.precision = "fp32"
        check_image_size(height, width)
        check_keypoints(keypoints, state_dim)
        self.image_shape = (height, width, 3)
        self.state_dim = state_dim
        self.mean: torch.Tensor
        self.std: torch.Tensor
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1))
        stem = [
            nn.Conv2d(3, channels, kernel_size=7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
        ]
        if keypoints:
            self.features = nn.Sequential(
                *stem, *_conv_block(channels)[:-1], nn.Conv2d(channels, keypoints, kernel_size=1), SpatialSoftmax()
            )
            self.feature_dim = 2 * keypoints
            self.fp32_layers = 2  # the 1x1 conv to keypoint maps and the spatial softmax
        else:
            self.features = nn.Sequential(*stem, *_conv_block(channels), *_conv_block(channels), nn.Flatten())
            self.feature_dim = channels * (height // DOWNSAMPLING) * (width // DOWNSAMPLING)
            self.fp32_layers = 1  # the flatten
        self.head = nn.Linear(self.feature_dim, state_dim)
        if keypoints:  # the state is the keypoints: the head is a frozen identity until whitening folds into it
            with torch.no_grad():
                self.head.weight.copy_(torch.eye(state_dim))
                self.head.bias.zero_()
            self.head.requires_grad_(False)

    def forward_features(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:param pixels: float ``(N, 3, H, W)`` in [0, 1]. :return: (features before the last layer, states)."""
        trunk = len(self.features) - self.fp32_layers
        with autocast(self.precision, pixels.device.type):
            hidden = self.features[:trunk]((pixels - self.mean) / self.std)
        with torch.autocast(pixels.device.type, enabled=False):
            features = self.features[trunk:](hidden.float())
            return features, self.head(features)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.forward_features(pixels)[1]

    def fuse_for_inference(self) -> ImageEncoder:
        """Fold every batch norm into the conv before it (eval mode, the same states to float rounding, about 1.2 x
        faster on a CPU); for loaded encoders only: the module can no longer train or load a saved ``state_dict``."""
        self.eval()
        layers = self.features
        for i in range(len(layers) - 1):
            conv, norm = layers[i], layers[i + 1]
            if isinstance(conv, nn.Conv2d) and isinstance(norm, nn.BatchNorm2d):
                layers[i] = fuse_conv_bn_eval(conv, norm)
                layers[i + 1] = nn.Identity()
        return self


def check_keypoints(keypoints: object, state_dim: int) -> None:
    """``keypoints`` is 0 (off) or a positive int with ``state_dim == 2 * keypoints``."""
    if isinstance(keypoints, bool) or not isinstance(keypoints, int) or keypoints < 0:
        raise ConfigError(
            f"srl_model.network.keypoints={keypoints!r}; allowed: 0 (the original encoder) or a positive int"
        )
    if keypoints and state_dim != 2 * keypoints:
        raise ConfigError(
            f"srl_model.network.keypoints={keypoints} gives a state of {2 * keypoints} coordinates, but "
            f"srl_model.state_dim={state_dim}; set srl_model.state_dim={2 * keypoints}"
        )


class SpatialSoftmax(nn.Module):
    """``(N, K, H, W)`` maps to ``(N, 2K)``: each map's softmax over its pixels, and the expected (x, y) of that
    distribution on a grid from -1 to 1, interleaved ``(x1, y1, x2, y2, ...)``."""

    def forward(self, maps: torch.Tensor) -> torch.Tensor:
        batch, count, height, width = maps.shape
        weights = torch.softmax(maps.flatten(2), dim=-1).view(batch, count, height, width)
        xs = torch.linspace(-1.0, 1.0, width, device=maps.device, dtype=maps.dtype)
        ys = torch.linspace(-1.0, 1.0, height, device=maps.device, dtype=maps.dtype)
        expected_x = (weights.sum(dim=2) * xs).sum(dim=-1)
        expected_y = (weights.sum(dim=3) * ys).sum(dim=-1)
        return torch.stack([expected_x, expected_y], dim=-1).flatten(1)


def _conv_block(channels: int) -> list[nn.Module]:
    return [
        nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(channels),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=2, stride=2),
    ]


class ImageDecoder(nn.Module):
    """States back to images: a linear layer to a ``channels x H/16 x W/16`` map, then four 2x upsampling blocks.

    :param state_dim: size of the (slice of the) state it decodes.
    :param height: output image height.
    :param width: output image width.
    :param channels: channels of the hidden maps.

    ``precision`` (``fp32`` or ``bf16``, :mod:`rlzoo.precision`) is the upsampling blocks'; the last sigmoid and the
    images are fp32.
    """

    def __init__(self, state_dim: int, height: int, width: int, channels: int = 64) -> None:
        super().__init__()
        self.precision = "fp32"
        check_image_size(height, width)
        self.grid = (channels, height // DOWNSAMPLING, width // DOWNSAMPLING)
        self.linear = nn.Linear(state_dim, int(np.prod(self.grid)))
        layers: list[nn.Module] = []
        for _ in range(3):
            layers += [
                nn.ConvTranspose2d(channels, channels, kernel_size=4, stride=2, padding=1),
                nn.BatchNorm2d(channels),
                nn.ReLU(inplace=True),
            ]
        layers += [nn.ConvTranspose2d(channels, 3, kernel_size=4, stride=2, padding=1), nn.Sigmoid()]
        self.upsample = nn.Sequential(*layers)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        """:return: float ``(N, 3, H, W)`` images in [0, 1]."""
        hidden = torch.relu(self.linear(states)).view(-1, *self.grid)
        with autocast(self.precision, states.device.type):
            logits = self.upsample[:-1](hidden)
        return self.upsample[-1](logits.float())


class PCAEncoder(nn.Module):
    """A fitted PCA as a torch module: ``(pixels - mean) @ components.T`` on flattened [0, 1] images.

    :param mean: ``(H * W * 3,)`` mean image (channels last, flattened).
    :param components: ``(state_dim, H * W * 3)`` principal axes.
    :param image_shape: ``(H, W, 3)``.
    """

    def __init__(self, mean: np.ndarray, components: np.ndarray, image_shape: tuple[int, int, int]) -> None:
        super().__init__()
        self.image_shape = image_shape
        self.state_dim = int(components.shape[0])
        self.mean: torch.Tensor
        self.components: torch.Tensor
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("components", torch.as_tensor(components, dtype=torch.float32))

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        flat = pixels.permute(0, 2, 3, 1).reshape(pixels.shape[0], -1)  # back to channels-last order
        return (flat - self.mean) @ self.components.T
