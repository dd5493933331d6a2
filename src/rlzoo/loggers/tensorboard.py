"""TensorBoard output for a run's SB3 logger: one event per dump and no wait on every dump (imported only when a run
writes it).

SB3's ``TensorBoardOutputFormat`` writes one event per scalar (``add_scalar``: ~50 µs each, ~15 per dump) and flushes
its ``SummaryWriter`` after every dump, so that the training thread waits until the writer's own thread has written
the dump to disk, once per rollout (390 times in 100k steps of PPO on CartPole; ``benchmarks/train_overhead.py``).
Here a dump's numbers go into one ``Summary`` event (TensorBoard reads each of its values as that tag's scalar at that
step), the writer's thread flushes every ``FLUSH_SECONDS`` by itself, and closing the logger (the end of every run)
flushes the rest. Other values (text, histograms, images, videos, figures, hparams) take SB3's own path.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.logger import TensorBoardOutputFormat
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from torch.utils.tensorboard import SummaryWriter

from rlzoo.confined import memory_budget, read_bytes
from rlzoo.files import atomic_path

FLUSH_SECONDS = 10  # how late a TensorBoard watching a training run may be


class PeriodicFlushWriter(SummaryWriter):
    """A ``SummaryWriter`` whose ``flush()`` leaves the flushing to its writer thread (every ``flush_secs``);
    ``close()`` still flushes every event file."""

    def flush(self) -> None:
        """Do not wait for the writer thread: it flushes every ``flush_secs``, and ``close()`` flushes the rest."""


def is_number(value: Any) -> bool:
    """A value SB3 writes with ``add_scalar`` (a numpy scalar type that is not a string)."""
    return isinstance(value, np.ScalarType) and not isinstance(value, str | bytes)


class PeriodicTensorBoardOutputFormat(TensorBoardOutputFormat):
    """SB3's TensorBoard output format (same tags, steps and values, same folder): a dump's numbers in one event, and
    a :class:`PeriodicFlushWriter`."""

    def __init__(self, folder: str) -> None:  # SB3's __init__ makes a plain SummaryWriter: not called
        self.writer = PeriodicFlushWriter(log_dir=folder, flush_secs=FLUSH_SECONDS)
        self._is_closed = False

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]], step: int = 0) -> None:
        assert not self._is_closed, "The SummaryWriter was closed, please re-create one."
        kept = {key: value for key, value in key_values.items() if "tensorboard" not in (key_excluded.get(key) or ())}
        numbers = [
            Summary.Value(tag=key, simple_value=float(value)) for key, value in sorted(kept.items()) if is_number(value)
        ]
        if numbers:
            assert self.writer.file_writer is not None  # made by SummaryWriter.__init__
            self.writer.file_writer.add_summary(Summary(value=numbers), step)
        others = {key: value for key, value in kept.items() if not is_number(value)}
        if others:
            super().write(others, {key: key_excluded.get(key) or () for key in others}, step)


EVENT_FILES = "events.out.tfevents.*"
_LENGTH = struct.Struct("<Q")  # a TFRecord: length (8 bytes), its CRC (4), the record, its CRC (4)


def cut_event_files(folder: Path, last_step: int | None) -> None:
    """Cut a run's TensorBoard event files back to ``last_step`` (a resumed run writes the steps after it again, so a
    curve goes on from there instead of doubling back); None: remove them (a run that starts over).

    Records are copied byte for byte; a record cut short by a killed process is dropped.
    """
    for path in sorted(folder.glob(EVENT_FILES)):
        if last_step is None:
            path.unlink()
            continue
        data = read_bytes(folder, path.name, memory_budget())  # a resumed run dir's file: plain, no link, capped
        records = list(_records(data))
        kept = [record for record, step in records if step <= last_step]
        if sum(map(len, kept)) != len(data):
            with atomic_path(path) as tmp:
                tmp.write_bytes(b"".join(kept))


def _records(data: bytes) -> Iterator[tuple[bytes, int]]:
    """Each complete record of an event file with its event's step."""
    offset = 0
    while offset + _LENGTH.size + 4 <= len(data):
        (length,) = _LENGTH.unpack_from(data, offset)
        end = offset + _LENGTH.size + 4 + length + 4
        if end > len(data):
            return
        payload = data[offset + _LENGTH.size + 4 : end - 4]
        yield data[offset:end], Event.FromString(payload).step
        offset = end
