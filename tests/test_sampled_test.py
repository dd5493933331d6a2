"""sampled_test=true: the test episodes are played again with sampled actions, after and apart from the greedy ones."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from conftest import TINY_ALGO_RUNS, TINY_RUN, Compose
from rlzoo.errors import ConfigError
from rlzoo.train import console_figures, train

RUN = ["algo=ppo", *TINY_ALGO_RUNS["ppo"], *TINY_RUN, "test_episodes=4", "test_envs=2"]


def returns_of(path: Path) -> list[float]:
    with path.open() as stream:
        return [float(row["return"]) for row in csv.DictReader(stream)]


def test_sampled_test_adds_its_episodes_and_leaves_the_greedy_ones_alone(compose: Compose, tmp_path: Path) -> None:
    greedy_only = train(compose(RUN, run_dir=tmp_path / "greedy"))
    both = train(compose([*RUN, "sampled_test=true"], run_dir=tmp_path / "both"))
    assert not (tmp_path / "greedy" / "test_returns_sampled.csv").exists()
    assert not any(key.startswith("test_sampled/") for key in greedy_only)
    # The greedy test is the same run's: same returns, same metrics.
    assert returns_of(tmp_path / "both" / "test_returns.csv") == returns_of(tmp_path / "greedy" / "test_returns.csv")
    assert both["test/mean_return"] == greedy_only["test/mean_return"]
    sampled = returns_of(tmp_path / "both" / "test_returns_sampled.csv")
    assert len(sampled) == 4 and both["test_sampled/episodes"] == 4
    assert both["test_sampled/mean_return"] == pytest.approx(np.mean(sampled), rel=1e-5)
    assert both["test_sampled/min_return"] == min(sampled)
    assert "sampled actions" in console_figures(both) and "sampled actions" not in console_figures(greedy_only)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["sampled_test=true", "deterministic_test=false"], r"sampled_test=true .*allowed: sampled_test=false, or"),
        (["sampled_test=maybe"], r"sampled_test='maybe'"),
    ],
)
def test_bad_sampled_test(compose: Compose, tmp_path: Path, overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        train(compose([*RUN, *overrides], run_dir=tmp_path / "bad"))
    assert not (tmp_path / "bad").exists()
