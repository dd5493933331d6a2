"""SRL losses: each one a module that scores the states of a batch of pairs (o_t, o_t+1), with its own weight and its
own slice of the state (``dims``), as srl-zoo's ``name:weight:dim`` syntax (Raffin et al., 2018).

A loss is configured as a ``_partial_`` ``_target_`` with ``weight``, ``dims`` and its own keywords, and built with
the :class:`LossContext` of the dataset and encoder. ``dims`` is a Python slice ``[start, stop]`` of the state
(negative indices count from the end, null: open end), or null for the whole state: SRL Splits' recipe is
reconstruction and reward on ``[0, -2]`` and inverse dynamics on ``[-2, null]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rlzoo.errors import ConfigError
from rlzoo.srl.networks import ImageDecoder, ImageEncoder


@dataclass(frozen=True)
class Batch:
    """Pairs of consecutive frames: images as float ``(B, 3, H, W)`` in [0, 1]; ground truth standardised."""

    obs: Tensor
    next_obs: Tensor
    actions: Tensor  # (B,) int64 or (B, A) float
    rewards: Tensor  # (B,)
    ground_truth: Tensor  # (B, G)


@dataclass(frozen=True)
class Encoded:
    """The encoder's features (before its last layer) and states for both frames of every pair."""

    features: Tensor
    states: Tensor
    next_features: Tensor
    next_states: Tensor


@dataclass(frozen=True)
class LossContext:
    """What losses need to size their heads: the encoder, the action space, the ground truth, the rewards."""

    state_dim: int
    feature_dim: int
    image_shape: tuple[int, int, int]  # (H, W, 3)
    channels: int
    n_actions: int | None  # discrete actions; None for continuous
    action_dim: int  # number of discrete actions, or size of a continuous action
    ground_truth_dim: int
    positive_reward_fraction: float
    mean_image: np.ndarray | None = None  # (H, W, 3) float in [0, 1]: the mean of the training frames


class SRLLoss(nn.Module):
    """Base of the losses: a weight and the slice of the state the loss sees.

    :param context: sizes of the encoder, actions and ground truth.
    :param weight: factor of this loss in the total.
    :param dims: ``[start, stop]`` slice of the state (Python semantics), or None for the whole state.
    """

    def __init__(self, context: LossContext, weight: float = 1.0, dims: list[int | None] | None = None) -> None:
        super().__init__()
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
            raise ConfigError(f"{type(self).__name__}: weight={weight!r} must be a number ≥ 0")
        self.weight = float(weight)
        self.context = context
        self.slice = _parse_dims(dims, context.state_dim, type(self).__name__)
        self.size = len(range(context.state_dim)[self.slice])

    def part(self, states: Tensor) -> Tensor:
        return states[:, self.slice]

    def forward(self, batch: Batch, encoded: Encoded, encoder: ImageEncoder) -> Tensor:
        raise NotImplementedError


def _parse_dims(dims: Any, state_dim: int, loss: str) -> slice:
    if dims is None:
        return slice(None)
    ok = isinstance(dims, list | tuple) and len(dims) == 2 and all(d is None or type(d) is int for d in dims)
    chosen = slice(*dims) if ok else None
    if chosen is None or len(range(state_dim)[chosen]) == 0:
        raise ConfigError(
            f"{loss}: dims={dims!r} must be a non-empty [start, stop] slice of the {state_dim} state dims "
            "(e.g. [0, -2], [-2, null]) or null for all of them"
        )
    return chosen


def _pair(states: Tensor, next_states: Tensor) -> Tensor:
    return torch.cat([states, next_states], dim=1)


class Reconstruction(SRLLoss):
    """Auto-encoder: per-pixel MSE of o_t and o_t+1 decoded from their states.

    Small moving objects (a target of a few pixels at 64²) weigh little in a plain per-pixel MSE, so the state can
    leave them out at almost no cost. With ``foreground_weight`` w > 0, a pixel that differs from the mean training
    image by more than ``foreground_threshold`` (largest channel difference, in [0, 1]) weighs 1 + w instead of 1;
    the loss is the weighted mean.

    :param foreground_weight: extra weight of the pixels that differ from the mean image (0: plain MSE).
    :param foreground_threshold: the channel difference from the mean image that makes a pixel foreground.
    """

    def __init__(
        self,
        context: LossContext,
        weight: float = 1.0,
        dims: list[int | None] | None = None,
        foreground_weight: float = 0.0,
        foreground_threshold: float = 0.1,
    ) -> None:
        super().__init__(context, weight, dims)
        height, width, _ = context.image_shape
        self.decoder = ImageDecoder(self.size, height, width, context.channels)
        if foreground_weight < 0 or not 0.0 <= foreground_threshold < 1.0:
            raise ConfigError(
                f"{type(self).__name__}: foreground_weight={foreground_weight!r} must be ≥ 0 and "
                f"foreground_threshold={foreground_threshold!r} in [0, 1)"
            )
        if foreground_weight > 0 and context.mean_image is None:
            raise ConfigError(f"{type(self).__name__}: foreground_weight needs the mean image of the training frames")
        self.foreground_weight, self.foreground_threshold = float(foreground_weight), float(foreground_threshold)
        self.mean_image: Tensor
        mean = np.zeros((height, width, 3)) if context.mean_image is None else context.mean_image
        self.register_buffer("mean_image", torch.as_tensor(mean, dtype=torch.float32).permute(2, 0, 1)[None])

    def pixel_weights(self, clean: Tensor) -> Tensor:
        """``(N, 1, H, W)``: 1 + ``foreground_weight`` where a pixel differs from the mean image, else 1."""
        foreground = (clean - self.mean_image).abs().amax(dim=1, keepdim=True) > self.foreground_threshold
        return 1.0 + self.foreground_weight * foreground.float()

    def pixel_loss(self, decoded: Tensor, clean: Tensor) -> Tensor:
        """The (foreground-weighted) mean squared error of decoded images against the clean ones."""
        if self.foreground_weight == 0:
            return F.mse_loss(decoded, clean)
        weights = self.pixel_weights(clean)
        return ((decoded - clean).pow(2) * weights).sum() / (weights.sum() * clean.shape[1])

    def forward(self, batch: Batch, encoded: Encoded, encoder: ImageEncoder) -> Tensor:
        decoded = self.decoder(self.part(torch.cat([encoded.states, encoded.next_states])))
        return self.pixel_loss(decoded, torch.cat([batch.obs, batch.next_obs]))


class Denoising(Reconstruction):
    """Denoising auto-encoder: reconstruct the clean o_t and o_t+1 from images with a fraction of pixels masked.

    :param occlusion: probability that a pixel (all its channels) is set to 0 in the input.
    """

    def __init__(
        self, context: LossContext, weight: float = 1.0, dims: list[int | None] | None = None, occlusion: float = 0.5
    ) -> None:
        super().__init__(context, weight, dims)
        if not 0.0 <= occlusion < 1.0:
            raise ConfigError(f"Denoising: occlusion={occlusion!r} must lie in [0, 1)")
        self.occlusion = occlusion

    def forward(self, batch: Batch, encoded: Encoded, encoder: ImageEncoder) -> Tensor:
        clean = torch.cat([batch.obs, batch.next_obs])
        keep = torch.rand_like(clean[:, :1]) >= self.occlusion
        decoded = self.decoder(self.part(encoder(clean * keep)))
        return self.pixel_loss(decoded, clean)


class VariationalReconstruction(Reconstruction):
    """β-VAE: the state slice is the posterior mean, a linear head on the encoder's features gives its log-variance;
    reconstruction of a sample plus β times the KL divergence to N(0, I), both summed and divided by the pixels.
    With ``foreground_weight`` w, the squared error of a foreground pixel counts 1 + w times (see
    :class:`Reconstruction`).

    :param beta: weight of the KL term (β = 1: the VAE).
    """

    def __init__(
        self,
        context: LossContext,
        weight: float = 1.0,
        dims: list[int | None] | None = None,
        beta: float = 1.0,
        foreground_weight: float = 0.0,
        foreground_threshold: float = 0.1,
    ) -> None:
        super().__init__(context, weight, dims, foreground_weight, foreground_threshold)
        if beta < 0:
            raise ConfigError(f"VariationalReconstruction: beta={beta!r} must be ≥ 0")
        self.beta = beta
        self.log_var = nn.Linear(context.feature_dim, self.size)

    def forward(self, batch: Batch, encoded: Encoded, encoder: ImageEncoder) -> Tensor:
        mean = self.part(torch.cat([encoded.states, encoded.next_states]))
        log_var = self.log_var(torch.cat([encoded.features, encoded.next_features])).clamp(-10.0, 10.0)
        sample = mean + torch.randn_like(mean) * torch.exp(0.5 * log_var)
        clean = torch.cat([batch.obs, batch.next_obs])
        squared = (self.decoder(sample) - clean).pow(2)
        squared = (squared * self.pixel_weights(clean)).sum() if self.foreground_weight > 0 else squared.sum()
        kl = -0.5 * torch.sum(1 + log_var - mean.pow(2) - log_var.exp())
        return (squared + self.beta * kl) / clean.numel()


class InverseDynamics(SRLLoss):
    """Predict a_t from (s_t, s_t+1) with a linear layer: cross-entropy (discrete) or MSE (continuous).

    With ``learn_scale`` the layer's output is multiplied by a learned ``exp(tau)`` (tau from 0). Keypoint states are
    image positions in [-1, 1]: one step moves the robot's keypoint by about 0.05, so a plain linear head needs weights
    of about 100 to be confident, which Adam (a step of about the learning rate per batch) reaches only after tens of
    epochs; until then the validation loss keeps falling while the representation no longer changes, and early
    stopping never ends training. Adam moves a learned log-scale by the same step, so the scale grows exponentially:
    x100 is within reach after about 900 batches instead of some 20,000.

    :param learn_scale: learn a scale of the head's output (off: the original linear head).
    """

    def __init__(
        self,
        context: LossContext,
        weight: float = 2.0,
        dims: list[int | None] | None = None,
        learn_scale: bool = False,
    ) -> None:
        super().__init__(context, weight, dims)
        if not isinstance(learn_scale, bool):
            raise ConfigError(f"{type(self).__name__}: learn_scale={learn_scale!r} must be true or false")
        self.head = nn.Linear(2 * self.size, context.action_dim)
        self.log_scale = nn.Parameter(torch.zeros(()), requires_grad=learn_scale)

    def forward(self, batch: Batch, encoded: Encoded, encoder: ImageEncoder) -> Tensor:
        predicted = self.head(_pair(self.part(encoded.states), self.part(encoded.next_states)))
        if self.log_scale.requires_grad:
            predicted = predicted * self.log_scale.exp()
        if self.context.n_actions is not None:
            return F.cross_entropy(predicted, batch.actions)
        return F.mse_loss(predicted, batch.actions)


class ForwardDynamics(SRLLoss):
    """Predict s_t+1 as s_t + f(s_t, onehot(a_t)) with a linear f: MSE."""

    def __init__(self, context: LossContext, weight: float = 1.0, dims: list[int | None] | None = None) -> None:
        super().__init__(context, weight, dims)
        self.step = nn.Linear(self.size + context.action_dim, self.size)

    def forward(self, batch: Batch, encoded: Encoded, encoder: ImageEncoder) -> Tensor:
        states = self.part(encoded.states)
        predicted = states + self.step(torch.cat([states, _action_features(batch.actions, self.context)], dim=1))
        return F.mse_loss(predicted, self.part(encoded.next_states))


def _action_features(actions: Tensor, context: LossContext) -> Tensor:
    if context.n_actions is not None:
        return F.one_hot(actions, context.n_actions).float()
    return actions


class RewardPrediction(SRLLoss):
    """Classify whether r_t is positive from (s_t, s_t+1) with a linear layer; the two classes are weighted by
    their frequency in the training pairs (positive rewards are rare under a random policy)."""

    def __init__(self, context: LossContext, weight: float = 1.0, dims: list[int | None] | None = None) -> None:
        super().__init__(context, weight, dims)
        self.head = nn.Linear(2 * self.size, 1)
        fraction = min(max(context.positive_reward_fraction, 1e-3), 1 - 1e-3)
        self.pos_weight: Tensor
        self.register_buffer("pos_weight", torch.tensor([(1 - fraction) / fraction]))

    def forward(self, batch: Batch, encoded: Encoded, encoder: ImageEncoder) -> Tensor:
        logits = self.head(_pair(self.part(encoded.states), self.part(encoded.next_states))).squeeze(1)
        target = (batch.rewards > 0).float()
        return F.binary_cross_entropy_with_logits(logits, target, pos_weight=self.pos_weight)


class RoboticPriors(SRLLoss):
    """Jonschkowski & Brock's robotic priors (2015) over the pairs of a batch with the same action.

    :param temporal: weight of temporal coherence, E‖Δs‖².
    :param proportionality: weight of E(‖Δs_j‖ - ‖Δs_i‖)² for equal actions.
    :param causality: weight of E exp(-‖s_j - s_i‖²) for equal actions and different rewards.
    :param repeatability: weight of E exp(-‖s_j - s_i‖²) ‖Δs_j - Δs_i‖² for equal actions.
    """

    def __init__(
        self,
        context: LossContext,
        weight: float = 1.0,
        dims: list[int | None] | None = None,
        temporal: float = 1.0,
        proportionality: float = 1.0,
        causality: float = 1.0,
        repeatability: float = 1.0,
    ) -> None:
        super().__init__(context, weight, dims)
        self.weights = (temporal, proportionality, causality, repeatability)

    def forward(self, batch: Batch, encoded: Encoded, encoder: ImageEncoder) -> Tensor:
        states = self.part(encoded.states)
        delta = self.part(encoded.next_states) - states
        temporal = delta.pow(2).sum(dim=1).mean()
        if self.context.n_actions is not None:
            same = batch.actions[:, None] == batch.actions[None, :]
        else:
            same = torch.cdist(batch.actions, batch.actions) < 1e-3
        same &= ~torch.eye(len(states), dtype=torch.bool, device=states.device)
        if not same.any():
            return self.weights[0] * temporal
        i, j = same.nonzero(as_tuple=True)
        norms = delta.norm(dim=1)
        similarity = torch.exp(-(states[j] - states[i]).pow(2).sum(dim=1))
        proportionality = (norms[j] - norms[i]).pow(2).mean()
        repeatability = (similarity * (delta[j] - delta[i]).pow(2).sum(dim=1)).mean()
        different_reward = batch.rewards[i] != batch.rewards[j]
        causality = similarity[different_reward].mean() if different_reward.any() else states.new_zeros(())
        terms = (temporal, proportionality, causality, repeatability)
        return sum((w * t for w, t in zip(self.weights, terms, strict=True)), states.new_zeros(()))


class GroundTruthRegression(SRLLoss):
    """Supervised: regress the standardised ground truth from the state with a linear layer (MSE)."""

    def __init__(self, context: LossContext, weight: float = 1.0, dims: list[int | None] | None = None) -> None:
        super().__init__(context, weight, dims)
        self.head = nn.Linear(self.size, context.ground_truth_dim)

    def forward(self, batch: Batch, encoded: Encoded, encoder: ImageEncoder) -> Tensor:
        return F.mse_loss(self.head(self.part(encoded.states)), batch.ground_truth)
