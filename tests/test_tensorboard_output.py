"""A run's TensorBoard output: every dump's scalars reach the event file, without a flush per dump."""

from __future__ import annotations

from pathlib import Path

import pytest
from stable_baselines3.common.logger import Logger
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlzoo.loggers.tensorboard import PeriodicTensorBoardOutputFormat


def test_every_dump_reaches_the_event_file_and_only_close_flushes(tmp_path: Path) -> None:
    output = PeriodicTensorBoardOutputFormat(str(tmp_path))
    flushes: list[int] = []
    assert output.writer.file_writer is not None
    file_flush = output.writer.file_writer.flush
    output.writer.file_writer.flush = lambda: flushes.append(1) or file_flush()  # type: ignore[method-assign]
    logger = Logger(folder=str(tmp_path), output_formats=[output])
    for step in range(50):
        logger.record("train/loss", 1.0 / (step + 1))
        logger.record("rollout/ep_rew_mean", float(step))
        logger.dump(step * 256)
    assert flushes == []  # SB3's own format flushes after each of the 50 dumps
    logger.close()
    assert flushes

    (events,) = tmp_path.glob("events.out.tfevents.*")
    accumulator = EventAccumulator(str(events))
    accumulator.Reload()
    assert sorted(accumulator.Tags()["scalars"]) == ["rollout/ep_rew_mean", "train/loss"]
    rewards = accumulator.Scalars("rollout/ep_rew_mean")
    assert [e.step for e in rewards] == [step * 256 for step in range(50)]
    assert [e.value for e in rewards] == pytest.approx(list(range(50)))
