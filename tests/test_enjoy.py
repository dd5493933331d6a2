"""rlzoo.enjoy and load_run on tiny trained runs: the same agent, env and frozen normalisation as in training."""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path
from unittest import mock

import imageio.v2 as imageio
import numpy as np
import pytest
from PIL import Image, ImageSequence
from stable_baselines3 import PPO

from conftest import TINY_ON_POLICY, TINY_RUN
from rlzoo.config import compose_config
from rlzoo.enjoy import EnjoySettings, Replay, enjoy, main, watch
from rlzoo.errors import ConfigError
from rlzoo.playback.loading import load_run, run_episodes
from rlzoo.train import train
from rlzoo.training.build import RunBuilder

SEED = 4


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PPO on CartPole, one env, normalised observations, checkpoints at 64, 128 and 192 steps, 2 test episodes."""
    run_dir = tmp_path_factory.mktemp("cartpole") / "run"
    overrides = ["algo=ppo", "env=CartPole", "n_envs=1", f"seed={SEED}", *TINY_ON_POLICY, "algo.n_epochs=1", *TINY_RUN]
    train(compose_config(overrides, run_dir=run_dir))
    return run_dir


@pytest.fixture(scope="module")
def robot_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("robot") / "run"
    overrides = ["algo=ppo", "env=MobileRobot", "n_envs=1", *TINY_ON_POLICY, "algo.n_epochs=1", *TINY_RUN]
    train(compose_config([*overrides, "total_timesteps=64", "test_episodes=0"], run_dir=run_dir))
    return run_dir


def quiet(_: str) -> None:
    pass


def test_load_run_rebuilds_model_env_and_frozen_normalisation(cartpole_run: Path) -> None:
    loaded = load_run(cartpole_run)
    assert isinstance(loaded.model, PPO) and loaded.model.num_timesteps == 192 and loaded.label == "final"
    with np.load(cartpole_run / "obs_norm.npz") as saved:
        stats = loaded.normalization
        assert stats is not None
        assert np.array_equal(stats.rms.mean, saved["mean"]) and np.array_equal(stats.rms.var, saved["var"])
        assert stats.clip_obs == float(saved["clip_obs"])
    normalised, raw = loaded.make_env(seed=7), load_run(cartpole_run).make_env(seed=7).unwrapped
    expected = loaded.normalize_observation(raw.reset())
    assert np.allclose(normalised.reset(), expected) and not np.allclose(expected, raw.reset())
    normalised.step(np.array([1]))  # frozen: stepping does not move the statistics
    assert np.array_equal(normalised.normalization.rms.mean, stats.rms.mean)
    assert load_run(cartpole_run, 64).model.num_timesteps == 64
    assert load_run(cartpole_run, "128").label == "checkpoint_128"
    assert load_run(cartpole_run, "latest").label == "final"  # written after the last checkpoint


def test_enjoy_replays_the_test_episodes_and_writes_a_video(cartpole_run: Path) -> None:
    lines: list[str] = []
    settings = EnjoySettings(
        str(cartpole_run), n_episodes=2, seed=SEED + 10_000, video=True, video_formats=("mp4", "gif")
    )
    replay = enjoy(settings, log=lines.append)

    with (cartpole_run / "test_returns.csv").open() as stream:  # the run's own test phase: same seed, one env
        tested = [(float(row["return"]), int(row["length"])) for row in csv.DictReader(stream)]
    assert list(zip(replay.returns, replay.lengths, strict=True)) == tested
    mean = np.mean(replay.returns)
    assert f"return {mean:.2f} ± {np.std(replay.returns):.2f} (std), min {min(replay.returns):.2f}" in lines[0]
    out, stem = cartpole_run / "enjoy", f"final_seed{SEED + 10_000}"  # a replay from another seed than 0 says so
    assert replay.files[:3] == [out / f"{stem}_returns.csv", out / f"{stem}.mp4", out / f"{stem}.gif"]
    assert replay.files[0].read_text().splitlines()[1] == f"0,{replay.returns[0]:g},{replay.lengths[0]}"
    with imageio.get_reader(out / f"{stem}.mp4") as video:  # one frame per agent step, at CartPole's 50 fps
        assert video.count_frames() == sum(replay.lengths)
        assert video.get_data(0).shape == (400, 600, 3)
    with Image.open(out / f"{stem}.gif") as gif:  # identical consecutive frames are merged: count the time instead
        assert sum(frame.info["duration"] for frame in ImageSequence.Iterator(gif)) == sum(replay.lengths) * 20


def test_replays_in_another_mode_or_from_another_seed_keep_their_files(robot_run: Path) -> None:
    def replay_with(deterministic: bool, seed: int) -> Replay:
        return enjoy(EnjoySettings(str(robot_run), n_episodes=2, deterministic=deterministic, seed=seed), log=quiet)

    keys = [(True, 0), (False, 0), (True, 3)]
    replays = {(deterministic, seed): replay_with(deterministic, seed) for deterministic, seed in keys}
    names = {key: replay.files[0].name for key, replay in replays.items()}
    assert names == {
        (True, 0): "final_returns.csv", (False, 0): "final_stochastic_returns.csv", (True, 3): "final_seed3_returns.csv"
    }  # fmt: skip
    for replay in replays.values():  # none overwritten by the next
        rows = replay.files[0].read_text().splitlines()[1:]
        assert [float(row.split(",")[1]) for row in rows] == pytest.approx(replay.returns)
    assert replays[(True, 0)].returns != replays[(True, 3)].returns  # another seed: other episodes


def test_enjoy_without_a_video_plays_the_same_episodes_on_several_envs(cartpole_run: Path) -> None:
    one_env = run_episodes(load_run(cartpole_run), 5, seed=SEED)
    with mock.patch.object(RunBuilder, "test_env", autospec=True, side_effect=RunBuilder.test_env) as test_env:
        replay = enjoy(EnjoySettings(str(cartpole_run), n_episodes=5, seed=SEED), log=quiet)
    assert test_env.call_args.args[-1] == 5  # n_envs: min(test_envs, n_episodes)
    assert replay.returns == [e.ret for e in one_env] and replay.lengths == [e.length for e in one_env]


def test_trajectory_and_action_probability_plots(robot_run: Path, cartpole_run: Path) -> None:
    loaded = load_run(robot_run)
    (episode,) = run_episodes(loaded, 1, positions=True, probabilities=True)
    assert episode.length == 250 and episode.robot.shape == (251, 2) and episode.targets.shape == (251, 2)
    assert np.abs(np.diff(episode.robot, axis=0)).max() <= 0.1 + 1e-9  # one 0.1 move (or a bump) per step
    assert np.allclose(episode.targets, [3.6, 3.0]) and np.allclose(episode.probabilities.sum(axis=1), 1.0)
    settings = EnjoySettings(str(robot_run), n_episodes=2, plot=("trajectory", "action_probabilities"))
    files = enjoy(settings, log=quiet).files
    assert [f.name for f in files] == ["final_returns.csv", "final_trajectory.png", "final_action_probabilities.png"]
    assert all(f.stat().st_size > 10_000 for f in files[1:])
    with pytest.raises(ConfigError, match=r"needs ground-truth positions in info\['robot_position'\].*CartPole-v1"):
        enjoy(EnjoySettings(str(cartpole_run), plot=("trajectory",)), log=quiet)


def test_watch_replays_newer_models_until_the_final_one(cartpole_run: Path, tmp_path: Path) -> None:
    training = tmp_path / "training"  # the run as it was after 64 steps
    shutil.copytree(cartpole_run, training)
    for name in ("model.zip", "obs_norm.npz", "metrics.json", "checkpoints/128", "checkpoints/192"):
        if name.startswith("checkpoints"):
            shutil.rmtree(training / name)
        else:
            (training / name).unlink()
    sleeps: list[float] = []

    def training_goes_on(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:  # nothing new after the first wait; then checkpoint 128, then the final model
            shutil.copytree(cartpole_run / "checkpoints/128", training / "checkpoints/128", copy_function=shutil.copy)
        if len(sleeps) == 3:
            for name in ("obs_norm.npz", "model.zip"):
                shutil.copy(cartpole_run / name, training / name)

    lines: list[str] = []
    settings = EnjoySettings(str(training), n_episodes=1, watch=True, watch_interval=0.5)
    replays = watch(settings, sleep=training_goes_on, log=lines.append)
    assert [r.label for r in replays] == ["checkpoint_64", "checkpoint_128", "final"] and sleeps == [0.5] * 3
    assert sum("waiting for a newer checkpoint or the final model" in line for line in lines) == 3


@pytest.mark.parametrize(
    ("damage", "checkpoint", "message"),
    [
        (None, 500, "checkpoint=500 not found in run .*; available: final, 64, 128, 192"),
        (None, "best", "checkpoint=best: the run .* has no best model .*eval_freq > 0"),
        (None, "newest", "checkpoint='newest'; allowed: final, latest, best or the steps of a checkpoint"),
        ("config.yaml", None, "is not a run dir \\(it has no config.yaml\\)"),
        ("model.zip", None, "has no final model.zip .*available: 64, 128, 192; choose one with checkpoint="),
        ("corrupt", None, "model.zip cannot be loaded as PPO"),
    ],
)
def test_bad_run_dirs_and_checkpoints(
    cartpole_run: Path, tmp_path: Path, damage: str | None, checkpoint: object, message: str
) -> None:
    run = tmp_path / "run"
    shutil.copytree(cartpole_run, run)
    if damage == "corrupt":
        (run / "model.zip").write_bytes(b"not a zip file")
    elif damage is not None:
        (run / damage).unlink()
    with pytest.raises(ConfigError, match=message):
        load_run(run, checkpoint)  # type: ignore[arg-type]


def test_entrypoint_reports_bad_input_in_one_line(cartpole_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["rlzoo.enjoy", f"run={cartpole_run}", "video_formats=[mp4,avi]"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == "rlzoo.enjoy: error: video_formats='avi'; allowed: mp4, gif (one, or a list [a,b])"
    monkeypatch.setattr(sys, "argv", ["rlzoo.enjoy", f"run={cartpole_run}", "checkpoint=7"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == (
        f"rlzoo.enjoy: error: checkpoint=7 not found in run {cartpole_run}; available: final, 64, 128, 192"
    )
