"""Slurm's warning (SIGUSR2) while a run learns: noted, acted on at the learning's next step, and handed on to the
handler that was there (Submitit's requeues the job); once learning ends, that handler has the signal again."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from rlzoo.training.requeue import RequeueSignal


@pytest.fixture
def previous() -> Iterator[list[int]]:
    """A handler standing in for Submitit's: it records the signals it gets."""
    got: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        got.append(signum)

    old = signal.signal(signal.SIGUSR2, handler)
    yield got
    signal.signal(signal.SIGUSR2, old)


def test_the_signal_is_noted_then_handed_on_once(previous: list[int]) -> None:
    requeue = RequeueSignal()
    requeue.arm()
    os.kill(os.getpid(), signal.SIGUSR2)
    assert requeue.received and previous == []  # noted, not acted on inside the handler
    requeue.hand_on()
    assert previous == [signal.SIGUSR2] and not requeue.received
    requeue.learning_ended()  # already handed on: nothing more
    assert previous == [signal.SIGUSR2]


def test_after_learning_the_previous_handler_gets_the_signal(previous: list[int]) -> None:
    requeue = RequeueSignal()
    requeue.arm()
    os.kill(os.getpid(), signal.SIGUSR2)  # after the last step: nobody acted on it
    requeue.learning_ended()
    assert previous == [signal.SIGUSR2]
    os.kill(os.getpid(), signal.SIGUSR2)  # during saving and testing: straight to the previous handler
    assert previous == [signal.SIGUSR2] * 2 and not requeue.received
