"""Test episodes on several envs at once: seeded per episode, so a deterministic policy's results do not depend on
how many envs play them; envs without a step limit still end them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import TINY_OFF_POLICY, TINY_ON_POLICY, Compose
from rlzoo.playback.loading import LoadedRun, load_run
from rlzoo.rundir import RunDir
from rlzoo.train import train
from rlzoo.training.build import RunBuilder
from rlzoo.training.episodes import EpisodeResult, play_episodes

TINY = ["checkpoint_freq=0", "verbose=0", "logger.formats=[csv]", "normalize=true"]
RUNS = {
    "CartPole": ["algo=ppo", "env=CartPole", "n_envs=1", *TINY_ON_POLICY, "algo.n_epochs=2", "total_timesteps=96"],
    "MobileRobot": ["algo=sac", "env=MobileRobot", "env.shape_reward=true", "+env.max_steps=60", *TINY_OFF_POLICY,
                    "total_timesteps=120"],
}  # fmt: skip


def played(loaded: LoadedRun, episodes: int, n_envs: int, seed: int) -> list[EpisodeResult]:
    venv = RunBuilder(loaded.plan).test_env(loaded.normalization, seed, n_envs=n_envs)
    try:
        return play_episodes(loaded.model, venv, episodes, deterministic=True)
    finally:
        venv.close()


@pytest.mark.parametrize("env", sorted(RUNS))
def test_test_episodes_on_several_envs_equal_the_one_env_runners(env: str, compose: Compose, tmp_path: Path) -> None:
    """7 episodes on 3 envs (3 + 2 + 2, one env playing past its share) as the run tests; then on one env."""
    train(compose([*RUNS[env], *TINY, "test_episodes=7", "test_envs=3"]))
    rows = RunDir(tmp_path / "run").test_returns.read_text().splitlines()[1:]
    written = [(float(ret), int(length)) for _, ret, length in (row.split(",") for row in rows)]
    loaded = load_run(tmp_path / "run")
    seed = loaded.plan.settings.seed + 10_000
    one_env = played(loaded, 7, 1, seed)
    assert [r.length for r in one_env] == [length for _, length in written]
    assert [r.ret for r in one_env] == pytest.approx([ret for ret, _ in written], rel=1e-5)  # written to 6 digits
    assert len({r.ret for r in one_env}) > 1  # the episodes differ: each has its own seed
    for n_envs in (3, 7):
        results = played(loaded, 7, n_envs, seed)
        assert [r.length for r in results] == [r.length for r in one_env]
        if env == "CartPole":  # discrete actions: exactly
            assert results == one_env
        else:  # a float32 network's outputs differ in their last bits between a batch of 1 and of n (BLAS kernels)
            assert [r.ret for r in results] == pytest.approx([r.ret for r in one_env], rel=1e-6)
    assert played(loaded, 2, 1, seed + 5) == one_env[5:]  # episode i is seeded seed + i


def test_envs_without_a_step_limit_end_their_test_episodes_at_max_test_steps(compose: Compose, tmp_path: Path) -> None:
    run = ["algo=dqn", "env=gym", "env.id=CliffWalking-v1", *TINY_OFF_POLICY, "algo.learning_starts=1000"]
    train(compose([*run, *TINY, "total_timesteps=32", "test_episodes=5", "test_envs=2", "max_test_steps=30"]))
    rows = RunDir(tmp_path / "run").test_returns.read_text().splitlines()[1:]
    assert [int(row.split(",")[2]) for row in rows] == [30] * 5


def test_a_recorder_follows_one_env(compose: Compose, tmp_path: Path) -> None:
    train(compose([*RUNS["CartPole"], *TINY, "test_episodes=0"]))
    loaded = load_run(tmp_path / "run")
    venv = RunBuilder(loaded.plan).test_env(loaded.normalization, n_envs=2)
    try:
        with pytest.raises(ValueError, match="a recorder follows one env, got 2 envs"):
            play_episodes(loaded.model, venv, 2, recorder=object())  # type: ignore[arg-type]
    finally:
        venv.close()


def test_the_test_phase_shows_its_progress(
    compose: Compose, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``progress_bar=true``: the test episodes have a bar of their own (episodes done, steps played), as training."""
    monkeypatch.setattr("rlzoo.training.episodes.REFRESH_SECONDS", 0.0)  # every step redraws: the step count shows
    train(compose([*RUNS["CartPole"], *TINY, "test_episodes=6", "test_envs=3", "progress_bar=true"]))
    printed = capfd.readouterr().err
    assert re.search(r"\| 0/6 \[.*, [1-9]\d* steps\]", printed)  # steps counted before the first episode ends
    assert re.search(r"test episodes: 100%\|.*\| 6/6 \[.*episodes/s, \d+ steps\]", printed)
