"""``python -m rlzoo.srl.evaluate dataset=<folder> encoders=[<folder>,...]``: trained encoders measured on a dataset.

The metrics are those of ``rlzoo.srl.train`` (GTC and the linear probe, :mod:`rlzoo.srl.metrics`), on every frame of a
dataset chosen here, so that encoders trained on different datasets are compared on the same frames, and on frames
whose target positions none of them saw. GTC on a few episodes is reported beside it: with few target positions the
best of many state dimensions correlates with the target by chance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlzoo.cli import one_line_errors
from rlzoo.config import CONFIG_DIR
from rlzoo.errors import ConfigError
from rlzoo.files import atomic_write_text
from rlzoo.schema import at_least, parse
from rlzoo.srl import metrics
from rlzoo.srl.dataset import LATEST, Dataset, find_dataset, load_dataset
from rlzoo.srl.encoder import ANY_METHOD, Encoder, find_encoder, load_encoder
from rlzoo.srl.networks import encode_in_batches


@dataclass(frozen=True)
class EvaluateSettings:
    """The keys of ``conf/srl_evaluate.yaml`` (see there)."""

    dataset: str
    encoders: list[str]
    subset_episodes: int | None = field(default=16, metadata=at_least(2))
    draws: int = field(default=10, metadata=at_least(1))
    seed: int = field(default=0, metadata=at_least(0))
    out: str | None = None

    def __post_init__(self) -> None:
        if not self.encoders:
            raise ConfigError("encoders=[] names no encoder: give one or more encoder folders, encoders=[<folder>,...]")


def evaluate(encoder: Encoder, dataset: Dataset, settings: EvaluateSettings) -> dict[str, float]:
    """GTC, its mean and the linear probe on every frame of ``dataset``; GTC on draws of a few of its episodes."""
    ground_truth, names = dataset.metric_ground_truth()
    episodes = dataset.episode_ids()
    states = encode_in_batches(encoder.module, dataset.images, encoder.device)
    correlations = metrics.gtc(states, ground_truth)
    result = _named("gtc", names, correlations)
    result["gtc_mean"] = float(np.nanmean(correlations))
    result |= _named("probe", names, metrics.linear_probe(states, ground_truth, episodes))
    if settings.subset_episodes is not None:
        subset = _subset_gtc(states, ground_truth, episodes, dataset.n_episodes, settings)
        result |= _named(f"gtc_{settings.subset_episodes}_episodes", names, subset)
        result[f"gtc_{settings.subset_episodes}_episodes_mean"] = float(np.nanmean(subset))
    return result


def _subset_gtc(
    states: np.ndarray, ground_truth: np.ndarray, episodes: np.ndarray, n_episodes: int, settings: EvaluateSettings
) -> Any:
    subset = settings.subset_episodes
    rng = np.random.default_rng(settings.seed)
    draws = []
    for _ in range(settings.draws):
        mask = np.isin(episodes, rng.choice(n_episodes, subset, replace=False))
        draws.append(metrics.gtc(states[mask], ground_truth[mask]))
    return np.mean(draws, axis=0)


def _check(encoders: list[Encoder], dataset: Dataset, settings: EvaluateSettings) -> None:
    """Refuse an encoder of another image size, or more episodes to draw than the dataset has."""
    for encoder in encoders:
        if encoder.image_shape != dataset.images.shape[1:]:
            raise ConfigError(
                f"encoder {encoder.path} takes images of shape {encoder.image_shape}, "
                f"the dataset {dataset.path} has {dataset.images.shape[1:]}: "
                "collect the dataset at the encoder's image_size"
            )
    n_episodes = dataset.n_episodes
    if settings.subset_episodes is not None and settings.subset_episodes > n_episodes:
        raise ConfigError(
            f"subset_episodes={settings.subset_episodes} is more than the dataset's {n_episodes} episodes: "
            f"give 2 to {n_episodes}, or null to skip GTC on draws of episodes"
        )


def _encoder_folder(path: str, env_id: str) -> Path:
    """An encoder folder, or for ``latest`` the newest finished encoder trained on ``env_id``."""
    try:
        return find_encoder(path, ANY_METHOD, env_id)
    except ConfigError:
        if path == LATEST:
            raise ConfigError(
                f"encoders=[{LATEST}]: no finished encoder trained on {env_id} under ./outputs and ./multirun; "
                "train one (python -m rlzoo.srl.train) or give its folder"
            ) from None
        raise ConfigError(
            f"encoders: {path} is not an encoder folder (no encoder.json in it): give the folders that "
            f"python -m rlzoo.srl.train wrote, or {LATEST}"
        ) from None


def _named(prefix: str, names: list[str], values: np.ndarray) -> dict[str, float]:
    return {f"{prefix}/{name}": float(value) for name, value in zip(names, values, strict=True)}


def _line(path: Path, result: dict[str, float]) -> str:
    parts = [f"{key} {value:.2f}" for key, value in result.items() if not key.startswith("gtc_") or "mean" in key]
    return f"rlzoo.srl.evaluate: {path}: " + ", ".join(parts)


def evaluate_encoders(cfg: DictConfig) -> dict[str, dict[str, float]]:
    """Measure the config's encoders on its dataset (every input checked first); print a line per encoder and
    write ``out`` where set. :return: the metrics of each encoder, by folder."""
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    if isinstance(values.get("encoders"), str):
        values["encoders"] = [values["encoders"]]
    settings = parse(EvaluateSettings, values)  # type: ignore[arg-type]
    dataset = load_dataset(find_dataset(settings.dataset))
    encoders = [load_encoder(_encoder_folder(path, dataset.env_id)) for path in settings.encoders]
    _check(encoders, dataset, settings)
    results = {}
    for encoder in encoders:
        results[str(encoder.path)] = evaluate(encoder, dataset, settings)
        print(_line(encoder.path, results[str(encoder.path)]), flush=True)
    if settings.out is not None:
        Path(settings.out).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(Path(settings.out), json.dumps({"dataset": str(dataset.path), "encoders": results}, indent=2))
    return results


@hydra.main(config_path=str(CONFIG_DIR), config_name="srl_evaluate", version_base="1.3")
@one_line_errors("rlzoo.srl.evaluate")
def main(cfg: DictConfig) -> None:
    """Hydra entrypoint (``key=value`` arguments only)."""
    torch.set_num_threads(1)
    evaluate_encoders(cfg)


if __name__ == "__main__":
    main()
