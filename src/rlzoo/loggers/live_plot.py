"""Live plots on a visdom server (``logger=visdom``), as the S-RL Toolbox showed training.

While a run learns, :class:`LivePlot` sends to a visdom server (``python -m visdom.server``, or started by the run
with ``logger.visdom.start_server=true``):

- the S-RL Toolbox's three windows, from the training episodes: ``episode_reward`` (return per agent step at the
  episode's end), ``episode_reward_smoothed`` (its moving average over ``smooth`` episodes) and
  ``episode_reward_per_episode``;
- every metric SB3 logs (``rollout/``, ``train/``, ``time/``: what TensorBoard gets), one window each, against agent
  steps.

The windows live in one visdom environment per run (``logger.visdom.env``; by default named after the run dir).
A server that cannot be reached does not stop training: the run says so once and goes on without live plots (its
metrics are on disk all the same).
"""

from __future__ import annotations

import importlib.util
import logging
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import KVWriter

from rlzoo.errors import ConfigError
from rlzoo.schema import at_least, parse

# The [live] extra as the README installs it: visdom 0.2.4 (the last for Python 3.11) is an sdist whose setup.py
# imports pkg_resources, so it is built without isolation, with a setuptools that still has it.
INSTALL = (
    'pip install "setuptools<81" wheel && pip install --no-build-isolation "visdom>=0.2.4,<0.3" '
    '&& pip install -e ".[live]"'
)
EPISODE_WINDOWS = ("episode_reward", "episode_reward_smoothed", "episode_reward_per_episode")
# The server of `python -m visdom.server` without its start-up download of JS files (which fails offline): the HTTP
# API works without them; the page needs them, so they are fetched first where the network allows.
SERVER_CODE = """
import sys
from visdom.server.build import download_scripts
from visdom.server.run_server import main
try:
    download_scripts()
except Exception as error:
    print(f"visdom: scripts not downloaded ({error}); the HTTP API works, the web page needs them", file=sys.stderr)
main()
"""


@dataclass(frozen=True)
class VisdomSettings:
    """The keys of ``logger.visdom`` (``conf/logger/visdom.yaml``)."""

    server: str = "http://localhost"
    port: int = field(default=8097, metadata=at_least(1))
    env: str | None = None
    start_server: bool = False
    smooth: int = field(default=100, metadata=at_least(1))
    flush_seconds: float = 2.0

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> VisdomSettings:
        """The checked ``logger.visdom`` keys; one line naming the install when visdom is missing."""
        settings = parse(cls, values, prefix="logger.visdom.")
        if importlib.util.find_spec("visdom") is None:
            raise ConfigError(f"logger=visdom needs the [live] extra (visdom), which is not installed: {INSTALL}")
        return settings


def visdom_env_name(run_dir: Path) -> str:
    """A visdom environment name for a run dir: its last two path parts (``<sweep time>_<job>``), word characters."""
    return re.sub(r"\W+", "_", "_".join(run_dir.resolve().parts[-2:])).strip("_") or "main"


def start_server(port: int, log: Path | None = None) -> subprocess.Popen[bytes]:
    """Start a visdom server on ``port`` in its own session (it outlives the run); return its process.

    :param log: where its output goes (None: a file in the temp folder).
    """
    log = log or Path(tempfile.gettempdir()) / f"visdom-{port}.log"
    with log.open("ab") as stream:
        return subprocess.Popen(
            [sys.executable, "-c", SERVER_CODE, "-port", str(port), "-logging_level", "WARNING"],
            stdout=stream,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def connect(settings: VisdomSettings, env: str, wait_seconds: float = 0.0) -> Any:
    """A visdom client of the server, or None when it cannot be reached within ``wait_seconds``."""
    from visdom import Visdom

    quiet = logging.getLogger("visdom")
    level, quiet.level = quiet.level, logging.CRITICAL  # no traceback per refused connection while waiting
    try:
        deadline = time.monotonic() + wait_seconds
        while True:
            try:  # raise_exceptions: a failed request raises ConnectionError (senders catch it), no printing
                client = Visdom(
                    server=settings.server,
                    port=settings.port,
                    env=env,
                    raise_exceptions=True,
                    use_incoming_socket=False,
                )
                if client.check_connection():
                    return client
            except ConnectionError:
                pass
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.25)
    finally:
        quiet.setLevel(level)


class VisdomWriter(KVWriter):
    """SB3's metrics (what TensorBoard gets) as visdom lines, one window per key, x = agent steps.

    :param lost: called once when the server stops answering; nothing is sent after that.
    """

    def __init__(self, client: Any, env: str, lost: Callable[[], None]) -> None:
        self.client, self.env, self.lost = client, env, lost
        self.windows: set[str] = set()

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]], step: int = 0) -> None:
        if self.client is None:
            return
        try:
            self._send(key_values, key_excluded, step)
        except ConnectionError:
            self.client = None
            self.lost()

    def _send(self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]], step: int) -> None:
        for key, value in key_values.items():
            if isinstance(value, bool) or not isinstance(value, int | float | np.number):
                continue
            if "tensorboard" in key_excluded.get(key, ()):
                continue
            self.client.line(
                Y=[float(value)], X=[step], win=key, env=self.env, update="append" if key in self.windows else None,
                opts={"title": key, "xlabel": "agent steps"},
            )  # fmt: skip
            self.windows.add(key)

    def close(self) -> None:
        """Nothing to close: the client holds no connection."""


class LivePlot(BaseCallback):
    """Stream a run's episodes and SB3 metrics to a visdom server while it learns (see the module docstring)."""

    def __init__(self, settings: VisdomSettings, run_dir: Path) -> None:
        super().__init__()
        self.settings = settings
        self.env = settings.env or visdom_env_name(run_dir)
        self.client: Any = None
        self.writer: VisdomWriter | None = None
        self.returns: list[float] = []
        self.ends: list[int] = []
        self._sent = 0
        self._last_flush = 0.0
        self.server: subprocess.Popen[bytes] | None = None

    def _on_training_start(self) -> None:
        settings = self.settings
        self.client = connect(settings, self.env)
        if self.client is None and settings.start_server:
            self.server = start_server(settings.port)
            self.client = connect(settings, self.env, wait_seconds=30.0)
            if self.client is not None:
                print(
                    f"rlzoo: started a visdom server at {settings.server}:{settings.port} (pid {self.server.pid}); "
                    f"it keeps running after the run (stop it with: kill {self.server.pid})"
                )
        if self.client is None:
            print(
                f"rlzoo: warning: no visdom server at {settings.server}:{settings.port}; training goes on without "
                "live plots (start one: python -m visdom.server, or logger.visdom.start_server=true)",
                file=sys.stderr,
            )
            return
        self.writer = VisdomWriter(self.client, self.env, self._lost)
        self.model.logger.output_formats.append(self.writer)

    def _lost(self) -> None:
        """The server stopped answering: say so once, and send nothing more."""
        if self.client is not None:
            print(
                f"rlzoo: warning: the visdom server at {self.settings.server}:{self.settings.port} stopped answering; "
                "training goes on without live plots",
                file=sys.stderr,
            )
        self.client = None
        if self.writer is not None:
            self.writer.client = None

    def _on_step(self) -> bool:
        if self.client is None:
            return True
        for info in self.locals.get("infos") or ():
            episode = info.get("episode")
            if episode is not None:
                self.returns.append(float(episode["r"]))
                self.ends.append(self.num_timesteps)
        if time.monotonic() - self._last_flush >= self.settings.flush_seconds:
            self.flush()
        return True

    def flush(self) -> None:
        """Send the episodes not yet sent to the three episode windows."""
        new = slice(self._sent, len(self.returns))
        if self.client is None or new.start == new.stop:
            return
        returns = np.asarray(self.returns, dtype=float)
        window = self.settings.smooth
        smoothed = [returns[max(0, i + 1 - window) : i + 1].mean() for i in range(new.start, new.stop)]
        episodes = np.arange(new.start + 1, new.stop + 1)
        steps = self.ends[new]
        update = "append" if self._sent else None
        try:
            for win, x, y, xlabel in (
                (EPISODE_WINDOWS[0], steps, returns[new], "agent steps"),
                (EPISODE_WINDOWS[1], steps, smoothed, "agent steps"),
                (EPISODE_WINDOWS[2], episodes, returns[new], "episodes"),
            ):
                title = win.replace("_", " ") + (f" (last {window})" if win == EPISODE_WINDOWS[1] else "")
                opts = {"title": title, "xlabel": xlabel, "ylabel": "return"}
                self.client.line(Y=np.asarray(y), X=np.asarray(x), win=win, env=self.env, update=update, opts=opts)
        except ConnectionError:
            self._lost()
            return
        self._sent = new.stop
        self._last_flush = time.monotonic()

    def _on_training_end(self) -> None:
        if self.client is None:
            return
        self.flush()
        if self.writer is not None and self.writer in self.model.logger.output_formats:
            self.model.logger.output_formats.remove(self.writer)
        if self.client is not None:
            try:
                self.client.save([self.env])  # the server keeps the env on disk (~/.visdom) across restarts
            except ConnectionError:
                self._lost()
