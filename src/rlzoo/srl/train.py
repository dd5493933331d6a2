"""``python -m rlzoo.srl.train srl_model=<method> dataset=<path|latest>``: train one encoder on a dataset of
``python -m rlzoo.collect``, measure it (KNN-MSE, GTC, a plot of its states) and write an encoder directory
(format: :mod:`rlzoo.srl.encoder`) that ``python -m rlzoo.train srl_model=<method>`` puts in front of the policy.

Its run keys are ``conf/srl_train.yaml``; a method is ONE file, ``conf/srl_model/<method>.yaml``, read by both
entrypoints: the recipe keys (:data:`KIND_KEYS`) here, the representation keys (``learned.yaml``) by ``rlzoo.train``.
"""

from __future__ import annotations

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
from sklearn.decomposition import PCA
from stable_baselines3.common.utils import get_device
from torch import nn

from rlzoo.cli import discard_output_dir_if_elsewhere, one_line_errors
from rlzoo.config import CONFIG_DIR, compose_config, instantiate
from rlzoo.errors import ConfigError
from rlzoo.files import atomic_write_text
from rlzoo.hardware import Hardware
from rlzoo.schema import at_least, check_value, parse
from rlzoo.srl import encoder as encoders
from rlzoo.srl import metrics
from rlzoo.srl.dataset import Dataset, find_dataset, load_dataset
from rlzoo.srl.losses import LossContext, SRLLoss
from rlzoo.srl.networks import (
    ImageEncoder,
    PCAEncoder,
    check_image_size,
    check_keypoints,
    encode_in_batches,
    fold_whitening,
)
from rlzoo.srl.trainer import Losses, PairData, TrainingSettings, fit

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


# The keys each kind of encoder uses (anything else would silently do nothing, so it is refused).
# The keys of an srl_model option that say how RL uses the encoder (learned.yaml): read by rlzoo.train, not here.
REPRESENTATION_KEYS = {"policy", "normalize", "checkpoint", "height", "width", "make_kwargs"}
REPRESENTATION_KEYS |= {"observation_wrapper", "vec_wrapper"}
KIND_KEYS = {
    "cnn": {"name", "kind", "state_dim", "network", "losses", "training"},
    "random": {"name", "kind", "state_dim", "network"},
    "pca": {"name", "kind", "state_dim"},
}


@dataclass(frozen=True)
class Recipe:
    """How one encoder is trained: the recipe keys of ``conf/srl_model/<method>.yaml``."""

    name: str
    kind: str
    state_dim: int
    network: dict[str, Any]
    losses: dict[str, Any]
    training: TrainingSettings | None

    @classmethod
    def from_config(cls, node: DictConfig) -> Recipe:
        kind = node.get("kind")
        if kind not in KIND_KEYS:
            raise ConfigError(f"srl_model.kind={kind!r}; allowed: {', '.join(KIND_KEYS)}")
        extra = sorted(str(k) for k in node if k not in KIND_KEYS[kind] and k not in REPRESENTATION_KEYS)
        if extra:
            raise ConfigError(
                f"srl_model: key(s) {', '.join(extra)} do nothing for kind {kind}; its keys: "
                f"{', '.join(sorted(KIND_KEYS[kind]))}"
            )
        losses = dict(node.get("losses") or {})
        if kind == "cnn" and not losses:
            raise ConfigError("srl_model.losses is empty: a cnn encoder is trained by at least one loss")
        training = None
        if kind == "cnn":
            training = TrainingSettings.from_values(OmegaConf.to_container(node.training))  # type: ignore[arg-type]
        network = dict(node.get("network") or {})
        if set(network) - {"channels", "keypoints"}:
            raise ConfigError(f"srl_model.network has {sorted(network)}; allowed: channels, keypoints")
        state_dim = check_value("srl_model.state_dim", node.state_dim, int, minimum=1)
        check_keypoints(network.get("keypoints", 0), state_dim)
        return cls(str(node.name), kind, state_dim, network, losses, training)


def check_encoder_config(cfg: DictConfig) -> tuple[EncoderRunSettings, Recipe, Hardware]:
    """The run settings, recipe and hardware of an ``rlzoo.srl.train`` config, checked: every check that needs no
    dataset (the pipeline calls it before any step runs)."""
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    settings = parse(EncoderRunSettings, values, ignore=("srl_model",))  # type: ignore[arg-type]
    recipe = Recipe.from_config(cfg.srl_model)
    if recipe.kind == "pca" and settings.whiten is not None:
        raise ConfigError(f"whiten={settings.whiten!r} whitens image encoders (kind cnn, random), not kind pca")
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
    if recipe.kind != "pca":
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
    torch.manual_seed(seed)  # before the loss heads are made: their weights depend on the seed only, not on the process
    losses = _build_losses(recipe, dataset, train_pairs, ground_truth) if recipe.kind == "cnn" else None

    run_dir = Path(cfg.run_dir)
    if (run_dir / encoders.METADATA).exists():
        raise ConfigError(f"run_dir {run_dir} already holds an encoder; rlzoo never overwrites one")
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config.yaml", OmegaConf.to_yaml(cfg))
    hardware.apply()
    device = get_device(hardware.device)
    summary: dict[str, Any] = {}
    module: nn.Module
    if recipe.kind == "pca":
        module = _fit_pca(dataset.images[np.union1d(train_pairs, train_pairs + 1)], recipe.state_dim, seed)
    else:
        module = ImageEncoder(height, width, recipe.state_dim, **recipe.network).to(device)
    if losses is not None and recipe.training is not None:
        assert isinstance(module, ImageEncoder)
        mean, std = ground_truth[train_pairs].mean(0), ground_truth[train_pairs].std(0)
        standard = (ground_truth - mean) / np.where(std > 0, std, 1.0)
        data = PairData(dataset.images, dataset.actions, dataset.rewards, standard, device)
        history = fit(
            module, losses.to(device), data, train_pairs, val_pairs, recipe.training,
            seed=seed, progress_bar=progress_bar,
        )  # fmt: skip
        history.write_csv(run_dir / "losses.csv")
        history.plot(run_dir / "losses.png", f"{recipe.name}: losses per epoch")
        summary = {
            "best_epoch": history.best_epoch,
            "val_loss": history.best_val_loss,
            "epochs": len(history.rows),
            "stopped_early": history.stopped_early,
        }
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
        "kind": "pca" if recipe.kind == "pca" else "cnn",
        "state_dim": recipe.state_dim,
        "image_shape": [int(height), int(width), 3],
        "network": recipe.network,
        "env_id": dataset.env_id,
        "env_kwargs": dataset.metadata.get("env_kwargs", {}),
        "dataset": str(dataset.path),
        "trained": recipe.kind != "random",
        **summary,
    }
    encoders.save_encoder(run_dir, metadata, module.cpu())
    return result


def _build_losses(recipe: Recipe, dataset: Dataset, train_pairs: np.ndarray, ground_truth: np.ndarray) -> Losses:
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


def _fit_pca(images: np.ndarray, state_dim: int, seed: int) -> PCAEncoder:
    flat = images.reshape(len(images), -1).astype(np.float32) / 255.0
    if state_dim > min(flat.shape):
        limit = min(flat.shape)
        raise ConfigError(
            f"srl_model.state_dim={state_dim}: a PCA of {len(flat)} frames has at most {limit} components"
        )
    pca = PCA(n_components=state_dim, svd_solver="randomized", random_state=seed).fit(flat)
    return PCAEncoder(pca.mean_, pca.components_, (images.shape[1], images.shape[2], 3))


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
    main()
