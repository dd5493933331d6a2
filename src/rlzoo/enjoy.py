"""``python -m rlzoo.enjoy run=<run dir>``: replay a trained agent, with a video, a trajectory or action plots.

The run's kind (:func:`rlzoo.training.kind.kind_of_run`) loads its agent from the run dir alone and replays it (a
single-agent run: env, representation and frozen normalisation as in its test episodes; a multi-agent run: its test
multiagent); videos, plots and per-episode returns are written to ``<run>/enjoy/``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from rlzoo.cli import one_line_errors, run_checked
from rlzoo.config import CONFIG_DIR
from rlzoo.confined import MEMORY_KEY, budget_gib, memory_budget_of, output_folder
from rlzoo.errors import ConfigError
from rlzoo.files import atomic_write_text
from rlzoo.kinds import KIND_PACKAGES  # noqa: F401  (every kind of run, registered)
from rlzoo.playback.loading import enjoy_dir, model_folder
from rlzoo.playback.video import write_video
from rlzoo.rundir import FINAL, LATEST, RunDir
from rlzoo.schema import at_least, parse
from rlzoo.training.kind import ReplayRequest, kind_of_run

PLOTS = ("trajectory", "action_probabilities")
VIDEO_FORMATS = ("mp4", "gif")


def _fail(key: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"{key}={value!r}; allowed: {allowed}")


def _names(key: str, value: Any, allowed: Sequence[str]) -> tuple[str, ...]:
    names = [] if value is None else [value] if isinstance(value, str) else list(value)
    for name in names:
        if name not in allowed:
            raise _fail(key, name, f"{', '.join(allowed)} (one, or a list [a,b])")
    return tuple(names)


@dataclass(frozen=True)
class EnjoySettings:
    """The keys of ``conf/enjoy.yaml`` (see there), checked."""

    run: str
    checkpoint: int | str = FINAL
    n_episodes: int = field(default=10, metadata=at_least(1))
    deterministic: bool = True
    seed: int = field(default=0, metadata=at_least(0))
    video: bool = False
    video_formats: tuple[str, ...] = ("mp4",)
    fps: int | None = field(default=None, metadata=at_least(1))
    plot: tuple[str, ...] = ()
    watch: bool = False
    watch_interval: float = 10.0
    trusted: bool = False
    allow: tuple[str, ...] = ()
    memory_budget_gb: float | None = None  # the caller's (command line), never the run's

    @classmethod
    def from_config(cls, cfg: DictConfig) -> EnjoySettings:
        values = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(values, dict)
        if values.get("run") in (None, "", "???"):
            raise ConfigError("run=<run dir> is required: the folder a training run wrote (with config.yaml)")
        values["run"] = str(values["run"])
        if values.get("checkpoint") is None:
            values["checkpoint"] = FINAL
        if "video_formats" in values:
            values["video_formats"] = _names("video_formats", values["video_formats"], VIDEO_FORMATS) or ("mp4",)
        allow = values.get("allow") or []
        if not isinstance(allow, list) or not all(isinstance(name, str) for name in allow):
            raise _fail("allow", allow, "a list of module names, e.g. [mypackage.algos]")
        values["allow"] = tuple(allow)
        if "plot" in values:
            values["plot"] = _names("plot", values["plot"], PLOTS)
        if values.get(MEMORY_KEY) is not None:
            values[MEMORY_KEY] = budget_gib(values[MEMORY_KEY])
        settings = parse(cls, values)  # type: ignore[arg-type]
        if settings.watch_interval <= 0:
            raise _fail("watch_interval", settings.watch_interval, "a number of seconds > 0")
        return settings


def file_stem(label: str, settings: EnjoySettings) -> str:
    """``<label>[_stochastic][_seed<k>]``: a replay in another mode or from another seed keeps its own files."""
    return label + stem_suffix(settings)


def stem_suffix(settings: EnjoySettings) -> str:
    """``[_stochastic][_seed<k>]``: what follows the model's label in the names of a replay's files."""
    mode = "" if settings.deterministic else "_stochastic"
    seed = "" if settings.seed == 0 else f"_seed{settings.seed}"
    return f"{mode}{seed}"


@dataclass(frozen=True)
class Replay:
    """What one replay produced: the episodes' returns and lengths and the files written."""

    label: str
    returns: list[float]
    lengths: list[int]
    files: list[Path]


def replay_request(settings: EnjoySettings, run: RunDir) -> ReplayRequest:
    """What ``settings`` ask a run's kind to replay."""
    return ReplayRequest(
        settings.checkpoint, settings.n_episodes, settings.deterministic, settings.seed, settings.video,
        settings.plot, enjoy_dir(run), stem_suffix(settings), settings.trusted, settings.allow,
    )  # fmt: skip


def enjoy(settings: EnjoySettings, log: Callable[[str], None] = print) -> Replay:
    """Replay ``settings.n_episodes`` episodes of one model of the run, as its kind replays
    (:func:`rlzoo.training.kind.kind_of_run`); print and write the results."""
    with memory_budget_of(settings.memory_budget_gb):  # the caller's budget, never the run's
        kind, run = kind_of_run(settings.run)
        replayed = kind.replay(run, replay_request(settings, run))
    log(f"rlzoo.enjoy: {replayed.summary}")
    stem = file_stem(replayed.label, settings)
    out = enjoy_dir(run)
    output_folder(out)
    files = [out / f"{stem}_returns.csv"]
    atomic_write_text(files[0], replayed.table)
    for fmt in settings.video_formats if settings.video else ():
        files.append(write_video(out / f"{stem}.{fmt}", replayed.frames, settings.fps or replayed.fps))
    files += replayed.figures
    log("  wrote " + ", ".join(str(f) for f in files))
    return Replay(replayed.label, replayed.returns, replayed.lengths, files)


def watch(
    settings: EnjoySettings, sleep: Callable[[float], None] = time.sleep, log: Callable[[str], None] = print
) -> list[Replay]:
    """Replay the newest model of a run that may still be training, again whenever a newer one appears, until the
    final model has been replayed (Ctrl-C stops earlier)."""
    kind, run = kind_of_run(settings.run)
    kind.check_replay(replay_request(_with(settings, checkpoint=LATEST), run))
    replays: list[Replay] = []
    seen: tuple[Path, int] | None = None
    while True:
        try:
            folder, steps = model_folder(run, LATEST)
        except ConfigError:
            folder, steps = None, None  # no model yet
        if folder is not None and (key := (folder.path, folder.model.stat().st_mtime_ns)) != seen:
            seen = key
            checkpoint = FINAL if steps is None else steps
            replays.append(enjoy(_with(settings, checkpoint=checkpoint), log))
            if steps is None:
                return replays
        what = "the first checkpoint" if folder is None else "a newer checkpoint or the final model"
        log(f"rlzoo.enjoy: watching {run.path}: waiting for {what} (every {settings.watch_interval:g} s, Ctrl-C stops)")
        sleep(settings.watch_interval)


def _with(settings: EnjoySettings, **changes: Any) -> EnjoySettings:
    return EnjoySettings(**{**settings.__dict__, **changes})


@hydra.main(config_path=str(CONFIG_DIR), config_name="enjoy", version_base="1.3")
@one_line_errors("rlzoo.enjoy")
def main(cfg: DictConfig) -> None:
    """Hydra entrypoint (``key=value`` arguments only)."""
    torch.set_num_threads(1)
    settings = EnjoySettings.from_config(cfg)
    try:
        with memory_budget_of(settings.memory_budget_gb):
            if settings.watch:
                watch(settings)
            else:
                enjoy(settings)
    except KeyboardInterrupt:
        print("rlzoo.enjoy: stopped")


if __name__ == "__main__":
    run_checked(main, "rlzoo.enjoy", "enjoy")
