"""Learning checks at rl-baselines3-zoo's budgets (slow: ``python -m pytest -m slow``)."""

from __future__ import annotations

import pytest

from conftest import Compose
from rlzoo.train import train

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("overrides", "threshold"),
    [
        (["algo=ppo", "env=CartPole"], 475.0),  # tuned pair, 100k steps
        (["algo=sac", "env=Pendulum"], -200.0),  # tuned pair, 20k steps
        (["algo=td3", "env=Pendulum"], -200.0),  # tuned pair, 20k steps
    ],
    ids=["ppo-CartPole", "sac-Pendulum", "td3-Pendulum"],
)
def test_tuned_pair_reaches_threshold(overrides: list[str], threshold: float, compose: Compose) -> None:
    metrics = train(compose([*overrides, "verbose=0"]))
    assert metrics["test/mean_return"] >= threshold
