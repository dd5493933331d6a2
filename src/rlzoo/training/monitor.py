"""SB3's ``Monitor`` job done once for a whole vec env: ``info["episode"]`` and one ``<rank>.monitor.csv`` per env.

Every training env of a run is monitored by :class:`PerEnvMonitor`, put around the vec env once the run dir exists
(so that building and checking the envs writes nothing).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.monitor import ResultsWriter
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

from rlzoo.any_env.wrappers import GAME


class PerEnvMonitor(VecEnvWrapper):
    """SB3's ``Monitor`` for each env of a vec env that has none (one that steps its envs as arrays):
    ``info["episode"]`` (``r``, ``l``, ``t``) when an episode ends, one ``<rank>.monitor.csv`` per env in
    ``monitor_dir`` as ``make_vec_env`` writes them, and
    ``get_attr("episode_returns" | "episode_lengths" | "episode_times")``.

    :param venv: the vec env
    :param monitor_dir: where the CSV files go (None: no files)
    :param env_id: written in the files' header
    :param override_existing: start the files afresh (False: append to them, a resumed run)
    :param t_start: when the run's clock started (a resumed run's ``t`` goes on from where it stopped); default: now
    :param game_episodes: count the whole games the envs report (``info["rlzoo_game"]``: Atari training envs, whose
        episodes end at a life loss and whose rewards are clipped), not their life-loss episodes
    """

    EPISODE_ATTRIBUTES = ("episode_returns", "episode_lengths", "episode_times")

    def __init__(
        self,
        venv: VecEnv,
        monitor_dir: Path | None = None,
        env_id: str = "",
        override_existing: bool = True,
        t_start: float | None = None,
        game_episodes: bool = False,
    ) -> None:
        super().__init__(venv)
        self.t_start = time.time() if t_start is None else t_start
        self.env_id, self.game_episodes = env_id, game_episodes
        self._writers: list[ResultsWriter] = []
        if monitor_dir is not None:
            self.open_files(monitor_dir, override_existing)
        self._return = np.zeros(self.num_envs)
        self._length = np.zeros(self.num_envs, dtype=np.int64)
        self.episode_returns: list[list[float]] = [[] for _ in range(self.num_envs)]
        self.episode_lengths: list[list[int]] = [[] for _ in range(self.num_envs)]
        self.episode_times: list[list[float]] = [[] for _ in range(self.num_envs)]

    def open_files(self, monitor_dir: Path, override_existing: bool = True) -> None:
        """Write every episode from now on to ``<monitor_dir>/<rank>.monitor.csv``, as ``make_vec_env`` names them."""
        header: dict[str, float | str] = {"t_start": self.t_start, "env_id": self.env_id}
        self._writers = [
            ResultsWriter(str(monitor_dir / str(rank)), header=header, override_existing=override_existing)
            for rank in range(self.num_envs)
        ]

    def reset(self) -> VecEnvObs:
        self._return[:] = 0.0
        self._length[:] = 0
        return self.venv.reset()

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self._return += rewards
        self._length += 1
        for i in np.flatnonzero(dones).tolist() if dones.any() else ():
            episode_return, length = float(self._return[i]), int(self._length[i])
            if self.game_episodes:  # a life lost is not an episode; a game over reports its real score
                self._return[i], self._length[i] = 0.0, 0
                game = infos[i].get(GAME)
                if game is None:
                    continue
                episode_return, length = float(game["r"]), int(game["l"])
            elapsed = time.time() - self.t_start
            episode = {"r": round(episode_return, 6), "l": length, "t": round(elapsed, 6)}
            infos[i]["episode"] = episode
            self.episode_returns[i].append(episode_return)
            self.episode_lengths[i].append(length)
            self.episode_times[i].append(elapsed)
            if self._writers:
                self._writers[i].write_row(episode)
            self._return[i], self._length[i] = 0.0, 0
        return obs, rewards, dones, infos

    def get_state(self) -> dict[str, Any]:
        """The running episodes' returns and lengths (:class:`rlzoo.stateful.Stateful`)."""
        return {"return": self._return.copy(), "length": self._length.copy()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        for name, held in (("return", self._return), ("length", self._length)):
            saved = state.get(name)
            if not isinstance(saved, np.ndarray) or saved.shape != held.shape or saved.dtype.kind not in "iuf":
                raise ValueError(f"{name}: expected {held.shape[0]} numbers of the monitor's running episodes")
            held[:] = saved

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        if attr_name in self.EPISODE_ATTRIBUTES:
            per_env = getattr(self, attr_name)
            return [per_env[i] for i in self._get_indices(indices)]
        return self.venv.get_attr(attr_name, indices)

    def close_files(self) -> None:
        for writer in self._writers:
            writer.close()
        self._writers = []

    def close(self) -> None:
        self.close_files()
        self.venv.close()
