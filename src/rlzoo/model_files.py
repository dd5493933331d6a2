"""The model files of a run dir: a :class:`ModelFolder` (``model.zip`` + ``obs_norm.npz``, SBX's weights beside, a
run of several learners' ``models/<learner>/`` and ``models.json``), saved atomically, observation statistics as plain
arrays (no pickle). The rest of the format is :mod:`rlzoo.rundir`'s and :mod:`rlzoo.checkpoint_format`'s."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from rlzoo.confined import load_npz, read_json
from rlzoo.errors import ConfigError, Refused
from rlzoo.files import atomic_path, atomic_write_text
from rlzoo.jax_weights import JAX_WEIGHTS, save_jax_weights

if TYPE_CHECKING:  # SB3 (and torch) are imported where runs train, not where run dirs are read
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.running_mean_std import RunningMeanStd
    from stable_baselines3.common.vec_env import VecNormalize

MODEL = "model.zip"
OBS_NORM = "obs_norm.npz"
LEARNERS = "models"  # a run of several learners (multi-agent): models/<learner>/model.zip
LEARNERS_STATE = "models.json"  # ... written once every learner's final model is saved


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


@dataclass(frozen=True)
class ModelFolder:
    """A folder holding a saved model and its normaliser: a run dir (its final model), a checkpoint, ``best/``; a run
    of several learners holds each learner's in ``models/<learner>/`` (:meth:`learner`)."""

    path: Path

    @property
    def model(self) -> Path:
        return self.path / MODEL

    @property
    def obs_norm(self) -> Path:
        """The observation statistics' file (absent when the run did not normalise)."""
        return self.path / OBS_NORM

    @property
    def jax_weights(self) -> Path:
        """An SBX model's weights as data (:mod:`rlzoo.jax_weights`)."""
        return self.path / JAX_WEIGHTS

    def learner(self, name: str) -> ModelFolder:
        """The folder of learner ``name`` of a run of several learners."""
        return ModelFolder(self.path / LEARNERS / name)

    def holds_model(self) -> bool:
        """A model is saved here: ``model.zip``, or a learner's (:func:`has_model`)."""
        return has_model(self.path)

    def trained(self) -> bool:
        """The final model is here: ``model.zip``, or (several learners) ``models.json``, written once every
        learner's model is (:meth:`save_learners`)."""
        return self.model.is_file() or (self.path / LEARNERS_STATE).is_file()

    def load_obs_norm(self) -> ObsNorm | None:
        """The saved observation statistics (None: the run did not normalise)."""
        return load_obs_norm(self.obs_norm) if self.obs_norm.is_file() else None

    def restore_obs_norm(self, normalizer: VecNormalize | None) -> None:
        """Put the saved statistics into ``normalizer``, which goes on updating them (None, or none saved: nothing)."""
        saved = self.load_obs_norm() if normalizer is not None else None
        if normalizer is not None and saved is not None:
            normalizer.obs_rms = saved.rms  # type: ignore[assignment]  # SB3 types it for dicts

    def save_learners(self, models: Mapping[str, BaseAlgorithm], state: dict[str, Any]) -> None:
        """Save the final models of several learners, each in ``models/<name>/``, then ``state`` (``models.json``),
        which marks them saved (:meth:`trained`)."""
        for name, model in models.items():
            save_model(self.learner(name).path, model, None)
        atomic_write_text(self.path / LEARNERS_STATE, json.dumps(state) + "\n")

    def learners_state(self) -> dict[str, Any]:
        """What :meth:`save_learners` recorded beside the learners' final models (empty: none recorded)."""
        path = self.path / LEARNERS_STATE
        values = read_json(self.path, LEARNERS_STATE) if path.is_file() else {}
        if not isinstance(values, dict):
            raise Refused(f"{path} does not hold a mapping")
        return values
