"""``run_experiment``: every preset on every env, each a ``train(cfg)`` run writing the CLI's run dir.

The Python face of ``python -m rlzoo.train --multirun algo=ppo,dqn env=CartPole,Acrobot ...``, with the
autonomous-learning-library's signature and meanings of ``render``, ``quiet`` and ``verbose``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from omegaconf import DictConfig

from rlzoo.agents.presets import BoundPreset, Preset
from rlzoo.errors import ConfigError
from rlzoo.single_agent.kind import train_run
from rlzoo.training.build import RunBuilder
from rlzoo.training.plan import plan_run


@dataclass(frozen=True)
class ExperimentRun:
    """One finished run of an experiment.

    :param algo: the preset's ``algo`` option.
    :param env: the env name it was bound to.
    :param run_dir: the run dir (``load_agent(run_dir)`` gives its test agent).
    :param metrics: what ``train(cfg)`` returned (``test/mean_return`` ...), as in ``metrics.json``.
    """

    algo: str
    env: str
    run_dir: Path
    metrics: dict[str, float]


def experiment_overrides(
    total_timesteps: int, test_episodes: int, render: bool, quiet: bool, verbose: bool
) -> list[str]:
    """The overrides that ``run_experiment``'s arguments stand for."""
    overrides = [f"total_timesteps={total_timesteps}", f"test_episodes={test_episodes}"]
    if quiet:
        overrides.append("verbose=0")  # SB3 prints nothing, the console table is off
    if not verbose:
        overrides.append("logger.formats=[]")  # no loss / debug metrics: returns100, monitor and test results only
    if render:
        overrides.append("++env.render_mode=human")
    return overrides


def _check_render(cfg: DictConfig, name: str) -> None:
    wanted = cfg.srl_model.make_kwargs.get("render_mode")
    if wanted is not None:
        raise ConfigError(
            f"render=True shows {name} in a window (render_mode=human), but srl_model={cfg.srl_model.name} needs "
            f"render_mode={wanted}; train without render"
        )


def run_experiment(
    presets: Preset | Sequence[Preset],
    envs: str | Sequence[str],
    total_timesteps: int,
    test_episodes: int = 100,
    render: bool = False,
    quiet: bool = False,
    verbose: bool = True,
    logdir: str | Path = "multirun",
) -> list[ExperimentRun]:
    """Train and test every preset on every env, one run dir each under ``<logdir>/<date>/<time>/<n>_<algo>_<env>``.

    Every run is composed and checked before the first one trains.

    :param presets: presets from :func:`~rlzoo.agents.preset` (their overrides apply, then this function's).
    :param envs: env group options (``"CartPole"``) or Gymnasium ids.
    :param total_timesteps: agent steps per run, summed over its envs.
    :param test_episodes: episodes run after training with learning off.
    :param render: show the env in a window while training and testing.
    :param quiet: silence the console (SB3's output and the line per run).
    :param verbose: write loss and debug metrics (``progress.csv``, TensorBoard); off: returns and test results only.
    :param logdir: where the experiment's folder goes.
    :return: one :class:`ExperimentRun` per (preset, env), presets outer.
    """
    presets = [presets] if isinstance(presets, Preset) else list(presets)
    envs = [envs] if isinstance(envs, str) else list(envs)
    now = datetime.now()
    folder = Path(logdir) / f"{now:%Y-%m-%d}" / f"{now:%H-%M-%S-%f}"
    overrides = experiment_overrides(total_timesteps, test_episodes, render, quiet, verbose)
    jobs: list[tuple[BoundPreset, DictConfig]] = []
    for preset in presets:
        for env in envs:
            bound = preset.env(env)
            cfg = bound.compose(folder / f"{len(jobs)}_{bound.name}", *overrides)
            if render:
                _check_render(cfg, env)
            RunBuilder(plan_run(cfg)).check_action_space()  # every bad input fails before any run trains
            jobs.append((bound, cfg))
    runs = []
    for bound, cfg in jobs:
        started = time.perf_counter()
        metrics = train_run(cfg)
        runs.append(ExperimentRun(bound.algo, bound.env_name, Path(cfg.run_dir), metrics))
        if not quiet:
            mean = metrics.get("test/mean_return", float("nan"))
            seconds = time.perf_counter() - started
            print(
                f"rlzoo: {bound.name}: {int(metrics['train/timesteps'])} steps in {seconds:.1f} s, "
                f"mean test return {mean:.2f} ({cfg.run_dir})"
            )
    return runs
