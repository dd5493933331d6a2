"""The model files of a run dir (``model.zip`` + ``obs_norm.npz``, a multi-agent run's ``models/<learner>/``): saved
atomically, observation statistics as plain arrays (no pickle). The rest of the format is :mod:`rlzoo.rundir`'s."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from rlzoo.confined import load_npz
from rlzoo.errors import ConfigError, Refused
from rlzoo.files import atomic_path
from rlzoo.jax_weights import save_jax_weights

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
    """Read statistics written by :func:`save_obs_norm` (plain arrays, no pickle).

    :raise ConfigError: a truncated or foreign file, in one line; :class:`~rlzoo.errors.Refused`: pickled arrays.
    """
    from stable_baselines3.common.running_mean_std import RunningMeanStd

    try:
        data = load_npz(path.parent, path.name)
        rms = RunningMeanStd(shape=data["mean"].shape)
        rms.mean = data["mean"].astype(np.float64)
        rms.var = data["var"].astype(np.float64)
        rms.count = float(data["count"])
        return ObsNorm(rms, float(data["clip_obs"]), float(data["epsilon"]))
    except Refused:
        raise
    except Exception as error:  # a pickle numpy refuses, a truncated zip, a missing array ...
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        kind = Refused if "allow_pickle" in text else ConfigError
        raise kind(f"{path} cannot be read: {text}") from None


def save_model(folder: Path, model: BaseAlgorithm, normalizer: VecNormalize | None) -> None:
    """Save a model (and its normalisation statistics) into ``folder``, each file atomically."""
    try:
        with atomic_path(folder / MODEL) as tmp:
            model.save(tmp)
    except OSError as error:  # a full disk ...: name the file (torch's writes carry no file name)
        error.filename = error.filename or str(folder / MODEL)
        raise
    save_jax_weights(folder, model)  # SBX: its weights as data beside the zip (rlzoo.jax_weights)
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
