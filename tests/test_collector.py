"""The cyclic garbage collector around a run: on while it trains, with the start-up's objects frozen, and left on
with nothing frozen once the run ends."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

from conftest import TINY_ALGO_RUNS, TINY_RUN, Compose
from rlzoo.collector import collecting
from rlzoo.train import train


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.disable()  # as python -m rlzoo.train starts
    try:
        yield
    finally:
        gc.enable()


def test_collecting_freezes_what_exists_and_unfreezes_it_after(collector_off: None) -> None:
    before = object()
    with collecting():
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
        assert gc.is_tracked([before])  # a new container is collected as usual
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()


def test_a_run_trains_with_the_collector_on_and_ends_with_nothing_frozen(
    collector_off: None, compose: Compose, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[bool, int]] = []
    learn = OnPolicyAlgorithm.learn

    def watched_learn(self: OnPolicyAlgorithm, *args: object, **kwargs: object) -> object:
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        return learn(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(OnPolicyAlgorithm, "learn", watched_learn)
    cfg = compose(["algo=a2c", *TINY_ALGO_RUNS["a2c"], *TINY_RUN, f"run_dir={tmp_path / 'run'}"])
    train(cfg)
    ((enabled, frozen),) = seen
    assert enabled and frozen > 0
    assert gc.get_freeze_count() == 0
