"""Observation normalisation: SB3's running ``VecNormalize`` while training, one frozen form everywhere else.

:class:`FrozenNormalization` is a snapshot of the statistics (mean, variance, clip, epsilon): test episodes,
replay, test agents and collection all normalise through it, as a vec-env wrapper or on arrays.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecNormalize
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from rlzoo.rundir import load_obs_norm

TERMINAL = "terminal_observation"


def running_normalization(venv: VecEnv) -> VecNormalize:
    """Running mean/std normalisation of observations while training (rewards are left as they are)."""
    return VecNormalize(venv, norm_obs=True, norm_reward=False)


@dataclass(frozen=True)
class FrozenNormalization:
    """Observation statistics that no longer update."""

    rms: RunningMeanStd
    clip_obs: float = 10.0
    epsilon: float = 1e-8

    @classmethod
    def snapshot(cls, normalizer: VecNormalize) -> FrozenNormalization:
        """A copy of ``normalizer``'s statistics as they are now."""
        rms = copy.deepcopy(normalizer.obs_rms)
        assert isinstance(rms, RunningMeanStd), "dict observation spaces are not normalised by rlzoo"
        return cls(rms, float(normalizer.clip_obs), float(normalizer.epsilon))

    @classmethod
    def load(cls, path: Path) -> FrozenNormalization:
        """Read ``obs_norm.npz`` (:func:`rlzoo.rundir.save_obs_norm`)."""
        return cls(*load_obs_norm(path))  # a truncated or foreign file: one line

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        """Normalise a batch of observations as ``VecNormalize`` does."""
        scaled = (observations - self.rms.mean) / np.sqrt(self.rms.var + self.epsilon)
        return np.clip(scaled, -self.clip_obs, self.clip_obs).astype(np.float32)

    def restore(self, normalizer: VecNormalize) -> None:
        """Continue ``normalizer``'s running statistics from these (a resumed run)."""
        normalizer.obs_rms = copy.deepcopy(self.rms)  # type: ignore[arg-type]  # SB3 types it for dicts too

    def wrap(self, venv: VecEnv) -> VecEnv:
        """``venv`` with its observations normalised by these statistics."""
        return FrozenNormalize(venv, self)


class FrozenNormalize(VecEnvWrapper):
    """A vec env whose observations (terminal ones included) are normalised by frozen statistics."""

    def __init__(self, venv: VecEnv, normalization: FrozenNormalization) -> None:
        super().__init__(venv)
        self.normalization = normalization

    def reset(self) -> VecEnvObs:
        return self.normalization(np.asarray(self.venv.reset()))

    def step_wait(self) -> VecEnvStepReturn:
        observations, rewards, dones, infos = self.venv.step_wait()
        for info in infos:
            if TERMINAL in info:
                info[TERMINAL] = self.normalization(np.asarray(info[TERMINAL]))
        return self.normalization(np.asarray(observations)), rewards, dones, infos
