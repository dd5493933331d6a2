"""Options of encoder training for small objects: foreground-weighted reconstruction, early stopping (patience,
min_epochs, min_delta)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from rlzoo.errors import ConfigError
from rlzoo.srl import losses, metrics
from rlzoo.srl.networks import ImageEncoder
from srl_helpers import make_dataset, make_encoder

SIZE = 16


def _context(mean_image: np.ndarray | None) -> losses.LossContext:
    encoder = ImageEncoder(SIZE, SIZE, 4, channels=4)
    return losses.LossContext(
        state_dim=4, feature_dim=encoder.feature_dim, image_shape=(SIZE, SIZE, 3), channels=4, n_actions=4,
        action_dim=4, ground_truth_dim=2, positive_reward_fraction=0.5, mean_image=mean_image,
    )  # fmt: skip


def test_foreground_pixels_weigh_more() -> None:
    grey = np.full((SIZE, SIZE, 3), 0.5)
    clean = torch.full((2, 3, SIZE, SIZE), 0.5)
    clean[:, :, 3, 4] = 1.0  # a one-pixel target, far from the mean image
    decoded = torch.full_like(clean, 0.5)  # a reconstruction that leaves the target out
    plain = losses.Reconstruction(_context(grey)).pixel_loss(decoded, clean)
    weighted = losses.Reconstruction(_context(grey), foreground_weight=9.0).pixel_loss(decoded, clean)
    pixels = SIZE * SIZE
    assert float(plain) == pytest.approx(0.25 / pixels)
    assert float(weighted) == pytest.approx(10 * 0.25 / (pixels - 1 + 10))  # weights 1 + 9 on the target pixel
    assert float(weighted) > 9 * float(plain)
    assert float(losses.Reconstruction(_context(grey), foreground_weight=9.0).pixel_loss(clean, clean)) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "mean_image", "message"),
    [
        ({"foreground_weight": -1.0}, np.zeros((SIZE, SIZE, 3)), "foreground_weight=-1.0 must be ≥ 0"),
        ({"foreground_threshold": 1.0}, np.zeros((SIZE, SIZE, 3)), "foreground_threshold=1.0 in"),
        ({"foreground_weight": 5.0}, None, "needs the mean image"),
    ],
)
def test_bad_foreground_options(kwargs: dict[str, float], mean_image: np.ndarray | None, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        losses.Reconstruction(_context(mean_image), **kwargs)


def test_patience_stops_by_validation_and_the_weighted_loss_trains(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "data")
    # A zero-weight loss never improves on its first epoch: patience 2 stops after epoch 3 of 20.
    frozen = ["srl_model.losses.ground_truth.weight=0", "srl_model.training.epochs=20"]
    frozen.append("+srl_model.training.patience=2")
    metrics = make_encoder(tmp_path / "supervised", dataset, "supervised", frozen)
    assert metrics["srl/epochs"] == 3 and metrics["srl/best_epoch"] == 1 and metrics["srl/stopped_early"] == 1
    assert json.loads((tmp_path / "supervised" / "encoder.json").read_text())["stopped_early"] is True
    weighted = ["+srl_model.losses.reconstruction.foreground_weight=10", "srl_model.training.epochs=2"]
    metrics = make_encoder(tmp_path / "splits", dataset, "srl_splits", weighted)
    assert metrics["srl/epochs"] == 2 and metrics["srl/stopped_early"] == 0


def test_min_epochs_holds_the_patience_back(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "data")
    # The zero-weight loss never improves on epoch 1: patience 2 alone stops after epoch 3, with min_epochs 5 after 5.
    frozen = ["srl_model.losses.ground_truth.weight=0", "srl_model.training.epochs=20"]
    held = [*frozen, "+srl_model.training.patience=2", "srl_model.training.min_epochs=5"]
    metrics = make_encoder(tmp_path / "held", dataset, "supervised", held)
    assert metrics["srl/epochs"] == 5 and metrics["srl/best_epoch"] == 1 and metrics["srl/stopped_early"] == 1


def test_min_delta_counts_only_large_cuts_and_keeps_the_lowest_loss(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "data")
    patient = ["srl_model.training.epochs=6", "+srl_model.training.patience=2"]
    plain = make_encoder(tmp_path / "plain", dataset, "supervised", patient)
    assert plain["srl/epochs"] > 3  # the validation loss falls (by less than 90 % an epoch): patience 2 goes on
    strict = make_encoder(tmp_path / "strict", dataset, "supervised", [*patient, "srl_model.training.min_delta=0.9"])
    # No epoch cuts 90 %: patience 2 stops after epoch 3, and the weights kept are the lowest loss's, not epoch 1's.
    assert strict["srl/epochs"] == 3 and strict["srl/stopped_early"] == 1 and strict["srl/best_epoch"] > 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["+srl_model.training.patience=2", "srl_model.training.min_epochs=30"],
            r"min_epochs=30 must be at most .*epochs=20",
        ),
        (["srl_model.training.min_epochs=5"], r"min_epochs=5 needs srl_model.training.patience"),
        (["+srl_model.training.patience=2", "srl_model.training.min_epochs=0"], "min_epochs=0 must be ≥ 1"),
        (["srl_model.training.min_delta=1.5"], r"min_delta=1\.5 must be at least 0 and below 1"),
        (["srl_model.training.min_delta=-0.1"], r"min_delta=-0\.1 must be at least 0 and below 1"),
    ],
)
def test_bad_min_epochs(tmp_path: Path, overrides: list[str], message: str) -> None:
    dataset = make_dataset(tmp_path / "data")
    with pytest.raises(ConfigError, match=message):
        make_encoder(tmp_path / "bad", dataset, "supervised", ["srl_model.training.epochs=20", *overrides])
    assert not (tmp_path / "bad").exists()


def test_lr_factor_lowers_the_learning_rate_after_each_epoch_that_does_not_improve(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "data")
    # The zero-weight loss never improves on epoch 1: epochs 3 and 4 train at 0.5 and 0.25 times the first rate.
    decayed = ["srl_model.losses.ground_truth.weight=0", "srl_model.training.epochs=4"]
    make_encoder(tmp_path / "decayed", dataset, "supervised", [*decayed, "srl_model.training.lr_factor=0.5"])
    rows = (tmp_path / "decayed" / "losses.csv").read_text().splitlines()
    rates = [float(row.split(",")[rows[0].split(",").index("lr")]) for row in rows[1:]]
    assert rates == pytest.approx([0.005, 0.005, 0.0025, 0.00125])
    with pytest.raises(ConfigError, match=r"lr_factor=1\.5 must be between 0 and 1"):
        make_encoder(tmp_path / "bad", dataset, "supervised", ["srl_model.training.lr_factor=1.5"])
    assert not (tmp_path / "bad").exists()


def test_max_seconds_ends_training_after_the_epoch_that_passes_it(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "data")
    capped = ["srl_model.training.epochs=500", "srl_model.training.max_seconds=1"]
    started = time.monotonic()
    metrics = make_encoder(tmp_path / "capped", dataset, "supervised", capped)
    assert 1 <= metrics["srl/epochs"] < 500 and metrics["srl/stopped_early"] == 0
    assert time.monotonic() - started < 60


def test_the_vae_weighs_foreground_pixels_too() -> None:
    grey = np.full((SIZE, SIZE, 3), 0.5)
    vae = losses.VariationalReconstruction(_context(grey), beta=1.0, foreground_weight=9.0)
    clean = torch.full((2, 3, SIZE, SIZE), 0.5)
    clean[:, :, 3, 4] = 1.0
    weights = vae.pixel_weights(clean)
    assert weights.shape == (2, 1, SIZE, SIZE) and float(weights.sum()) == 2 * (SIZE * SIZE + 9)


def test_linear_probe_sees_what_gtc_misses() -> None:
    rng = np.random.default_rng(0)
    episodes = np.repeat(np.arange(20), 30)
    target = rng.uniform(0, 4, (20, 2))[episodes]  # constant within an episode, as MobileRobot's target
    mixed = np.hstack([target, rng.normal(size=(600, 6))]) @ rng.normal(size=(8, 8))  # spread over every dimension
    probe = metrics.linear_probe(mixed, target, episodes)
    assert np.all(probe > 0.95) and np.all(metrics.gtc(mixed, target) < probe)
    noise = metrics.linear_probe(rng.normal(size=(600, 8)), target, episodes)
    assert np.all(noise < 0.5)
    assert np.isnan(metrics.linear_probe(mixed, target, np.zeros(600))).all()  # one episode: nothing held out
