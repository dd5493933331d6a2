"""One multi-agent training run: what ``python -m rlzoo.train ... env=pettingzoo multiagent=<layout>`` does.

plan (every input checked, nothing written) → env and learners → run dir → the AEC loop (each learning key's
training agent learns as its algorithm's ``learn()`` would) → one model per learner → test episodes with learning off
→ ``metrics.json`` last. ``total_timesteps`` counts the actions of all agents (the fixed opponent's too); each
learning key's schedules (exploration, learning rate) run over its share, ``total_timesteps / number of agents``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import TextIO

import numpy as np
from omegaconf import DictConfig
from stable_baselines3.common.utils import set_random_seed

from rlzoo.loggers.outputs import make_logger
from rlzoo.multiagent.agents import TestMultiagent, TrainingMultiagent, opponent_for
from rlzoo.multiagent.episodes import OUTCOMES, Budget, MultiagentEpisode, play
from rlzoo.multiagent.learners import build_learners
from rlzoo.multiagent.plan import MultiagentPlan, plan_multiagent
from rlzoo.rundir import RETURNS100_HEADER, RunDir, save_model
from rlzoo.training.build import TEST_SEED_OFFSET
from rlzoo.training.resume import open_run_dir


def train_multiagent(cfg: DictConfig, overrides: Sequence[str] = ()) -> dict[str, float]:
    """Train, save and test the learners ``cfg`` describes; return the metrics (``test/mean_return`` summed over
    agents, ``test/<agent>/mean_return``, ``test/<agent>/win_rate`` ...)."""
    started = time.perf_counter()
    plan = plan_multiagent(cfg, list(overrides))
    plan.hardware.apply()
    set_random_seed(plan.seed)
    settings = plan.settings
    with ExitStack() as cleanup:
        env = plan.spec.make()
        cleanup.callback(env.close)
        team = build_team(plan)
        cleanup.enter_context(plan.run.locked())  # the claim's checks, then the writes, under the run dir's lock
        plan.run.claim()
        open_run_dir(plan.run, None, plan.config)
        for name, model in team.models.items():
            plan.run.learner_dir(name).mkdir(parents=True, exist_ok=True)
            model.set_logger(make_logger(RunDir(plan.run.learner_dir(name)), plan.logging.formats))
        curves = Returns100Files(plan.run, list(plan.agents))
        cleanup.callback(curves.close)
        budget = Budget(None if settings.total_episodes else settings.total_timesteps, settings.total_episodes)
        _, steps = play(env, team, budget, plan.seed, curves.add, _checkpoints(plan, team))
        curves.close()
        metrics = {"train/timesteps": float(steps), "time/train_seconds": time.perf_counter() - started}
        for name, model in team.models.items():
            save_model(plan.run.learner_dir(name), model, None)
        metrics |= test(plan, team.test_agent())
        metrics["time/total_seconds"] = time.perf_counter() - started
        plan.run.write_metrics(metrics)
    return metrics


def build_team(plan: MultiagentPlan) -> TrainingMultiagent:
    """The training multiagent of a plan: learners on held envs, and the fixed opponent of the other keys."""
    train_steps = math.ceil(plan.settings.total_timesteps / len(plan.agents))
    learners = build_learners(
        plan.factory, plan.policy, plan.agents, plan.learners,
        seed=plan.seed, device=plan.hardware.device, train_steps=train_steps, verbose=plan.settings.verbose,
    )  # fmt: skip
    return TrainingMultiagent(learners, opponent_for(plan), plan.seats)


def _checkpoints(plan: MultiagentPlan, team: TrainingMultiagent) -> Callable[[int], None]:
    every = plan.settings.checkpoint_freq

    def save(steps: int) -> None:
        if every and steps % every == 0:
            for name, model in team.models.items():
                save_model(plan.run.learner_dir(name, steps), model, None)

    return save


def test(plan: MultiagentPlan, agent: TestMultiagent) -> dict[str, float]:
    """Test episodes on an env of their own (seeds from the run's test seed); rows in ``test_returns*.csv``."""
    episodes: list[MultiagentEpisode] = []
    if plan.settings.test_episodes:
        env = plan.spec.make()
        try:
            budget = Budget(episodes=plan.settings.test_episodes)
            episodes, _ = play(env, agent, budget, plan.seed + TEST_SEED_OFFSET)
        finally:
            env.close()
    plan.run.write_test_returns([e.total for e in episodes], [e.length for e in episodes])
    plan.run.write_agent_test_returns({key: [e.returns.get(key, 0.0) for e in episodes] for key in plan.agents})
    return summarize(episodes, list(plan.agents)) if episodes else {}


def summarize(episodes: list[MultiagentEpisode], keys: list[str]) -> dict[str, float]:
    """Summed-return statistics under ``test/``, and each agent's mean return; in two-player games each agent's win,
    draw and loss rates (``test/<agent>/win_rate``, ``draw_rate``, ``loss_rate``: returns compared)."""
    totals = np.asarray([e.total for e in episodes])
    metrics = {
        "test/mean_return": float(totals.mean()),
        "test/std_return": float(totals.std()),
        "test/min_return": float(totals.min()),
        "test/max_return": float(totals.max()),
        "test/episodes": float(totals.size),
        "test/mean_length": float(np.mean([e.length for e in episodes])),
    }
    for key in keys:
        metrics[f"test/{key}/mean_return"] = float(np.mean([e.returns.get(key, 0.0) for e in episodes]))
        if len(keys) == 2:
            for outcome in OUTCOMES:
                metrics[f"test/{key}/{outcome}_rate"] = float(np.mean([e.outcome(key) == outcome for e in episodes]))
    return metrics


class Returns100Files:
    """``returns100.csv`` (returns summed over agents) and ``returns100/<agent>.csv``: ``frame,mean,std,max,min``
    per 100 training episodes, a final partial window at the end (as the single-agent run writes it)."""

    def __init__(self, run: RunDir, keys: list[str], window: int = 100) -> None:
        self.window = window
        paths = {"": run.returns100} | {key: run.agent_returns100(key) for key in keys}
        self._streams: dict[str, TextIO] = {}
        for key, path in paths.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            self._streams[key] = path.open("w")
            self._streams[key].write(RETURNS100_HEADER + "\n")
        self._returns: dict[str, list[float]] = {key: [] for key in paths}
        self._steps = 0

    def add(self, episode: MultiagentEpisode, steps: int) -> None:
        self._steps = steps
        self._returns[""].append(episode.total)
        for key in self._returns:
            if key:
                self._returns[key].append(episode.returns.get(key, 0.0))
        if len(self._returns[""]) == self.window:
            self._write()

    def _write(self) -> None:
        for key, values in self._returns.items():
            array = np.asarray(values)
            row = (self._steps, array.mean(), array.std(), array.max(), array.min())
            self._streams[key].write("{},{:.6g},{:.6g},{:.6g},{:.6g}\n".format(*row))
            self._streams[key].flush()
            values.clear()

    def close(self) -> None:
        if self._streams and self._returns[""]:
            self._write()
        for stream in self._streams.values():
            stream.close()
        self._streams = {}
