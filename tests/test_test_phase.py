"""The test phase is proportionate to the run: a step budget tied to the training budget (``test_steps``) cuts long
test episodes of a tiny run, Atari's pairs play 10 test games, and progress shows as log lines without a terminal."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from conftest import TINY_OFF_POLICY, TINY_ON_POLICY, Compose
from extras import require_extra
from rlzoo.rundir import RunDir
from rlzoo.train import train
from rlzoo.training.episodes import Progress, _EpisodeBar
from rlzoo.training.settings import RunSettings

QUIET = ["checkpoint_freq=0", "verbose=0", "logger.formats=[csv]"]
# CliffWalking has no step limit and an untrained greedy DQN walks into a wall forever: every test episode is cut.
CLIFF = ["algo=dqn", "env=gym", "env.id=CliffWalking-v1", *TINY_OFF_POLICY, "algo.learning_starts=1000",
         "total_timesteps=32", "test_episodes=2", "test_envs=2"]  # fmt: skip


def lengths(run_dir: Path) -> list[int]:
    return [int(row.split(",")[2]) for row in RunDir(run_dir).test_returns.read_text().splitlines()[1:]]


@pytest.mark.parametrize(
    ("test_steps", "cap", "warning"),
    [
        ("auto", 1_000, "CliffWalking-v1: 2 of 2 test episodes were cut at 1000 steps: test_steps=160 (auto: 5 x "
         "total_timesteps) shared by test_episodes=2, at least 1000 steps each; test_steps=null plays whole episodes"),
        ("5000", 2_500, "2 of 2 test episodes were cut at 2500 steps: test_steps=5000 shared by test_episodes=2"),
        ("null", 3_000, "CliffWalking-v1 has no step limit: an episode was cut at max_test_steps=3000 steps"),
    ],
)  # fmt: skip
def test_test_steps_cut_long_test_episodes_at_their_share(
    compose: Compose, tmp_path: Path, caplog: pytest.LogCaptureFixture, test_steps: str, cap: int, warning: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="rlzoo"):
        train(compose([*CLIFF, *QUIET, f"test_steps={test_steps}", "max_test_steps=3000"]))
    assert lengths(tmp_path / "run") == [cap, cap]
    assert warning in caplog.text
    assert caplog.text.count("test episodes were cut") == (test_steps != "null")  # one line for the test phase


def test_the_budget_never_cuts_an_episode_before_1000_steps() -> None:
    settings = RunSettings(run_dir="run", total_timesteps=64, test_episodes=4)
    assert settings.test_step_budget == 320 and settings.test_episode_cap == 1_000
    big = RunSettings(run_dir="run", total_timesteps=10_000_000, test_episodes=10)
    assert big.test_episode_cap == 5_000_000
    assert RunSettings(run_dir="run", test_steps=None).test_episode_cap is None
    assert RunSettings(run_dir="run", test_episodes=0).test_episode_cap is None


@pytest.mark.parametrize("bad", ["0", "-5", "many"])
def test_a_bad_test_steps_is_one_line(compose: Compose, tmp_path: Path, bad: str) -> None:
    from rlzoo.errors import ConfigError

    with pytest.raises(ConfigError, match=r"test_steps=") as error:
        train(compose(["algo=ppo", "env=CartPole", *QUIET, f"test_steps={bad}"]))
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run").exists()


def test_progress_lines_without_a_terminal(
    compose: Compose, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """stderr is not a terminal under pytest: no bar, but progress lines (episodes done of all, rate, steps) while
    the training and the test episodes play; none at verbose=0."""
    monkeypatch.setattr("rlzoo.progress_lines.LINE_SECONDS", 0.0)  # a line whenever the clock is read
    run = ["algo=ppo", "env=CartPole", "n_envs=1", *TINY_ON_POLICY, "total_timesteps=64", "test_episodes=3"]
    train(compose([*run, "checkpoint_freq=0", "logger.formats=[csv]", "verbose=1"], tmp_path / "talk"))
    err = capsys.readouterr().err.splitlines()
    tests = [line for line in err if line.startswith("test episodes: ")]
    assert tests and all(re.match(r"test episodes: [0-3]/3 episodes \(\d+%\), .*elapsed .*, [\d,]+ steps$", line)
                         for line in tests)  # fmt: skip
    training = [line for line in err if line.startswith("training: ")]
    assert training and all(re.match(r"training: \d+/64 steps \(\d+%\), ", line) for line in training)
    assert training[-1].startswith("training: 64/64 steps (100%)")  # the last line at the end of training
    train(compose([*run, *QUIET], tmp_path / "quiet"))
    assert not [line for line in capsys.readouterr().err.splitlines() if line.startswith(("test episodes", "train"))]


def test_progress_lines_come_at_most_every_ten_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    with _EpisodeBar(Progress("test episodes", lines=True), 10) as bar:
        for step in range(1000):
            bar.show(step // 100, 1)
        assert not capsys.readouterr().err  # 1,000 steps in well under ten seconds
        assert bar._lines is not None
        bar._lines.due -= 10.0  # ten seconds since the phase started
        bar.show(10, 1)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(", ")[0] for line in lines] == ["test episodes: 10/10 episodes (100%)"] * 2  # + the last
    assert lines[0].endswith("1,001 steps")


def test_atari_pairs_play_ten_test_games(compose: Compose, tmp_path: Path) -> None:
    require_extra("ale_py", "atari")
    for algo in ("ppo", "dqn", "a2c"):
        cfg = compose([f"algo={algo}", "env=atari", "env.id=ALE/Breakout-v5", "total_timesteps=2000"], tmp_path / algo)
        settings = RunSettings.from_values({k: v for k, v in cfg.items() if k != "run_dir"} | {"run_dir": "x"})
        assert settings.test_episodes == 10 and settings.test_episode_cap == 1_000


@pytest.mark.slow
def test_a_tiny_atari_run_tests_in_about_its_training_time(compose: Compose, tmp_path: Path) -> None:
    """The documented smoke run (docs/any_env.md): its test phase takes at most 1.5 x its training time."""
    require_extra("ale_py", "atari")
    command = ["algo=ppo", "env=atari", "env.id=ALE/Breakout-v5", "total_timesteps=2000", "hardware.torch_threads=1"]
    metrics = train(compose([*command, "logger.formats=[csv]"]))
    testing = metrics["time/total_seconds"] - metrics["time/train_seconds"]
    print(f"tiny Atari run: training {metrics['time/train_seconds']:.1f} s, saving and testing {testing:.1f} s")
    assert metrics["test/episodes"] == 10 and max(lengths(tmp_path / "run")) <= 1_000
    assert testing <= 1.5 * metrics["time/train_seconds"]
