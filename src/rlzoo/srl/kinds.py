"""Encoder kinds: how ``python -m rlzoo.srl.train`` makes an encoder of ``srl_model.kind=<name>`` from a dataset.

A kind is one :class:`EncoderKind` subclass (registered by being defined: :data:`ENCODER_KINDS`) and a method is one
YAML file naming it (``conf/srl_model/<method>.yaml``: ``kind: <name>``). The kind says which recipe keys it reads,
whether its states may be whitened, and makes the module from the dataset; the trainer never switches on a kind's
name. A kind names the file format its encoders are saved and loaded in (:class:`rlzoo.srl.encoder.EncoderFormat`:
``cnn``, an :class:`~rlzoo.srl.networks.ImageEncoder`'s weights; ``pca``, plain arrays).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from sklearn.decomposition import PCA
from torch import nn

from rlzoo.config import instantiate
from rlzoo.errors import ConfigError
from rlzoo.registry import Registered
from rlzoo.srl.dataset import Dataset
from rlzoo.srl.encoder import CNNFormat, EncoderFormat, PCAFormat
from rlzoo.srl.losses import LossContext, SRLLoss
from rlzoo.srl.networks import ImageEncoder, PCAEncoder
from rlzoo.srl.trainer import Losses, PairData, TrainingSettings, fit

# Every kind of encoder by its name (srl_model.kind), filled by EncoderKind's subclasses as they are defined.
ENCODER_KINDS: dict[str, type[EncoderKind]] = {}
COMMON_KEYS = frozenset({"name", "kind", "state_dim"})


@dataclass(frozen=True)
class EncoderData:
    """What a kind makes its encoder from: the dataset, its training and validation pairs (first frames), the
    ground truth the metrics read, and where and how to train."""

    dataset: Dataset
    train_pairs: np.ndarray
    val_pairs: np.ndarray
    ground_truth: np.ndarray
    device: Any
    seed: int
    progress_bar: bool
    run_dir: Path


class EncoderKind(Registered, ABC, registry=ENCODER_KINDS):
    """One kind of encoder: subclass it with a ``name`` and the recipe ``keys`` it reads (beyond name, kind and
    state_dim), and :meth:`make` its module; the subclass is registered in :data:`ENCODER_KINDS` by its name.

    :param recipe: the method's recipe (``rlzoo.srl.train.Recipe``: state_dim, network, losses, training).
    """

    keys: ClassVar[frozenset[str]] = frozenset()
    images: ClassVar[bool] = True  # reads images through an ImageEncoder (its image size is checked)
    whitens: ClassVar[bool] = True  # its states may be whitened (folded into an ImageEncoder's last layer)
    trained: ClassVar[bool] = True  # learns from the dataset (recorded in encoder.json)
    format: ClassVar[type[EncoderFormat]] = CNNFormat  # how its encoders are saved and loaded

    def __init__(self, recipe: Any) -> None:
        self.recipe = recipe

    @classmethod
    def allowed_keys(cls) -> frozenset[str]:
        return COMMON_KEYS | cls.keys

    @classmethod
    def check(cls, recipe: Any) -> None:
        """Refuse a recipe this kind cannot make, before any dataset is read (the pipeline plans with it)."""
        return None  # most kinds have nothing more to check

    def prepare(self, data: EncoderData) -> None:
        """Check and build what training needs before the run dir is written (a bad loss fails here)."""
        return None  # most kinds need nothing before

    @abstractmethod
    def make(self, data: EncoderData) -> tuple[nn.Module, dict[str, Any]]:
        """The encoder's module (trained when the kind trains) and its training summary (``srl/<key>`` metrics)."""


def encoder_kind(name: Any) -> type[EncoderKind]:
    """The registered kind ``name``, or one :class:`ConfigError` listing the kinds."""
    if name not in ENCODER_KINDS:
        raise ConfigError(f"srl_model.kind={name!r}; allowed: {', '.join(ENCODER_KINDS)}")
    return ENCODER_KINDS[name]


def image_encoder(recipe: Any, data: EncoderData) -> ImageEncoder:
    """The recipe's image encoder for the dataset's frame size (its seeded initialisation)."""
    height, width = data.dataset.images.shape[1:3]
    return ImageEncoder(height, width, recipe.state_dim, **recipe.network).to(data.device)


class CNNKind(EncoderKind):
    """A CNN (or keypoint) encoder trained by the recipe's losses (``losses``, ``training``)."""

    name = "cnn"
    keys = frozenset({"network", "losses", "training"})

    @classmethod
    def check(cls, recipe: Any) -> None:
        if not recipe.losses:
            raise ConfigError("srl_model.losses is empty: a cnn encoder is trained by at least one loss")

    def prepare(self, data: EncoderData) -> None:
        self.losses = build_losses(self.recipe, data.dataset, data.train_pairs, data.ground_truth)

    def make(self, data: EncoderData) -> tuple[nn.Module, dict[str, Any]]:
        module = image_encoder(self.recipe, data)
        training: TrainingSettings = self.recipe.training
        truth, pairs = data.ground_truth, data.train_pairs
        mean, std = truth[pairs].mean(0), truth[pairs].std(0)
        standard = (truth - mean) / np.where(std > 0, std, 1.0)
        dataset = data.dataset
        pair_data = PairData(dataset.images, dataset.actions, dataset.rewards, standard, data.device)
        history = fit(
            module, self.losses.to(data.device), pair_data, pairs, data.val_pairs, training,
            seed=data.seed, progress_bar=data.progress_bar,
        )  # fmt: skip
        history.write_csv(data.run_dir / "losses.csv")
        history.plot(data.run_dir / "losses.png", f"{self.recipe.name}: losses per epoch")
        summary = {
            "best_epoch": history.best_epoch,
            "val_loss": history.best_val_loss,
            "epochs": len(history.rows),
            "stopped_early": history.stopped_early,
        }
        return module, summary


def build_losses(recipe: Any, dataset: Dataset, train_pairs: np.ndarray, ground_truth: np.ndarray) -> Losses:
    """The recipe's losses (``srl_model.losses``: ``_target_`` nodes) made for this dataset's shapes."""
    height, width = dataset.images.shape[1:3]
    probe = ImageEncoder(height, width, recipe.state_dim, **recipe.network)
    discrete = dataset.discrete_actions
    context = LossContext(
        state_dim=recipe.state_dim,
        feature_dim=probe.feature_dim,
        image_shape=(height, width, 3),
        channels=int(recipe.network.get("channels", 64)),
        n_actions=int(dataset.actions.max()) + 1 if discrete else None,
        action_dim=int(dataset.actions.max()) + 1 if discrete else int(dataset.actions.shape[1]),
        ground_truth_dim=int(ground_truth.shape[1]),
        positive_reward_fraction=float(np.mean(dataset.rewards[train_pairs] > 0)),
        mean_image=_mean_image(dataset.images, train_pairs),
    )
    built: dict[str, SRLLoss] = {}
    for name, node in recipe.losses.items():
        try:
            loss = instantiate(node)(context)
        except ConfigError:
            raise
        except Exception as error:  # an unknown keyword, a bad _target_ (Hydra wraps them)
            raise ConfigError(f"srl_model.losses.{name}: {error}") from None
        if not isinstance(loss, SRLLoss):
            raise ConfigError(f"srl_model.losses.{name}: {type(loss).__name__} is not an rlzoo.srl.losses loss")
        built[name] = loss
    return Losses(built)


def _mean_image(images: np.ndarray, frames: np.ndarray, limit: int = 2000) -> np.ndarray:
    """The mean of (at most ``limit``, evenly spaced) training frames as ``(H, W, 3)`` floats in [0, 1]."""
    chosen = frames[np.linspace(0, len(frames) - 1, min(limit, len(frames))).astype(int)]
    return images[chosen].mean(axis=0, dtype=np.float64) / 255.0


class RandomKind(EncoderKind):
    """Random features: the CNN frozen at its seeded initialisation; nothing is trained."""

    name = "random"
    keys = frozenset({"network"})
    trained = False

    def make(self, data: EncoderData) -> tuple[nn.Module, dict[str, Any]]:
        return image_encoder(self.recipe, data), {}


class PCAKind(EncoderKind):
    """The principal components of the training frames' pixels (randomized SVD, seeded)."""

    name = "pca"
    images = False
    whitens = False
    format = PCAFormat

    def make(self, data: EncoderData) -> tuple[nn.Module, dict[str, Any]]:
        pairs = data.train_pairs
        images = data.dataset.images[np.union1d(pairs, pairs + 1)]
        flat = images.reshape(len(images), -1).astype(np.float32) / 255.0
        state_dim = self.recipe.state_dim
        if state_dim > min(flat.shape):
            limit = min(flat.shape)
            raise ConfigError(
                f"srl_model.state_dim={state_dim}: a PCA of {len(flat)} frames has at most {limit} components"
            )
        pca = PCA(n_components=state_dim, svd_solver="randomized", random_state=data.seed).fit(flat)
        return PCAEncoder(pca.mean_, pca.components_, (images.shape[1], images.shape[2], 3)), {}
