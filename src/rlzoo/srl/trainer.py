"""Fitting an encoder with weighted SRL losses on pairs of a dataset: Adam, train/validation split, the best model
by validation loss, per-epoch loss curves."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn

from rlzoo.errors import ConfigError
from rlzoo.precision import resolve_precision, set_precision
from rlzoo.progress_lines import PhaseProgress, progress_mode
from rlzoo.schema import at_least, parse
from rlzoo.srl.losses import Batch, Encoded, SRLLoss
from rlzoo.srl.networks import ImageEncoder, images_to_tensor


@dataclass(frozen=True)
class TrainingSettings:
    """How an encoder is trained (the original's defaults: Adam, lr 0.005, batch 32, 30 epochs).

    ``patience``: stop when the validation loss has not improved for this many epochs (None: run every epoch).
    ``min_delta``: with ``patience``, only an epoch that cuts the validation loss by more than this fraction of the last
    counted best counts as an improvement (Keras's ``min_delta``, relative like ``ReduceLROnPlateau``'s rel
    threshold); the weights kept are still those of the lowest validation loss.
    ``min_epochs``: the patience cannot stop training before this many epochs have run (Keras's ``start_from_epoch``,
    Lightning's ``min_epochs``): one noisy early epoch cannot end training; the best epoch is still kept.
    ``max_seconds``: stop after the epoch that ends this many wall seconds after training began (None: no limit).
    ``lr_factor``: multiply the learning rate by this factor after every epoch that does not improve the validation
    loss (torch's ``ReduceLROnPlateau`` with patience 0; None: a constant learning rate).
    ``precision``: the image networks' (encoder trunk, decoders) during training: ``fp32``, ``bf16``, ``auto``
    (:mod:`rlzoo.precision`); states, heads, losses and Adam stay fp32.
    """

    epochs: int = field(metadata=at_least(1))
    batch_size: int = field(metadata=at_least(1))
    learning_rate: float = 0.005
    patience: int | None = field(default=None, metadata=at_least(1))
    min_delta: float = 0.0
    min_epochs: int = field(default=1, metadata=at_least(1))
    max_seconds: float | None = field(default=None, metadata=at_least(1))
    lr_factor: float | None = None
    precision: Literal["fp32", "bf16", "auto"] = "fp32"

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> TrainingSettings:
        """The checked ``srl_model.training`` keys."""
        settings = parse(cls, values, prefix="srl_model.training.")
        if settings.learning_rate <= 0:
            raise ConfigError(f"srl_model.training.learning_rate={settings.learning_rate!r} must be > 0")
        if settings.min_epochs > settings.epochs:
            raise ConfigError(
                f"srl_model.training.min_epochs={settings.min_epochs!r} must be at most "
                f"srl_model.training.epochs={settings.epochs!r}"
            )
        if settings.min_epochs > 1 and settings.patience is None:
            raise ConfigError(
                f"srl_model.training.min_epochs={settings.min_epochs!r} needs srl_model.training.patience (early "
                "stopping): without it every epoch runs"
            )
        if not 0 <= settings.min_delta < 1:
            raise ConfigError(
                f"srl_model.training.min_delta={settings.min_delta!r} must be at least 0 and below 1 (a fraction of "
                "the best validation loss; 0: any improvement counts)"
            )
        if settings.lr_factor is not None and not 0 < settings.lr_factor < 1:
            raise ConfigError(
                f"srl_model.training.lr_factor={settings.lr_factor!r} must be between 0 and 1 (null: a constant "
                "learning rate)"
            )
        return settings


@dataclass(frozen=True)
class PairData:
    """The arrays training draws pairs (t, t + 1) from; ``ground_truth`` standardised for regression."""

    images: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    ground_truth: np.ndarray
    device: torch.device

    def batch(self, indices: np.ndarray) -> Batch:
        actions = torch.as_tensor(self.actions[indices], device=self.device)
        return Batch(
            obs=images_to_tensor(self.images[indices], self.device),
            next_obs=images_to_tensor(self.images[indices + 1], self.device),
            actions=actions if actions.dtype == torch.int64 else actions.float(),
            rewards=torch.as_tensor(self.rewards[indices], device=self.device),
            ground_truth=torch.as_tensor(self.ground_truth[indices], device=self.device, dtype=torch.float32),
        )


@dataclass(frozen=True)
class History:
    """Per-epoch mean losses (``train/<loss>``, ``val/<loss>``, ``train/total``, ``val/total``) and the best epoch."""

    rows: list[dict[str, float]]
    best_epoch: int
    stopped_early: bool = False  # the last epochs did not improve for ``patience`` epochs (stopped by validation)

    @property
    def best_val_loss(self) -> float:
        return self.rows[self.best_epoch - 1]["val/total"]

    def write_csv(self, path: Path) -> None:
        keys = list(self.rows[0])
        lines = [",".join(keys)] + [",".join(f"{row[k]:.6g}" for k in keys) for row in self.rows]
        path.write_text("\n".join(lines) + "\n")

    def plot(self, path: Path, title: str) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        epochs = [row["epoch"] for row in self.rows]
        names = [k.removeprefix("train/") for k in self.rows[0] if k.startswith("train/")]
        figure, axes = plt.subplots(1, len(names), figsize=(3.0 * len(names), 3.0), squeeze=False)
        figure.subplots_adjust(left=0.08, right=0.98, bottom=0.15, top=0.8, wspace=0.35)
        for axis, name in zip(axes[0], names, strict=True):
            for split in ("train", "val"):
                axis.plot(epochs, [row[f"{split}/{name}"] for row in self.rows], marker=".", label=split)
            axis.axvline(self.best_epoch, color="grey", linestyle=":", linewidth=1)
            axis.set(title=name, xlabel="epoch")
        axes[0][0].legend()
        figure.suptitle(title)
        figure.savefig(path, dpi=80)
        plt.close(figure)


def _encode(encoder: ImageEncoder, batch: Batch) -> Encoded:
    """One forward pass over both frames of every pair."""
    features, states = encoder.forward_features(torch.cat([batch.obs, batch.next_obs]))
    n = len(batch.obs)
    return Encoded(features[:n], states[:n], features[n:], states[n:])


class Losses(nn.Module):
    """Named losses (any name, ``forward`` included, which an ``nn.ModuleDict`` would refuse)."""

    def __init__(self, losses: dict[str, SRLLoss]) -> None:
        super().__init__()
        self.names = list(losses)
        self.items = nn.ModuleList(losses.values())

    def named(self) -> list[tuple[str, SRLLoss]]:
        return list(zip(self.names, self.items, strict=True))  # type: ignore[arg-type]


def _losses(losses: Losses, batch: Batch, encoder: ImageEncoder) -> tuple[Tensor, dict[str, float]]:
    encoded = _encode(encoder, batch)
    values = {name: (loss.weight, loss(batch, encoded, encoder)) for name, loss in losses.named()}
    total = sum((weight * value for weight, value in values.values()), encoded.states.new_zeros(()))
    return total, {"total": total.item(), **{name: value.item() for name, (_, value) in values.items()}}


def fit(
    encoder: ImageEncoder,
    losses: Losses,
    data: PairData,
    train_pairs: np.ndarray,
    val_pairs: np.ndarray,
    settings: TrainingSettings,
    *,
    seed: int = 0,
    progress_bar: bool = True,
) -> History:
    """Train ``encoder`` and the losses' heads on ``train_pairs`` (frame indices t of pairs (t, t + 1)); keep the
    encoder weights of the epoch with the lowest validation loss (loaded into ``encoder`` at the end); with
    ``settings.patience``, stop once that many epochs in a row have not improved on it (by ``settings.min_delta``)."""
    precision = resolve_precision(settings.precision, data.device.type, "srl_model.training.precision")
    set_precision(encoder, precision)
    set_precision(losses, precision)
    parameters = [*encoder.parameters(), *losses.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=settings.learning_rate)
    scheduler = None
    if settings.lr_factor is not None:
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=settings.lr_factor, patience=0)
    rng = np.random.default_rng(seed)
    rows: list[dict[str, float]] = []
    best: tuple[float, int, dict[str, Any]] | None = None
    improved: tuple[float, int] | None = None  # the loss and epoch of the last improvement by more than min_delta
    steps = -(-len(train_pairs) // settings.batch_size)
    deadline = None if settings.max_seconds is None else time.monotonic() + settings.max_seconds
    mode = progress_mode("auto" if progress_bar else False)
    with PhaseProgress("encoder training", settings.epochs * steps, "batches", mode) as progress:
        for epoch in range(1, settings.epochs + 1):
            encoder.train()
            losses.train()
            sums: dict[str, float] = {}
            for indices in np.array_split(rng.permutation(train_pairs), steps):
                total, values = _losses(losses, data.batch(indices), encoder)
                optimizer.zero_grad()
                total.backward()
                optimizer.step()
                _accumulate(sums, values, len(indices))
                progress.update(progress.done + 1, f"epoch {epoch}, loss {values['total']:.4g}")
            row = {"epoch": float(epoch), "lr": float(optimizer.param_groups[0]["lr"])}
            row |= _means(sums, "train", len(train_pairs))
            row |= _means(evaluate(encoder, losses, data, val_pairs, settings.batch_size), "val", len(val_pairs))
            rows.append(row)
            if scheduler is not None:
                scheduler.step(row["val/total"])
            if best is None or row["val/total"] < best[0]:
                best = (row["val/total"], epoch, copy.deepcopy(encoder.state_dict()))
            if improved is None or row["val/total"] < improved[0] * (1 - settings.min_delta):
                improved = (row["val/total"], epoch)
            if _out_of_patience(settings, epoch, improved[1]):
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
    assert best is not None and improved is not None
    encoder.load_state_dict(best[2])
    set_precision(encoder, "fp32")  # metrics and whitening on fp32 states; RL sets its own (hardware.precision)
    stopped = _out_of_patience(settings, len(rows), improved[1])
    return History(rows, best[1], stopped_early=stopped)


def _out_of_patience(settings: TrainingSettings, epoch: int, improved_epoch: int) -> bool:
    """Whether early stopping ends training after ``epoch``: ``patience`` epochs since ``improved_epoch`` (the last
    improvement by more than ``min_delta``), once ``min_epochs`` have run."""
    if settings.patience is None or epoch < settings.min_epochs:
        return False
    return epoch - improved_epoch >= settings.patience


def evaluate(
    encoder: ImageEncoder, losses: Losses, data: PairData, pairs: np.ndarray, batch_size: int
) -> dict[str, float]:
    """Summed (over pairs) losses in eval mode, without gradients."""
    encoder.eval()
    losses.eval()
    sums: dict[str, float] = {}
    with torch.no_grad():
        for start in range(0, len(pairs), batch_size):
            indices = pairs[start : start + batch_size]
            _accumulate(sums, _losses(losses, data.batch(indices), encoder)[1], len(indices))
    return sums


def _accumulate(sums: dict[str, float], values: dict[str, float], n: int) -> None:
    for name, value in values.items():
        sums[name] = sums.get(name, 0.0) + value * n


def _means(sums: dict[str, float], split: str, n: int) -> dict[str, float]:
    return {f"{split}/{name}": value / n for name, value in sums.items()}
