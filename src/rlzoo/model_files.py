"""The model files of a run dir (``model.zip`` + ``obs_norm.npz``, a multi-agent run's ``models/<learner>/``): saved
atomically, observation statistics as plain arrays (no pickle). The rest of the format is :mod:`rlzoo.rundir`'s."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from rlzoo.files import atomic_path

if TYPE_CHECKING:  # SB3 (and torch) are imported where runs train, not where run dirs are read
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.running_mean_std import RunningMeanStd
    from stable_baselines3.common.vec_env import VecNormalize

MODEL = "model.zip"
OBS_NORM = "obs_norm.npz"
LEARNERS = "models"  # multi-agent runs: models/<learner>/model.zip


def save_obs_norm(path: Path, normalizer: VecNormalize) -> None:
    """Save observation statistics as plain arrays (no pickle), atomically."""
    rms = normalizer.obs_rms
    from stable_baselines3.common.running_mean_std import RunningMeanStd

    assert isinstance(rms, RunningMeanStd), "dict observation spaces are not normalised by rlzoo"
    with atomic_path(path) as tmp, tmp.open("wb") as stream:
        np.savez(
            stream,
            mean=rms.mean,
            var=rms.var,
            count=np.asarray(rms.count),
            clip_obs=np.asarray(normalizer.clip_obs),
            epsilon=np.asarray(normalizer.epsilon),
        )


class ObsNorm(NamedTuple):
    """Observation-normalisation statistics as :func:`save_obs_norm` writes them."""

    rms: RunningMeanStd
    clip_obs: float
    epsilon: float


def load_obs_norm(path: Path) -> ObsNorm:
    """Read statistics written by :func:`save_obs_norm` (plain arrays, no pickle)."""
    from stable_baselines3.common.running_mean_std import RunningMeanStd

    with np.load(path, allow_pickle=False) as data:
        rms = RunningMeanStd(shape=data["mean"].shape)
        rms.mean = data["mean"].astype(np.float64)
        rms.var = data["var"].astype(np.float64)
        rms.count = float(data["count"])
        return ObsNorm(rms, float(data["clip_obs"]), float(data["epsilon"]))


def save_model(folder: Path, model: BaseAlgorithm, normalizer: VecNormalize | None) -> None:
    """Save a model (and its normalisation statistics) into ``folder``, each file atomically."""
    try:
        with atomic_path(folder / MODEL) as tmp:
            model.save(tmp)
    except OSError as error:  # a full disk ...: name the file (torch's writes carry no file name)
        error.filename = error.filename or str(folder / MODEL)
        raise
    if normalizer is not None:
        save_obs_norm(folder / OBS_NORM, normalizer)


def save_models(
    folder: Path, models: BaseAlgorithm | Mapping[str, BaseAlgorithm], normalizer: VecNormalize | None
) -> None:
    """Save one model into ``folder``, or (a mapping: a multi-agent run's learners) each into
    ``folder/models/<name>/``."""
    if isinstance(models, Mapping):
        for name, model in models.items():
            save_model(folder / LEARNERS / name, model, normalizer)
    else:
        save_model(folder, models, normalizer)


def has_model(folder: Path) -> bool:
    """``folder`` holds a saved model: ``model.zip``, or a multi-agent run's ``models/<learner>/model.zip``."""
    return (folder / MODEL).is_file() or any((folder / LEARNERS).glob(f"*/{MODEL}"))
