"""A learned encoder in front of the policy: one batched forward pass over all envs of a vectorised env."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from rlzoo.errors import ConfigError
from rlzoo.srl.encoder import ANY_METHOD, check_encoder, load_encoder

TERMINAL = "terminal_observation"


class EncodeObservations(VecEnvWrapper):
    """Replace the image observations of every env by the states of one encoder, computed for the whole batch at
    once (terminal observations of finished episodes included, in the same pass).

    :param venv: a vectorised env whose observations are uint8 ``(H, W, 3)`` images (``srl.pixels.rendered_pixels``).
    :param checkpoint: the encoder folder (or a file in it).
    :param method: the method the encoder must be (``learned``: any).
    :param device: where the encoder runs (``auto``: the GPU when there is one).
    :param precision: its image network's precision (``fp32``, ``bf16``, ``auto``: :mod:`rlzoo.precision`).
    """

    def __init__(
        self, venv: VecEnv, checkpoint: str, method: str = ANY_METHOD, device: str = "cpu", precision: str = "fp32"
    ) -> None:
        self.encoder = load_encoder(checkpoint, device, precision)
        shape = venv.observation_space.shape
        if shape is None or len(shape) != 3:
            raise ConfigError(f"srl_model={method} needs image observations, got {venv.observation_space}")
        check_encoder(self.encoder.path, self.encoder.metadata, method, _env_id(venv), (shape[0], shape[1]))
        space = spaces.Box(-np.inf, np.inf, shape=(self.encoder.state_dim,), dtype=np.float32)
        super().__init__(venv, observation_space=space)

    def encode(self, observations: np.ndarray) -> np.ndarray:
        """States of a batch of uint8 images ``(N, H, W, 3)`` -> float32 ``(N, state_dim)``, without an env."""
        return self.encoder.encode(observations)

    def reset(self) -> VecEnvObs:
        return self.encode(np.asarray(self.venv.reset()))

    def step_wait(self) -> VecEnvStepReturn:
        observations, rewards, dones, infos = self.venv.step_wait()
        finished = [i for i, info in enumerate(infos) if TERMINAL in info]
        batch = np.asarray(observations)
        if finished:
            batch = np.concatenate([batch, np.stack([infos[i][TERMINAL] for i in finished])])
        states = self.encode(batch)
        for k, i in enumerate(finished):
            infos[i][TERMINAL] = states[len(observations) + k]
        return states[: len(observations)], rewards, dones, infos


def _env_id(venv: VecEnv) -> str | None:
    try:
        spec: Any = venv.get_attr("spec", [0])[0]
    except AttributeError:
        return None
    return None if spec is None else str(spec.id)
