"""Live plots (``logger=visdom``) against a real visdom server on a free local port, read back over its HTTP API."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conftest import TINY_ALGO_RUNS, Compose
from extras import require_extra
from rlzoo.loggers.live_plot import EPISODE_WINDOWS, VisdomSettings, VisdomWriter, connect, start_server
from rlzoo.results.runs import read_run
from rlzoo.rundir import RunDir
from rlzoo.train import train

require_extra("visdom", "live")

RUN = ["algo=ppo", *TINY_ALGO_RUNS["ppo"], "total_timesteps=640", "checkpoint_freq=0", "test_episodes=1",
       "verbose=0", "logger=visdom", "logger.visdom.flush_seconds=0"]  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[int]:
    """A visdom server started for the test (``visdom.server``'s own entrypoint), stopped after it."""
    port = free_port()
    process = start_server(port, log=tmp_path / "visdom.log")
    try:
        client = connect(VisdomSettings(port=port), "main", wait_seconds=60)
        assert client is not None, (tmp_path / "visdom.log").read_text()
        yield port
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def window(port: int, env: str, win: str) -> dict:
    client = connect(VisdomSettings(port=port), env)
    return json.loads(client.get_window_data(win, env))


def test_a_run_streams_its_episodes_and_metrics_to_visdom(compose: Compose, tmp_path: Path, server: int) -> None:
    train(compose([*RUN, f"logger.visdom.port={server}", "logger.visdom.env=rlzoo_test"]))

    result = read_run(RunDir(tmp_path / "run"))  # the episodes the run's Monitor files hold
    per_episode = window(server, "rlzoo_test", "episode_reward_per_episode")["content"]["data"][0]
    assert per_episode["x"] == list(range(1, len(result.returns) + 1)) and len(result.returns) >= 20
    assert np.allclose(per_episode["y"], result.returns)
    by_step = window(server, "rlzoo_test", "episode_reward")["content"]["data"][0]
    assert np.allclose(by_step["y"], result.returns) and np.all(np.diff(by_step["x"]) >= 0)
    assert by_step["x"][-1] <= 640
    smoothed = window(server, "rlzoo_test", "episode_reward_smoothed")["content"]["data"][0]
    running = np.cumsum(result.returns) / np.arange(1, len(result.returns) + 1)  # fewer than 100 episodes: all so far
    assert np.allclose(smoothed["y"], running)
    # SB3's metrics, as TensorBoard gets them: one window per key, x = agent steps.
    loss = window(server, "rlzoo_test", "train/value_loss")["content"]["data"][0]
    assert loss["x"] == list(range(128, 641, 64)) and np.all(np.isfinite(loss["y"]))
    windows = json.loads(connect(VisdomSettings(port=server), "rlzoo_test").get_window_data(env="rlzoo_test"))
    assert set(EPISODE_WINDOWS) | {"train/value_loss", "rollout/ep_rew_mean"} <= set(windows)
    assert (tmp_path / "run" / "tb").is_dir()  # TensorBoard as with the default logger


def test_no_server_means_no_live_plots_not_a_failed_run(
    compose: Compose, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    metrics = train(compose([*RUN, f"logger.visdom.port={port}"]))
    assert metrics["train/timesteps"] == 640
    warning = f"no visdom server at http://localhost:{port}; training goes on without live plots"
    assert warning in capsys.readouterr().err


def test_bad_visdom_settings_are_one_message(compose: Compose) -> None:
    from rlzoo.errors import ConfigError

    with pytest.raises(ConfigError, match=r"unknown key\(s\) logger.visdom.colour"):
        train(compose([*RUN, "+logger.visdom.colour=red"]))
    with pytest.raises(ConfigError, match=r"logger.visdom.port=0 must be ≥ 1"):
        train(compose([*RUN, "logger.visdom.port=0"]))


def test_start_server_starts_one_that_outlives_the_run(
    compose: Compose, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    train(compose([*RUN, f"logger.visdom.port={port}", "logger.visdom.start_server=true", "logger.visdom.env=own"]))
    printed = capsys.readouterr().out
    match = re.search(rf"started a visdom server at http://localhost:{port} \(pid (\d+)\)", printed)
    assert match, printed
    try:
        data = window(port, "own", "episode_reward_per_episode")["content"]["data"][0]  # still serving after the run
        assert np.allclose(data["y"], read_run(RunDir(tmp_path / "run")).returns)
    finally:
        os.killpg(int(match.group(1)), signal.SIGTERM)


def test_a_server_that_goes_away_costs_the_plots_not_the_run(tmp_path: Path) -> None:
    port = free_port()
    process = start_server(port, log=tmp_path / "visdom.log")
    client = connect(VisdomSettings(port=port), "gone", wait_seconds=60)
    assert client is not None
    lost: list[bool] = []
    writer = VisdomWriter(client, "gone", lambda: lost.append(True))
    writer.write({"train/loss": 1.0}, {}, step=1)
    assert json.loads(client.get_window_data("train/loss", "gone"))["content"]["data"][0]["y"] == [1.0]
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=30)
    writer.write({"train/loss": 0.5}, {}, step=2)  # no exception: the writer stops and says so once
    writer.write({"train/loss": 0.25}, {}, step=3)
    assert lost == [True] and writer.client is None
