"""Learning checks of the tuned pairs on KukaButton: SAC with Cartesian actions, TQC with joint-space actions (slow:
``pytest -m slow tests/test_kuka_learning.py``).

Each trains with ``python -m rlzoo.train``'s config and the tuned pair, then plays 100 deterministic test episodes with
the run's model in the run's test env (its representation, frame stack and frozen normalisation, as in the run's own
test episodes) and counts those that end with the button pressed (``info["is_success"]``: 5 contact steps). The budgets
and measured figures are in the pair files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import Compose
from extras import require_extra
from rlzoo.playback.loading import load_run
from rlzoo.train import train

require_extra("pybullet", "arm")

TEST_EPISODES = 100


def success_rate(run_dir: Path, episodes: int = TEST_EPISODES, seed: int = 10_000) -> float:
    """:return: the fraction of ``episodes`` deterministic episodes of the run's model that press the button."""
    run = load_run(run_dir)
    venv = run.make_env(seed=seed)  # the env keys rlzoo reads itself (frame_stack) are applied here, not by the env
    successes, ended = 0, 0
    obs = venv.reset()
    while ended < episodes:
        assert isinstance(obs, np.ndarray)  # ground truth: one array
        action, _ = run.model.predict(obs, deterministic=True)
        obs, _, dones, infos = venv.step(action)
        if dones[0]:
            ended += 1
            successes += bool(infos[0].get("is_success"))
    venv.close()
    return successes / episodes


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [
        # Cartesian actions: SAC resolves continuous: null to true; the pair sac_KukaButton applies by itself.
        ["algo=sac", "env=KukaButton", "env.random_target=true"],
        # Joint-space actions, fixed button: TQC with the pair tqc_KukaButtonJoints (selected explicitly).
        ["algo=tqc", "env=KukaButton", "algo_env=tqc_KukaButtonJoints"],
    ],
    ids=["sac_cartesian_random_target", "tqc_joints"],
)
def test_arm_presses_the_button(overrides: list[str], compose: Compose, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    train(compose([*overrides, "test_episodes=1", "checkpoint_freq=0", "verbose=0"], run_dir=run_dir))
    assert success_rate(run_dir) >= 0.9
