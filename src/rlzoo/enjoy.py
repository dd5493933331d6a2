"""``python -m rlzoo.enjoy run=<run dir>``: replay a trained agent, with a video, a trajectory or action plots.

The env, representation and frozen normalisation are rebuilt from the run dir alone
(:func:`rlzoo.replay.loading.load_run`); videos, plots and per-episode returns are written to ``<run>/enjoy/``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlzoo.cli import one_line_errors
from rlzoo.config import CONFIG_DIR
from rlzoo.errors import ConfigError
from rlzoo.files import atomic_write_text
from rlzoo.replay.loading import LoadedRun, load_run, model_folder, open_run, run_episodes
from rlzoo.replay.plots import plot_actions, plot_trajectories
from rlzoo.replay.video import write_video
from rlzoo.rundir import FINAL, LATEST, MODEL, RunDir
from rlzoo.schema import at_least, parse

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
        if "plot" in values:
            values["plot"] = _names("plot", values["plot"], PLOTS)
        settings = parse(cls, values)  # type: ignore[arg-type]
        if settings.watch_interval <= 0:
            raise _fail("watch_interval", settings.watch_interval, "a number of seconds > 0")
        return settings


def file_stem(label: str, settings: EnjoySettings) -> str:
    """``<label>[_stochastic][_seed<k>]``: a replay in another mode or from another seed keeps its own files."""
    mode = "" if settings.deterministic else "_stochastic"
    seed = "" if settings.seed == 0 else f"_seed{settings.seed}"
    return f"{label}{mode}{seed}"


@dataclass(frozen=True)
class Replay:
    """What one replay produced: the episodes' returns and lengths and the files written."""

    label: str
    returns: list[float]
    lengths: list[int]
    files: list[Path]


def enjoy(settings: EnjoySettings, log: Callable[[str], None] = print) -> Replay:
    """Replay ``settings.n_episodes`` episodes of one model of the run; print and write the results."""
    from rlzoo.multiagent.replay import is_multiagent_run

    if is_multiagent_run(settings.run):
        return _enjoy_multiagent(settings, log)
    loaded = load_run(settings.run, settings.checkpoint)
    episodes = run_episodes(
        loaded,
        settings.n_episodes,
        deterministic=settings.deterministic,
        seed=settings.seed,
        frames=settings.video,
        positions="trajectory" in settings.plot,
        probabilities="action_probabilities" in settings.plot,
        envs=loaded.plan.settings.test_envs,  # without a video or plots: the episodes on several envs at once
    )
    returns = np.array([e.ret for e in episodes])
    lengths = [e.length for e in episodes]
    mode = "deterministic" if settings.deterministic else "stochastic"
    log(
        f"rlzoo.enjoy: {loaded.path} ({_title(loaded)}, {loaded.model.num_timesteps} steps): "
        f"{len(episodes)} {mode} episode{'s' * (len(episodes) > 1)}\n"
        f"  return {returns.mean():.2f} ± {returns.std():.2f} (std), min {returns.min():.2f}, "
        f"max {returns.max():.2f}; mean length {np.mean(lengths):.1f} steps"
    )
    out = RunDir(loaded.path).enjoy_dir
    out.mkdir(exist_ok=True)
    rows = [f"{i},{r:.6g},{n}" for i, (r, n) in enumerate(zip(returns, lengths, strict=True))]
    table = "\n".join(["episode,return,length", *rows]) + "\n"
    stem = file_stem(loaded.label, settings)
    files = [out / f"{stem}_returns.csv"]
    atomic_write_text(files[0], table)
    if settings.video:
        frames = [frame for e in episodes for frame in e.frames]
        fps = settings.fps or _render_fps(loaded)
        for fmt in settings.video_formats:
            files.append(write_video(out / f"{stem}.{fmt}", frames, fps))
    if "trajectory" in settings.plot:
        files.append(plot_trajectories(episodes, _title(loaded), out / f"{stem}_trajectory.png"))
    if "action_probabilities" in settings.plot:
        name = "action_probabilities" if episodes[0].probabilities is not None else "actions"
        path = out / f"{stem}_{name}.png"
        files.append(plot_actions(episodes, loaded.model.action_space, _title(loaded), path))
    log("  wrote " + ", ".join(str(f) for f in files))
    return Replay(loaded.label, returns.tolist(), lengths, files)


def _enjoy_multiagent(settings: EnjoySettings, log: Callable[[str], None]) -> Replay:
    """A multi-agent run's replay: per-agent returns in ``enjoy/final_returns.csv`` (+ ``final.mp4``)."""
    from rlzoo.multiagent.replay import replay_multiagent

    if settings.checkpoint != FINAL or settings.plot or settings.watch:
        raise ConfigError("a multi-agent run replays its final models only (no checkpoint=, plot=, watch=)")
    replay = replay_multiagent(settings.run, settings.n_episodes, settings.seed, settings.deterministic, settings.video)
    returns = [e.total for e in replay.episodes]
    per_agent = ", ".join(f"{k} {np.mean([e.returns.get(k, 0.0) for e in replay.episodes]):.2f}" for k in replay.keys)
    log(f"rlzoo.enjoy: {settings.run}: {len(returns)} episodes, return {np.mean(returns):.2f} (summed); {per_agent}")
    out = RunDir(Path(settings.run)).enjoy_dir
    out.mkdir(exist_ok=True)
    stem = file_stem(FINAL, settings)
    files = [out / f"{stem}_returns.csv"]
    atomic_write_text(files[0], replay.table())
    for fmt in settings.video_formats if settings.video else ():
        files.append(write_video(out / f"{stem}.{fmt}", replay.frames, settings.fps or replay.render_fps))
    log("  wrote " + ", ".join(str(f) for f in files))
    return Replay(FINAL, returns, [e.length for e in replay.episodes], files)


def watch(
    settings: EnjoySettings, sleep: Callable[[float], None] = time.sleep, log: Callable[[str], None] = print
) -> list[Replay]:
    """Replay the newest model of a run that may still be training, again whenever a newer one appears, until the
    final model has been replayed (Ctrl-C stops earlier)."""
    run = open_run(settings.run)
    replays: list[Replay] = []
    seen: tuple[Path, int] | None = None
    while True:
        try:
            folder, steps = model_folder(run, LATEST)
        except ConfigError:
            folder, steps = None, None  # no model yet
        if folder is not None and (key := (folder, (folder / MODEL).stat().st_mtime_ns)) != seen:
            seen = key
            checkpoint = FINAL if steps is None else steps
            replays.append(enjoy(_with(settings, checkpoint=checkpoint), log))
            if steps is None:
                return replays
        what = "the first checkpoint" if folder is None else "a newer checkpoint or the final model"
        log(f"rlzoo.enjoy: watching {run.path}: waiting for {what} (every {settings.watch_interval:g} s, Ctrl-C stops)")
        sleep(settings.watch_interval)


def _render_fps(loaded: LoadedRun) -> int:
    """The env's ``render_fps`` metadata, else 30."""
    venv = loaded.make_env()
    try:
        return int(venv.get_attr("metadata")[0].get("render_fps") or 30)
    finally:
        venv.close()


def _with(settings: EnjoySettings, **changes: Any) -> EnjoySettings:
    return EnjoySettings(**{**settings.__dict__, **changes})


def _title(loaded: LoadedRun) -> str:
    model = "final model" if loaded.checkpoint is None else f"checkpoint {loaded.checkpoint}"
    model = "best evaluated model" if loaded.best else model
    return f"{type(loaded.model).__name__} on {loaded.spec.id}, {loaded.observations}, {model}"


@hydra.main(config_path=str(CONFIG_DIR), config_name="enjoy", version_base="1.3")
@one_line_errors("rlzoo.enjoy")
def main(cfg: DictConfig) -> None:
    """Hydra entrypoint (``key=value`` arguments only)."""
    torch.set_num_threads(1)
    settings = EnjoySettings.from_config(cfg)
    try:
        if settings.watch:
            watch(settings)
        else:
            enjoy(settings)
    except KeyboardInterrupt:
        print("rlzoo.enjoy: stopped")


if __name__ == "__main__":
    main()
