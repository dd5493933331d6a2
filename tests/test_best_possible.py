"""The best possible test returns of the headline (``algo=sac env=MobileRobot``) and of its random-target variant,
computed on the runs' own 100 test episodes (seeds 0/1/2) by an optimal scripted policy; docs/headline_study.md states
them once.

The policy moves each axis at full speed toward the target, clipped to the robot's wall limits. After k steps any
policy's robot lies in the square of half-side 0.1 k around its start (per-axis clipped actions), inside the walls;
this policy is at the point of that square nearest to the target, so it enters the +1 radius as early as possible,
then stays without a bump. (Driving straight at the target is slower: its per-step move is 0.1 in distance, not per
axis.)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlzoo.config import compose_config
from rlzoo.envs.mobile_robot import STEP, X_LIMITS, Y_LIMITS
from rlzoo.training.build import RunBuilder
from rlzoo.training.episodes import play_episodes
from rlzoo.training.plan import plan_run

HEADLINE = Path(__file__).resolve().parents[1] / "docs" / "headline_study.md"
SEEDS = (0, 1, 2)
# Mean test return per seed, as docs/headline_study.md states it.
BEST_POSSIBLE = {"false": "235.60 / 235.53 / 235.38", "true": "240.81 / 240.80 / 240.87"}
MARGIN = 1e-3  # aim this far inside the wall limits: float32 observations must not push a move past them


class PerAxisToTarget:
    """The optimal scripted policy on absolute observations (robot x, y, target x, y); continuous actions."""

    def predict(self, observation: np.ndarray, **_: Any) -> tuple[np.ndarray, None]:
        robot, target = observation[:, :2], observation[:, 2:4]
        low = np.array([X_LIMITS[0], Y_LIMITS[0]]) + MARGIN
        high = np.array([X_LIMITS[1], Y_LIMITS[1]]) - MARGIN
        aim = np.clip(target, low, high)
        return np.clip((aim - robot) / STEP, -1.0, 1.0).astype(np.float32), None


def best_possible(random_target: str, seed: int, tmp_path: Path) -> float:
    """The scripted policy's mean return over the test episodes of ``algo=sac env=MobileRobot seed=<seed>``."""
    overrides = ["algo=sac", "env=MobileRobot", f"env.random_target={random_target}", f"seed={seed}"]
    plan = plan_run(compose_config(overrides, run_dir=tmp_path / "run"), run_dir_state=False)
    assert plan.config.env.relative_ground_truth is False and plan.config.env.continuous is True
    venv = RunBuilder(plan).test_env(None, n_envs=10)
    try:
        results = play_episodes(PerAxisToTarget(), venv, plan.settings.test_episodes)  # type: ignore[arg-type]
    finally:
        venv.close()
    assert len(results) == 100 and all(r.length == 250 for r in results)
    return float(np.mean([r.ret for r in results]))


@pytest.mark.parametrize("random_target", sorted(BEST_POSSIBLE), ids=["fixed-target", "random-target"])
def test_best_possible_returns_are_the_ones_the_headline_page_states(random_target: str, tmp_path: Path) -> None:
    computed = " / ".join(f"{best_possible(random_target, seed, tmp_path):.2f}" for seed in SEEDS)
    assert computed == BEST_POSSIBLE[random_target]
    assert re.search(rf"best possible[^.]*{re.escape(computed)}", HEADLINE.read_text())
