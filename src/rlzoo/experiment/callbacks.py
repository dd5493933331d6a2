"""Callbacks every run uses: the returns100 curve and periodic checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecNormalize

from rlzoo.experiment.rundir import RETURNS100_HEADER, RunDir


class Returns100(BaseCallback):
    """Write ``frame,mean,std,max,min`` for every non-overlapping window of 100 training episodes, and a final
    partial window at the end (the autonomous-learning-library's returns100, with a header).

    :param path: the CSV file (appended to when it exists).
    :param window: episodes per row.
    """

    def __init__(self, path: Path, window: int = 100) -> None:
        super().__init__()
        self.path = path
        self.window = window
        self._returns: list[float] = []
        self._stream: TextIO | None = None

    def _on_training_start(self) -> None:
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._stream = self.path.open("a")
        if new:
            self._stream.write(RETURNS100_HEADER + "\n")
            self._stream.flush()

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            episode = info.get("episode")
            if episode is not None:
                self._returns.append(float(episode["r"]))
                if len(self._returns) == self.window:
                    self._write_row()
        return True

    def _write_row(self) -> None:
        assert self._stream is not None
        values = np.asarray(self._returns)
        row = (self.num_timesteps, values.mean(), values.std(), values.max(), values.min())
        self._stream.write("{},{:.6g},{:.6g},{:.6g},{:.6g}\n".format(*row))
        self._stream.flush()
        self._returns.clear()

    def _on_training_end(self) -> None:
        if self._returns:
            self._write_row()
        if self._stream is not None:
            self._stream.close()
            self._stream = None


class Checkpoint(BaseCallback):
    """Save the model and its normalisation statistics every ``every_steps`` agent steps (summed over envs).

    :param run: the run directory.
    :param every_steps: checkpoint interval in agent steps.
    :param normalizer: the training env's observation normaliser, if any.
    """

    def __init__(self, run: RunDir, every_steps: int, normalizer: VecNormalize | None) -> None:
        super().__init__()
        self.run = run
        self.every_steps = every_steps
        self.normalizer = normalizer
        self._next = every_steps

    def _on_training_start(self) -> None:
        """Aim at the next multiple of the interval (also right after a save)."""
        self._next = (self.num_timesteps // self.every_steps + 1) * self.every_steps

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next:
            self.run.save_checkpoint(self.num_timesteps, self.model, self.normalizer)
            self._on_training_start()
        return True
