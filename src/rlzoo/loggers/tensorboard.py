"""TensorBoard output for a run's SB3 logger, without a wait on every dump (imported only when a run writes it).

SB3's ``TensorBoardOutputFormat`` flushes its ``SummaryWriter`` after every dump: the training thread then waits
until the writer's own thread has written the dump's events to disk, once per rollout (390 times in 100k steps of
PPO on CartPole: ~1 s of a 23 s run, ``benchmarks/train_overhead.py``). Here the writer's thread flushes every
``FLUSH_SECONDS`` by itself, and closing the logger (the end of every run) flushes the rest.
"""

from __future__ import annotations

from stable_baselines3.common.logger import TensorBoardOutputFormat
from torch.utils.tensorboard import SummaryWriter

FLUSH_SECONDS = 10  # how late a TensorBoard watching a training run may be


class PeriodicFlushWriter(SummaryWriter):
    """A ``SummaryWriter`` whose ``flush()`` leaves the flushing to its writer thread (every ``flush_secs``);
    ``close()`` still flushes every event file."""

    def flush(self) -> None:
        """Do not wait for the writer thread: it flushes every ``flush_secs``, and ``close()`` flushes the rest."""


class PeriodicTensorBoardOutputFormat(TensorBoardOutputFormat):
    """SB3's TensorBoard output format (same events, same folder) with a :class:`PeriodicFlushWriter`."""

    def __init__(self, folder: str) -> None:  # SB3's __init__ makes a plain SummaryWriter: not called
        self.writer = PeriodicFlushWriter(log_dir=folder, flush_secs=FLUSH_SECONDS)
        self._is_closed = False
