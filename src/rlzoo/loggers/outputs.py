"""SB3 metric logging for a run: console, CSV, TensorBoard and (optionally) Weights & Biases."""

from __future__ import annotations

import netrc
import os
import shutil
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from stable_baselines3.common.logger import (
    CSVOutputFormat,
    KVWriter,
    Logger,
    filter_excluded_keys,
    make_output_format,
)

from rlzoo.confined import open_plain
from rlzoo.errors import ConfigError
from rlzoo.loggers.wandb_state import WandbState, init_kwargs, lost, service_errors, set_aside
from rlzoo.rundir import RunDir
from rlzoo.schema import parse

FORMATS = ("stdout", "csv", "tensorboard")
WANDB_HOST = "https://api.wandb.ai"
CONNECT_TIMEOUT_S = 5.0  # reaching the W&B server, checked with the plan
INIT_TIMEOUT_S = 15.0  # wandb.init online (W&B's own default: 90 s)
OFFLINE_HINT = "or use logger.wandb.mode=offline and `wandb sync <run dir>/wandb` later"


@dataclass(frozen=True)
class WandbSettings:
    """Where a run appears in Weights & Biases."""

    project: str
    group: str | None = None
    name: str | None = None
    entity: str | None = None
    mode: Literal["offline", "online", "disabled"] = "offline"
    tags: list[str] = field(default_factory=list)

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> WandbSettings:
        """The checked ``logger.wandb`` keys."""
        return parse(cls, values, prefix="logger.wandb.")


class WandbWriter(KVWriter):
    """Mirror every SB3 metric (``rollout/``, ``train/``, ``time/`` ...) into a W&B run.

    :param state: the run dir's W&B record: each point is kept in its copy (offline) and its step recorded; online,
        points at steps W&B had before this process started are dropped (a resumed run re-trains from its checkpoint).
    :param prefix: put before every key (a multi-agent run's learner name).
    """

    def __init__(self, run: Any, state: WandbState | None = None, prefix: str = "") -> None:
        self.run, self.prefix = run, prefix
        self.state = state
        self.floor = state.floor if state is not None else -1
        self.gone = False

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]], step: int = 0) -> None:
        if step <= self.floor:
            return
        point = {
            self.prefix + key: int(value) if isinstance(value, Integral) else float(value)
            for key, value in key_values.items()
            if isinstance(value, Real) and "wandb" not in key_excluded.get(key, ())
        }  # NumPy's scalars too (PPO's approx_kl is a float32), as Python numbers
        point["global_step"] = step
        if self.state is not None:
            self.state.record(point)  # kept even when W&B's service is gone: a resumed run logs it
        if self.gone:
            return
        try:
            self.run.log(point)
        except service_errors() as error:  # W&B's service killed by the job's signal: the run goes on
            self.gone = True
            lost(error)
            return
        if self.state is not None:
            self.state.advance(step)

    def close(self) -> None:
        """The W&B run is finished by the owner of the logger (in a ``finally``)."""


class AppendingCSVOutputFormat(CSVOutputFormat):
    """SB3's CSV writer, continuing an existing file (a resumed run) instead of truncating it; new columns are added
    in sorted order (SB3 adds them in a set's order, which changes from process to process), so that a resumed run
    and the uninterrupted one write the same header."""

    def __init__(self, filename: str) -> None:
        if not os.path.lexists(filename):
            super().__init__(filename)
            return
        self.file = open_plain(Path(filename), "r+")  # closed by close(), as in SB3; never a link or a FIFO
        self.keys = [key for key in self.file.readline().rstrip("\n").split(",") if key]
        self.separator = ","
        self.quotechar = '"'
        self.file.seek(0, os.SEEK_END)

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]], step: int = 0) -> None:
        extra = sorted(filter_excluded_keys(key_values, key_excluded, "csv").keys() - set(self.keys))
        if extra:
            self._add_columns(extra)
        super().write(key_values, key_excluded, step)  # no new keys left for SB3 to add

    def _add_columns(self, extra: list[str]) -> None:
        """Rewrite the file with ``extra`` columns after the others (empty in the rows already written)."""
        self.file.seek(0)
        lines = self.file.readlines()
        self.keys.extend(extra)
        self.file.seek(0)
        self.file.write(self.separator.join(self.keys) + "\n")
        for line in lines[1:]:
            self.file.write(line[:-1] + self.separator * len(extra) + "\n")


def comparison_columns(config: dict[str, Any]) -> dict[str, Any]:
    """Flat config columns to compare runs by in W&B's table: algorithm class, env id, representation, seed."""
    return {
        "algo_name": str(config["algo"].get("_target_", "")).rsplit(".", 1)[-1],
        "env_id": config["env"].get("id"),
        "srl_model_name": config["srl_model"].get("name"),
        "seed": config.get("seed"),
    }


def start_wandb(settings: WandbSettings, run: RunDir, config: dict[str, Any]) -> Any:
    """Start a W&B run writing under the run dir; offline unless ``mode=online``. A run dir keeps its W&B run id
    (:class:`~rlzoo.loggers.wandb_state.WandbState`): a resumed run continues the same W&B run; offline, the earlier
    processes' folders are set aside first (:func:`~rlzoo.loggers.wandb_state.set_aside`), their points logged again
    once the logs are cut back (:meth:`~rlzoo.loggers.wandb_state.WandbState.continue_offline`).

    :raise ConfigError: ``wandb.init`` failed (a server that answers but refuses the run, a TLS error ...): one line,
        and the ``wandb/`` folder it began is removed. :class:`~rlzoo.errors.Refused`: the run dir's copy of the W&B
        points is not rlzoo's.
    """
    import wandb

    folder = run.path / "wandb"
    existed = folder.exists()
    state = WandbState.of(run, offline=settings.mode == "offline")
    if state.offline:
        state.points()  # checked before anything moves
        set_aside(run)
    try:
        return wandb.init(
            **init_kwargs(state),
            project=settings.project,
            entity=settings.entity,
            group=settings.group,
            name=settings.name or run.path.name,
            tags=settings.tags,
            mode=settings.mode,
            dir=str(run.path),
            config={**config, **comparison_columns(config)},
            reinit="create_new",
            settings=wandb.Settings(init_timeout=INIT_TIMEOUT_S),
        )
    except Exception as error:  # W&B raises its own errors, and others from the network stack below it
        if not existed:
            shutil.rmtree(folder, ignore_errors=True)
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ConfigError(
            f"logger.wandb.mode={settings.mode}: wandb.init failed ({type(error).__name__}: {first}); "
            f"{OFFLINE_HINT if settings.mode == 'online' else 'or use logger=default'}"
        ) from None


def check_wandb_online(settings: WandbSettings) -> None:
    """With ``mode=online``, fail in one line before the run dir exists when W&B has no credentials here or its
    server cannot be reached within :data:`CONNECT_TIMEOUT_S` (a run never falls back to offline by itself: the user
    asked for a live run; ``logger.wandb.mode=offline`` and ``wandb sync`` later is the way without network).

    Credentials are what ``wandb.init`` reads: ``WANDB_API_KEY``, ``WANDB_IDENTITY_TOKEN_FILE``, or the entry that
    ``wandb login`` writes into ``~/.netrc`` (``NETRC`` elsewhere) for the server (``WANDB_BASE_URL``).
    """
    if settings.mode != "online":
        return
    url = os.environ.get("WANDB_BASE_URL", WANDB_HOST).rstrip("/")
    parts = urlsplit(url)
    host = parts.hostname or url
    if not _has_wandb_credentials(host):
        raise ConfigError(
            f"logger.wandb.mode=online needs W&B credentials (WANDB_API_KEY or `wandb login`) for {url}; {OFFLINE_HINT}"
        )
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise ConfigError(
            f"logger.wandb.mode=online cannot reach {url} within {CONNECT_TIMEOUT_S:g} s ({error}); {OFFLINE_HINT}"
        ) from None


def _has_wandb_credentials(host: str) -> bool:
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    path = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")
    try:
        return netrc.netrc(path).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def check_formats(formats: Sequence[str], verbose: int) -> list[str]:
    """The checked output formats, without the console when ``verbose`` is 0."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ConfigError(f"logger.formats has {unknown}; allowed: {', '.join(FORMATS)}")
    return [f for f in formats if verbose or f != "stdout"]


def make_logger(
    run: RunDir,
    formats: Sequence[str],
    wandb_run: Any = None,
    wandb_prefix: str = "",
    wandb_state: WandbState | None = None,
) -> Logger:
    """An SB3 logger writing ``formats`` (see :func:`check_formats`) into the run dir (+ W&B with ``wandb_run``, its
    keys prefixed with ``wandb_prefix``: a multi-agent run's learner name; ``wandb_state``: the W&B record of the
    run dir that holds it, ``run``'s own when None)."""
    writers: list[KVWriter] = []
    for name in formats:
        if name == "csv":
            writers.append(AppendingCSVOutputFormat(str(run.progress)))
        elif name == "tensorboard":
            from rlzoo.loggers.tensorboard import PeriodicTensorBoardOutputFormat

            writers.append(PeriodicTensorBoardOutputFormat(str(run.tensorboard_dir)))
        else:
            writers.append(make_output_format(name, str(run.path)))
    if wandb_run is not None:
        writers.append(WandbWriter(wandb_run, wandb_state or WandbState.of(run), wandb_prefix))
    return Logger(folder=str(run.path), output_formats=writers)
