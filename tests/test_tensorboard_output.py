"""A run's TensorBoard output: every dump's scalars reach the event file in one event, without a flush per dump."""

from __future__ import annotations

from pathlib import Path

import pytest
from stable_baselines3.common.logger import Logger
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

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
        logger.record("train/n_updates", step)
        logger.record("train/not_in_tensorboard", 7.0, exclude="tensorboard")
        logger.dump(step * 256)
    assert flushes == []  # SB3's own format flushes after each of the 50 dumps
    logger.close()
    assert flushes

    (events,) = tmp_path.glob("events.out.tfevents.*")
    accumulator = EventAccumulator(str(events))
    accumulator.Reload()
    assert sorted(accumulator.Tags()["scalars"]) == ["rollout/ep_rew_mean", "train/loss", "train/n_updates"]
    rewards = accumulator.Scalars("rollout/ep_rew_mean")
    assert [e.step for e in rewards] == [step * 256 for step in range(50)]
    assert [e.value for e in rewards] == pytest.approx(list(range(50)))
    assert [e.value for e in accumulator.Scalars("train/n_updates")] == list(range(50))
    summaries = [event for event in LegacyEventFileLoader(str(events)).Load() if event.HasField("summary")]
    assert len(summaries) == 50  # one event per dump (SB3 writes one per scalar: 150)
    assert all(len(event.summary.value) == 3 for event in summaries)


def test_text_still_takes_sb3s_path(tmp_path: Path) -> None:
    output = PeriodicTensorBoardOutputFormat(str(tmp_path))
    logger = Logger(folder=str(tmp_path), output_formats=[output])
    logger.record("env/name", "CartPole-v1")
    logger.record("train/loss", 0.5)
    logger.dump(10)
    logger.close()

    (events,) = tmp_path.glob("events.out.tfevents.*")
    accumulator = EventAccumulator(str(events))
    accumulator.Reload()
    assert accumulator.Tags()["scalars"] == ["train/loss"]
    assert "env/name/text_summary" in accumulator.Tags()["tensors"]
