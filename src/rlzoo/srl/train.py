"""``python -m rlzoo.srl.train srl_model=<method> dataset=<path|latest>``: train one encoder on a dataset of
``python -m rlzoo.collect``, measure it (KNN-MSE, GTC, a plot of its states) and write an encoder directory
(format: :mod:`rlzoo.srl.encoder`) that ``python -m rlzoo.train srl_model=<method>`` puts in front of the policy.

Its run keys are ``conf/srl_train.yaml``; a method is ONE file, ``conf/srl_model/<method>.yaml``, read by both
entrypoints: the recipe keys of its kind (:mod:`rlzoo.srl.kinds`) here, the representation keys (``learned.yaml``) by
``rlzoo.train``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.utils import get_device

from rlzoo.cli import discard_output_dir_if_elsewhere, one_line_errors, run_checked
from rlzoo.config import CONFIG_DIR, compose_config
from rlzoo.errors import ConfigError
from rlzoo.files import atomic_write_text
from rlzoo.hardware import Hardware
from rlzoo.schema import at_least, check_value, parse
from rlzoo.srl import encoder as encoders
from rlzoo.srl import metrics
from rlzoo.srl.dataset import find_dataset, load_dataset
from rlzoo.srl.kinds import ENCODER_KINDS, EncoderData, EncoderKind, encoder_kind
from rlzoo.srl.networks import (
    ImageEncoder,
    check_image_size,
    check_keypoints,
    encode_in_batches,
    fold_whitening,
)
from rlzoo.srl.trainer import TrainingSettings

SRL_CONFIG_DIR = CONFIG_DIR
SRL_CONFIG_NAME = "srl_train"


@dataclass(frozen=True)
class EncoderRunSettings:
    """The run keys of ``conf/srl_train/train.yaml`` (see there)."""

    run_dir: str
    dataset: str = "latest"
    max_samples: int | None = field(default=None, metadata=at_least(2))
    seed: int = field(default=0, metadata=at_least(0))
    val_fraction: float = 0.2
    whiten: float | None = None
    knn_k: int = field(default=5, metadata=at_least(1))
    device: str = "auto"
    torch_threads: int | None = field(default=None, metadata=at_least(1))
    progress_bar: bool = True

    def __post_init__(self) -> None:
        if not 0.0 < self.val_fraction < 1.0:
            raise ConfigError(f"val_fraction={self.val_fraction!r} must be a number in (0, 1)")
        if self.whiten is not None and not 0.0 < self.whiten < 1.0:
            raise ConfigError(f"whiten={self.whiten!r}; allowed: null (off) or a regulariser in (0, 1), e.g. 0.001")


# The keys of an srl_model option that say how RL uses the encoder (learned.yaml): read by rlzoo.train, not here.
# Any other key must be one its kind reads (EncoderKind.keys): anything else would do nothing, so it is refused.
REPRESENTATION_KEYS = {"policy", "normalize", "checkpoint", "height", "width", "make_kwargs"}
REPRESENTATION_KEYS |= {"observation_wrapper", "vec_wrapper"}


@dataclass(frozen=True)
class Recipe:
    """How one encoder is trained: the recipe keys of ``conf/srl_model/<method>.yaml``."""

    name: str
    kind: str
    state_dim: int
    network: dict[str, Any]
    losses: dict[str, Any]
    training: TrainingSettings | None

    @property
    def kind_class(self) -> type[EncoderKind]:
        return encoder_kind(self.kind)

    @classmethod
    def from_config(cls, node: DictConfig) -> Recipe:
        kind = encoder_kind(node.get("kind"))
        extra = sorted(str(k) for k in node if k not in kind.allowed_keys() and k not in REPRESENTATION_KEYS)
        if extra:
            raise ConfigError(
                f"srl_model: key(s) {', '.join(extra)} do nothing for kind {kind.name}; its keys: "
                f"{', '.join(sorted(kind.allowed_keys()))}"
            )
        losses = dict(node.get("losses") or {})
        training = None
        if "training" in kind.keys:
            training = TrainingSettings.from_values(OmegaConf.to_container(node.training))  # type: ignore[arg-type]
        network = dict(node.get("network") or {})
        if set(network) - {"channels", "keypoints"}:
            raise ConfigError(f"srl_model.network has {sorted(network)}; allowed: channels, keypoints")
        state_dim = check_value("srl_model.state_dim", node.state_dim, int, minimum=1)
        check_keypoints(network.get("keypoints", 0), state_dim)
        recipe = cls(str(node.name), kind.name, state_dim, network, losses, training)
        kind.check(recipe)
        return recipe


def check_encoder_config(cfg: DictConfig) -> tuple[EncoderRunSettings, Recipe, Hardware]:
    """The run settings, recipe and hardware of an ``rlzoo.srl.train`` config, checked: every check that needs no
    dataset (the pipeline calls it before any step runs)."""
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    settings = parse(EncoderRunSettings, values, ignore=("srl_model",))  # type: ignore[arg-type]
    recipe = Recipe.from_config(cfg.srl_model)
    if not recipe.kind_class.whitens and settings.whiten is not None:
        image_kinds = ", ".join(name for name, kind in ENCODER_KINDS.items() if kind.whitens)
        raise ConfigError(
            f"whiten={settings.whiten!r} whitens image encoders (kind {image_kinds}), not kind {recipe.kind}"
        )
    return settings, recipe, Hardware.from_config(values)


def train_encoder(cfg: DictConfig) -> dict[str, float]:
    """Train, measure and save the encoder ``cfg`` describes into ``cfg.run_dir``; return its metrics."""
    started = time.perf_counter()
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    cfg = OmegaConf.create(values)  # a copy: the caller's config is not changed
    settings, recipe, hardware = check_encoder_config(cfg)
    seed, knn_k, progress_bar = settings.seed, settings.knn_k, settings.progress_bar
    dataset = load_dataset(find_dataset(settings.dataset))
    cfg.dataset = str(dataset.path)  # the encoder's config records the dataset it was trained on
    height, width = dataset.images.shape[1:3]
    kind = recipe.kind_class(recipe)
    if kind.images:
        check_image_size(height, width)
    max_samples = settings.max_samples
    pairs = dataset.pair_indices()
    if max_samples is not None:
        pairs = pairs[pairs + 1 < max_samples]
    rng = np.random.default_rng(seed)
    pairs = rng.permutation(pairs)
    n_val = max(1, round(cfg.val_fraction * len(pairs)))
    if len(pairs) - n_val < 1 or n_val <= knn_k:
        raise ConfigError(f"the dataset has {len(pairs)} pairs: too few for val_fraction={cfg.val_fraction}")
    val_pairs, train_pairs = np.sort(pairs[:n_val]), np.sort(pairs[n_val:])
    ground_truth, names = dataset.metric_ground_truth()
    run_dir = Path(cfg.run_dir)
    data = EncoderData(dataset, train_pairs, val_pairs, ground_truth, None, seed, progress_bar, run_dir)
    torch.manual_seed(seed)  # before the loss heads are made: their weights depend on the seed only, not on the process
    kind.prepare(data)

    if (run_dir / encoders.METADATA).exists():
        raise ConfigError(f"run_dir {run_dir} already holds an encoder; rlzoo never overwrites one")
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config.yaml", OmegaConf.to_yaml(cfg))
    hardware.apply()
    device = get_device(hardware.device)
    module, summary = kind.make(dataclasses.replace(data, device=device))
    frames = val_pairs  # the first frames of the held-out pairs
    unwhitened: dict[str, float] = {}
    if settings.whiten is not None:
        assert isinstance(module, ImageEncoder)
        plain = encode_in_batches(module.eval(), dataset.images[frames], device)
        unwhitened = _gtc(plain, ground_truth[frames], names, prefix="srl/unwhitened/")
        fold_whitening(module, encode_in_batches(module.eval(), dataset.images[train_pairs], device), settings.whiten)
        summary["whiten"] = settings.whiten
    train_seconds = time.perf_counter() - started

    states = encode_in_batches(module.eval(), dataset.images[frames], device)
    result = _measure(states, ground_truth[frames], names, knn_k, seed) | unwhitened
    probe = metrics.linear_probe(states, ground_truth[frames], dataset.episode_ids()[frames])
    result |= {f"srl/probe/{name}": float(value) for name, value in zip(names, probe, strict=True)}
    metrics.plot_states(run_dir / "states.png", states, ground_truth[frames], names, f"{recipe.name} states")
    result |= {f"srl/{k}": float(v) for k, v in summary.items()}
    result |= {"srl/train_pairs": float(len(train_pairs)), "srl/val_frames": float(len(frames))}
    result |= {"time/train_seconds": train_seconds, "time/total_seconds": time.perf_counter() - started}
    atomic_write_text(run_dir / "metrics.json", json.dumps(result, indent=2, sort_keys=True) + "\n")
    metadata = {
        "method": recipe.name,
        "kind": kind.format,
        "state_dim": recipe.state_dim,
        "image_shape": [int(height), int(width), 3],
        "network": recipe.network,
        "env_id": dataset.env_id,
        "env_kwargs": dataset.metadata.get("env_kwargs", {}),
        "dataset": str(dataset.path),
        "trained": kind.trained,
        **summary,
    }
    encoders.save_encoder(run_dir, metadata, module.cpu())
    return result


def _measure(states: np.ndarray, ground_truth: np.ndarray, names: list[str], knn_k: int, seed: int) -> dict[str, float]:
    return {"srl/knn_mse": metrics.knn_mse(states, ground_truth, knn_k, seed=seed)} | _gtc(states, ground_truth, names)


def _gtc(states: np.ndarray, ground_truth: np.ndarray, names: list[str], prefix: str = "srl/") -> dict[str, float]:
    """GTC per ground-truth coordinate (``<prefix>gtc/<name>``) and their mean (``<prefix>gtc_mean``)."""
    correlations = metrics.gtc(states, ground_truth)
    result = {f"{prefix}gtc/{name}": float(value) for name, value in zip(names, correlations, strict=True)}
    result[f"{prefix}gtc_mean"] = float(np.nanmean(correlations)) if np.isfinite(correlations).any() else float("nan")
    return result


def compose_srl_config(overrides: Sequence[str] = (), *, run_dir: str | Path) -> DictConfig:
    """Compose the same config as ``python -m rlzoo.srl.train <overrides>``, resolved, writing to ``run_dir``."""
    return compose_config(overrides, run_dir=run_dir, config_name=SRL_CONFIG_NAME, config_dir=SRL_CONFIG_DIR)


@hydra.main(config_path=str(SRL_CONFIG_DIR), config_name=SRL_CONFIG_NAME, version_base="1.3")
@one_line_errors("rlzoo.srl.train")
def main(cfg: DictConfig) -> float:
    """Hydra entrypoint: returns GTC_mean, so that a sweeper can maximise it."""
    discard_output_dir_if_elsewhere(cfg.run_dir)
    result = train_encoder(cfg)
    print(
        f"rlzoo.srl.train: {cfg.run_dir}: {cfg.srl_model.name}, GTC_mean {result['srl/gtc_mean']:.3f}, "
        f"KNN-MSE {result['srl/knn_mse']:.4g}"
    )
    return result["srl/gtc_mean"]


if __name__ == "__main__":
    run_checked(main, "rlzoo.srl.train", SRL_CONFIG_NAME)
