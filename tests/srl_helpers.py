"""Tiny datasets and encoders for the SRL tests: 16 x 16 frames, small CNNs, one epoch."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rlzoo.collect import collect
from rlzoo.config import compose_config
from rlzoo.srl.train import compose_srl_config, train_encoder

TINY_DATASET = ["n_samples=400", "image_size=16", "n_workers=0", "progress_bar=false"]
RANDOM_TARGET = ("env=MobileRobot", "env.random_target=true")
TINY_NETWORK = ["srl_model.state_dim=8", "srl_model.network.channels=4"]
TINY_TRAINING = ["srl_model.training.epochs=1", "srl_model.training.batch_size=64"]


def make_dataset(folder: Path, overrides: Sequence[str] = (), env: Sequence[str] = RANDOM_TARGET) -> Path:
    """Collect a tiny dataset (by default MobileRobot with a random target) into ``folder``."""
    collect(compose_config([*env, *TINY_DATASET, *overrides], run_dir=folder, config_name="collect"))
    return folder


def make_encoder(folder: Path, dataset: Path, method: str, overrides: Sequence[str] = ()) -> dict[str, float]:
    """Train a tiny encoder of ``method`` on ``dataset`` into ``folder``; return its metrics."""
    sizes = {"pca": ["srl_model.state_dim=8"], "random": TINY_NETWORK}.get(method, [*TINY_NETWORK, *TINY_TRAINING])
    overrides = [f"srl_model={method}", f"dataset={dataset}", "progress_bar=false", "device=cpu", *sizes, *overrides]
    return train_encoder(compose_srl_config(overrides, run_dir=folder))
