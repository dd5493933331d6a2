"""The single-agent kind of run, end to end (:class:`rlzoo.training.kind.RunKind`): one SB3 model on ``n_envs``
Gymnasium envs, planned by :func:`rlzoo.training.plan.plan_run`, learning and tested as
:mod:`rlzoo.single_agent.learning` does, loaded back as a :class:`~rlzoo.agents.loaded_agent.TestAgent` and replayed
through :mod:`rlzoo.playback.loading`. Every run key of ``conf/train.yaml`` is honoured."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from omegaconf import DictConfig

from rlzoo.agents.loaded_agent import TestAgent
from rlzoo.confined import output_folder
from rlzoo.rundir import RunDir
from rlzoo.single_agent.learning import CallbackFactory, SingleAgentLearning, build_single_agent
from rlzoo.training.budget import progress_of
from rlzoo.training.episodes import Progress
from rlzoo.training.kind import RUN_KEYS, SINGLE_AGENT, Replayed, ReplayRequest, Resources
from rlzoo.training.plan import RunPlan, plan_run
from rlzoo.training.run import run

if TYPE_CHECKING:
    from rlzoo.playback.loading import Episode, LoadedRun

TRAJECTORY, ACTION_PROBABILITIES = "trajectory", "action_probabilities"


class SingleAgent:
    """The single-agent kind.

    :param extra_callbacks: makes callbacks that learn with the run's own (one returning False stops training).
    """

    name = SINGLE_AGENT
    honoured = frozenset(RUN_KEYS)
    fixed: Mapping[str, Any] = {}
    why: Mapping[str, str] = {}

    def __init__(self, extra_callbacks: CallbackFactory | None = None) -> None:
        self.extra_callbacks = extra_callbacks

    def plan(self, cfg: DictConfig, overrides: Sequence[str]) -> RunPlan:
        return plan_run(cfg, overrides)

    def build(self, plan: RunPlan, context: Resources) -> SingleAgentLearning:
        return build_single_agent(plan, context, self.extra_callbacks)

    def load(
        self, run: RunDir, checkpoint: int | str | None, *, deterministic: bool, trusted: bool, allow: Sequence[str]
    ) -> TestAgent:
        from rlzoo.playback.loading import load_run  # a run that loads, not one that trains

        loaded = load_run(run.path, checkpoint, trusted=trusted, allow=allow)
        stack = loaded.spec.options.frame_stack
        return TestAgent(
            loaded.model, loaded.representation, loaded.normalization, deterministic, loaded.config, stack, loaded.spec
        )

    def check_replay(self, request: ReplayRequest) -> None:
        """Every checkpoint and figure replays (an unknown checkpoint is refused when the run is loaded)."""

    def replay(self, run: RunDir, request: ReplayRequest) -> Replayed:
        """The episodes played by the run's model (on ``test_envs`` envs at once when nothing but returns is
        recorded), with the figures ``request.plots`` names."""
        from rlzoo.playback.loading import load_run, run_episodes

        loaded = load_run(run.path, request.checkpoint, trusted=request.trusted, allow=request.allow)
        episodes = run_episodes(
            loaded, request.episodes, deterministic=request.deterministic, seed=request.seed, frames=request.frames,
            positions=TRAJECTORY in request.plots, probabilities=ACTION_PROBABILITIES in request.plots,
            envs=loaded.plan.settings.test_envs, progress=_replay_progress(),
        )  # fmt: skip
        returns, lengths = [e.ret for e in episodes], [e.length for e in episodes]
        rows = [f"{i},{r:.6g},{n}" for i, (r, n) in enumerate(zip(returns, lengths, strict=True))]
        frames = [frame for e in episodes for frame in e.frames]
        table = "\n".join(["episode,return,length", *rows]) + "\n"
        summary = _summary(loaded, request, returns, lengths)
        fps, figures = _render_fps(loaded, request), _figures(loaded, episodes, request)
        return Replayed(loaded.label, summary, returns, lengths, table, frames, fps, figures)


def _replay_progress() -> Progress:
    """The replay's progress: a bar on an interactive terminal, progress lines otherwise."""
    mode = progress_of("auto")
    return Progress("replay", bar=mode == "bar", lines=mode == "lines")


def _summary(loaded: LoadedRun, request: ReplayRequest, returns: list[float], lengths: list[int]) -> str:
    mode = "deterministic" if request.deterministic else "stochastic"
    values = np.asarray(returns)
    return (
        f"{loaded.path} ({title(loaded)}, {loaded.model.num_timesteps} steps): "
        f"{len(returns)} {mode} episode{'s' * (len(returns) > 1)}\n"
        f"  return {values.mean():.2f} ± {values.std():.2f} (std), min {values.min():.2f}, "
        f"max {values.max():.2f}; mean length {np.mean(lengths):.1f} steps{_episodes_are(loaded)}"
    )


def _episodes_are(loaded: LoadedRun) -> str:
    """What a replayed episode is, said where it is not what training learns from: Atari's whole games."""
    atari = loaded.spec.options.atari
    if atari is None:
        return ""
    learnt = [what for what, on in (("one life", atari.terminal_on_life_loss), ("clipped rewards", atari.clip_reward))
              if on]  # fmt: skip
    return (
        "\n  over whole games: every life, the game's own score"
        + (f" (training learns from episodes of {' and '.join(learnt)})" if learnt else "")
        + "; the run's test episodes are the same games unless test_steps cut them"
    )


def _figures(loaded: LoadedRun, episodes: list[Episode], request: ReplayRequest) -> list[Path]:
    if not request.plots or request.out is None:
        return []
    from rlzoo.playback.plots import plot_actions, plot_trajectories  # matplotlib: imported where figures are drawn

    output_folder(request.out)
    stem, files = f"{loaded.label}{request.suffix}", []
    if TRAJECTORY in request.plots:
        files.append(plot_trajectories(episodes, title(loaded), request.out / f"{stem}_trajectory.png"))
    if ACTION_PROBABILITIES in request.plots:
        name = ACTION_PROBABILITIES if episodes[0].probabilities is not None else "actions"
        path = request.out / f"{stem}_{name}.png"
        files.append(plot_actions(episodes, loaded.model.action_space, title(loaded), path))
    return files


def _render_fps(loaded: LoadedRun, request: ReplayRequest) -> int:
    """The env's ``render_fps`` metadata, else 30 (read only when frames were recorded)."""
    if not request.frames:
        return 30
    venv = loaded.make_env()
    try:
        return int(venv.get_attr("metadata")[0].get("render_fps") or 30)
    finally:
        venv.close()


def title(loaded: LoadedRun) -> str:
    """``<Algorithm> on <env id>, <observations>, <which model>``: the replay's title."""
    model = "final model" if loaded.checkpoint is None else f"checkpoint {loaded.checkpoint}"
    model = "best evaluated model" if loaded.best else model
    return f"{type(loaded.model).__name__} on {loaded.spec.id}, {loaded.observations}, {model}"


def train_run(
    cfg: DictConfig, overrides: Sequence[str] = (), extra_callbacks: CallbackFactory | None = None
) -> dict[str, float]:
    """A single-agent run (:func:`rlzoo.training.run.run` with :class:`SingleAgent`).

    :param extra_callbacks: makes callbacks that learn with the run's own (one returning False stops training).
    """
    return run(SingleAgent(extra_callbacks), cfg, overrides)
