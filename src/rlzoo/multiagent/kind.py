"""The multi-agent kind of run (``python -m rlzoo.train ... env=pettingzoo multiagent=<layout>``), run by the one
skeleton :func:`rlzoo.training.run.run`.

The learners act in the AEC loop (each learning key's training agent learns as its algorithm's ``learn()`` would);
one model per learner is saved; the test episodes play with learning off. ``total_timesteps`` counts the actions of
all agents (the fixed opponent's too); each learning key's schedules (exploration, learning rate) run over its share,
``total_timesteps / number of agents``. A checkpoint, taken at the end of the first game at or past each
``checkpoint_freq`` actions (and at the end of training), holds every learner's model, each key's step count, the seat
rotation's episode and the run state (:mod:`rlzoo.multiagent.run_state`: generators, SB3's runtime state, replay
buffers), so that a killed or requeued run (Slurm's warning: :mod:`rlzoo.training.requeue`, acted on at the end of
the game) ends where the uninterrupted run ends.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from omegaconf import DictConfig
from stable_baselines3.common.base_class import BaseAlgorithm

from rlzoo.errors import ConfigError
from rlzoo.gc_tuning import collect_from_here
from rlzoo.multiagent.agents import TestMultiagent, TrainingMultiagent, load_multiagent, opponent_for
from rlzoo.multiagent.episodes import OUTCOMES, Budget, MultiagentEpisode, play
from rlzoo.multiagent.learners import build_learners
from rlzoo.multiagent.plan import MultiagentPlan, plan_multiagent
from rlzoo.multiagent.playback import replay_multiagent
from rlzoo.multiagent.run_files import agent_returns100, write_agent_test_returns
from rlzoo.multiagent.run_state import MultiagentStateWriter, finish_restore, restore_team
from rlzoo.progress_lines import ProgressLines
from rlzoo.rundir import FINAL, RunDir
from rlzoo.training.budget import LineProgress, RunClock, progress_of
from rlzoo.training.build import TEST_SEED_OFFSET
from rlzoo.training.callbacks import Returns100Writer, save_checkpoint
from rlzoo.training.episodes import return_statistics
from rlzoo.training.kind import Replayed, ReplayRequest, Resources
from rlzoo.training.run_state import Snapshot
from rlzoo.training.safe_load import restore_weights

HONOURED = frozenset(
    {"run_dir", "seed", "total_timesteps", "total_episodes", "max_train_seconds", "checkpoint_freq", "test_episodes",
     "deterministic_test", "verbose", "resume", "trusted", "checkpoint_buffer", "memory_budget_gb"}
)  # fmt: skip
ONE_ENV = "they step one PettingZoo env"
NO_KEEP_BEST = "they have no keep-best evaluation"


class MultiAgent:
    """The multi-agent kind (:class:`rlzoo.training.kind.RunKind`)."""

    name = "multi-agent"
    honoured = HONOURED
    fixed: Mapping[str, Any] = {"n_envs": 1, "normalize": False, "sampled_test": False}
    why: Mapping[str, str] = {
        "n_envs": ONE_ENV,
        "vec_env": ONE_ENV,
        "normalize": "the learners see the env's observations as they are",
        "sampled_test": "they play one test in deterministic_test's mode",
        "eval_freq": NO_KEEP_BEST,
        "eval_episodes": NO_KEEP_BEST,
        "test_checkpoint": NO_KEEP_BEST + ": the final models play the test",
        "test_envs": "the test episodes are played one after another on one env",
        "max_test_steps": "the PettingZoo env ends its own episodes",
        "test_steps": "the PettingZoo env ends its own episodes",
        "progress_bar": "the AEC loop shows no progress bar",
        "init_from": "they cannot start from another run's models",
    }

    def plan(self, cfg: DictConfig, overrides: Sequence[str]) -> MultiagentPlan:
        return plan_multiagent(cfg, list(overrides), run_dir_state=True)

    def load(
        self, run: RunDir, checkpoint: int | str | None, *, deterministic: bool, trusted: bool, allow: Sequence[str]
    ) -> TestMultiagent:
        """The run's test multiagent (:func:`~rlzoo.multiagent.agents.load_multiagent`): its final models."""
        self.check_replay(ReplayRequest(FINAL if checkpoint is None else checkpoint))
        return load_multiagent(run.path, deterministic, trusted=trusted, allow=allow)

    def check_replay(self, request: ReplayRequest) -> None:
        if request.checkpoint != FINAL or request.plots:
            raise ConfigError("a multi-agent run replays its final models only (no checkpoint=, plot=, watch=)")

    def replay(self, run: RunDir, request: ReplayRequest) -> Replayed:
        """The test multiagent's episodes: per-agent returns in the table, the trained agents' in the returns."""
        self.check_replay(request)
        replay = replay_multiagent(
            run.path, request.episodes, request.seed, request.deterministic, request.frames,
            trusted=request.trusted, allow=request.allow,
        )  # fmt: skip
        returns = replay.returns
        per_agent = ", ".join(
            f"{k} {np.mean([e.returns.get(k, 0.0) for e in replay.episodes]):.2f}" for k in replay.keys
        )
        trained = " + ".join(replay.learning)
        summary = f"{run.path}: {len(returns)} episodes, return {np.mean(returns):.2f} ({trained}); {per_agent}"
        lengths = [e.length for e in replay.episodes]
        return Replayed(FINAL, summary, returns, lengths, replay.table(), replay.frames, replay.render_fps)

    def build(self, plan: MultiagentPlan, context: Resources) -> MultiagentLearning:
        """The env and the team (learners resumed from the resume point): nothing written."""
        env = plan.spec.make()
        context.on_exit(env.close)
        team = build_team(plan)
        restored = None
        point = plan.resume_point
        if point is not None:
            _restore(team, plan)
            if point.timesteps >= 0:  # a checkpoint (not the final models)
                restored = restore_team(point.folder, plan.run.path, team, env, plan.settings.checkpoint_buffer)
        return MultiagentLearning(plan, env, team, context, restored)


def build_team(plan: MultiagentPlan) -> TrainingMultiagent:
    """The training multiagent of a plan: learners on held envs, and the fixed opponent of the other keys."""
    train_steps = math.ceil(plan.settings.total_timesteps / len(plan.agents))
    learners = build_learners(
        plan.factory, plan.policy, plan.agents, plan.learners,
        seed=plan.seed, device=plan.hardware.device, train_steps=train_steps, verbose=plan.settings.verbose,
    )  # fmt: skip
    return TrainingMultiagent(learners, opponent_for(plan), plan.seats)


def _restore(team: TrainingMultiagent, plan: MultiagentPlan) -> None:
    """Load every learner's weights (and optimizer) from the resume point and each key's step count, so that its
    schedules go on where they were."""
    point = plan.resume_point
    assert point is not None
    for name, model in team.models.items():
        path = point.models.learner(name).model
        if plan.settings.trusted:
            model.set_parameters(str(path), device=plan.hardware.device)  # SB3's own load of the zip (it unpickles)
        else:  # the weights only: nothing in the zip is unpickled (rlzoo.training.safe_load)
            restore_weights(model, path)
    for key, steps in point.kind_state.get("key_steps", {}).items():
        team.learners.agents[key].model.num_timesteps = int(steps)
    for keys in plan.learners.values():  # each model's seed as the uninterrupted run built it (build_learners), not
        for i, key in enumerate(keys):  # the offset one it was built with here (its generators come from the point)
            team.learners.agents[key].model.seed = plan.settings.seed + i
    if team.rotation is not None:  # the seat of the episode the run had reached
        team.rotation.episode = int(point.kind_state.get("seat_episode", 0))


class MultiagentLearning:
    """The team learning in the AEC loop (:class:`rlzoo.training.kind.Learning`)."""

    def __init__(
        self, plan: MultiagentPlan, env: Any, team: TrainingMultiagent, context: Resources, restored: Snapshot | None
    ) -> None:
        self.plan, self.env, self.team, self.context, self.restored = plan, env, team, context, restored
        self.writer = MultiagentStateWriter(plan.run, plan.settings.checkpoint_buffer, restored)
        point = plan.resume_point
        self.steps = point.timesteps if point is not None else 0
        self.episodes = int(point.kind_state.get("episodes", 0)) if point is not None else 0
        pending = point.kind_state.get("pending", {}) if point is not None else {}
        paths = {"": plan.run.returns100} | {key: agent_returns100(plan.run, key) for key in plan.agents}
        self.curves = {key: Returns100Writer(path, pending=pending.get(key, ())) for key, path in paths.items()}

    @property
    def models(self) -> Mapping[str, BaseAlgorithm]:
        return self.team.models

    @property
    def timesteps(self) -> int:
        return self.steps

    def open_logs(self) -> None:
        self._cut_event_files()
        for curve in self.curves.values():
            curve.open()

    def _cut_event_files(self) -> None:
        """Each learner's TensorBoard event files cut back to its step at the resume point (removed on a fresh
        start), as :func:`rlzoo.training.resume.truncate_logs` does the run's own."""
        from rlzoo.loggers.tensorboard import cut_event_files

        point = self.plan.resume_point
        if point is not None and point.timesteps < 0:  # training had ended: nothing is written again
            return
        key_steps = point.kind_state.get("key_steps", {}) if point is not None else {}
        for name, keys in self.plan.learners.items():
            steps = max((int(key_steps[key]) for key in keys if key in key_steps), default=0)
            folder = RunDir(self.plan.run.models().learner(name).path).tensorboard_dir
            cut_event_files(folder, None if point is None else steps)

    def learn(self, clock: RunClock) -> dict[str, float]:
        """Play training episodes until the budget (steps, episodes, seconds) is spent, checkpointing at the end of
        the first game at or past each ``checkpoint_freq`` actions (game ``i`` of the run is seeded ``seed + i``)."""
        settings = self.plan.settings
        if self.steps < 0:  # training had ended before the run stopped: its final models are loaded
            self.steps = int(self.plan.resume_point.kind_state.get("timesteps", 0)) if self.plan.resume_point else 0
            return {}
        seconds = settings.max_train_seconds
        budget = Budget(
            None if settings.total_episodes else settings.total_timesteps - self.steps,
            settings.total_episodes - self.episodes if settings.total_episodes else None,
            stop=(lambda: clock.elapsed() >= seconds) if seconds is not None else None,
        )
        start, every, requeue = self.steps, settings.checkpoint_freq, self.context.requeue
        due = (start // every + 1) * every if every else 0  # the next checkpoint, in actions
        self.team.learners.share_loggers()
        collect_from_here()
        finish_restore(self.restored, self.team)
        lines = _TrainingLines(settings.total_episodes, settings.total_timesteps, self.episodes, self.steps)

        def on_episode(episode: MultiagentEpisode, steps: int) -> None:
            nonlocal due
            self.episodes += 1
            lines.episode(self.episodes)
            self.curves[""].add(episode.return_of(self._learning_seats()), start + steps)
            for key in self.plan.agents:
                self.curves[key].add(episode.returns.get(key, 0.0), start + steps)
            if every and (self.steps >= due or requeue.received):  # a game boundary: the env holds no state
                self._checkpoint(clock)
                due = (self.steps // every + 1) * every
            if requeue.received:  # Slurm's warning: checkpointed; the previous handler requeues the job
                requeue.hand_on()

        def on_step(steps: int) -> None:
            self.steps = start + steps
            lines.step(steps, self.steps)

        play(self.env, self.team, budget, settings.seed + self.episodes, on_episode, on_step)
        lines.finish(self.episodes, self.steps)
        if every and (self.steps >= due or requeue.received):  # the end of training (learning_ended hands it on)
            self._checkpoint(clock)
        for curve in self.curves.values():
            curve.close(self.steps)
        return {}

    def _learning_seats(self) -> tuple[str, ...]:
        """The seats the learners played in the episode that ended last."""
        rotation = self.team.rotation
        return self.plan.learning_seats(rotation.episode - 1 if rotation is not None else 0)

    def _checkpoint(self, clock: RunClock) -> None:
        key_steps = {key: int(agent.model.num_timesteps) for key, agent in self.team.learners.agents.items()}
        pending = {key: curve.pending for key, curve in self.curves.items()}
        state = {"key_steps": key_steps, "episodes": self.episodes, "pending": pending}
        if self.team.rotation is not None:
            state["seat_episode"] = self.team.rotation.episode
        write = functools.partial(self.writer, team=self.team, env=self.env)
        save_checkpoint(self.plan.run, self.steps, self.models, None, pending[""], clock, state, write)

    def save(self) -> None:
        self.plan.run.models().save_learners(self.models, {"timesteps": self.steps})

    def test(self) -> dict[str, float]:
        """Test episodes on an env of their own (seeds from the run's test seed; a learner that alternates seats
        takes them in turn); rows in ``test_returns*.csv`` (``test_returns.csv``: the learners' returns)."""
        plan = self.plan
        episodes: list[MultiagentEpisode] = []
        if plan.settings.test_episodes:
            seed = plan.settings.seed + TEST_SEED_OFFSET
            agent = self.team.test_agent(plan.settings.deterministic_test, seed)
            env = plan.spec.make()
            try:
                episodes, _ = play(env, agent, Budget(episodes=plan.settings.test_episodes), seed)
            finally:
                env.close()
        seats = [plan.learning_seats(i) for i in range(len(episodes))]
        learned = [e.return_of(s) for e, s in zip(episodes, seats, strict=True)]
        plan.run.write_test_returns(learned, [e.length for e in episodes])
        write_agent_test_returns(plan.run, {key: [e.returns.get(key, 0.0) for e in episodes] for key in plan.agents})
        return summarize(episodes, seats, len(plan.agents)) if episodes else {}


def summarize(episodes: list[MultiagentEpisode], seats: list[tuple[str, ...]], players: int) -> dict[str, float]:
    """The learners' figures: statistics of their return (summed over the seats learners played, ``seats[i]`` in
    episode ``i``) under ``test/``, and per seat the learner's mean return there; in two-player games (``players``)
    its win, draw and loss rates from that seat (``test/<seat>/win_rate``, ``draw_rate``, ``loss_rate``: returns
    compared), over the episodes a learner played that seat."""
    learned = [e.return_of(s) for e, s in zip(episodes, seats, strict=True)]
    metrics = return_statistics(learned, [e.length for e in episodes])
    for seat in dict.fromkeys(seat for played in seats for seat in played):
        there = [e for e, played in zip(episodes, seats, strict=True) if seat in played]
        metrics[f"test/{seat}/mean_return"] = sum(e.returns.get(seat, 0.0) for e in there) / len(there)
        if players == 2:
            for outcome in OUTCOMES:
                metrics[f"test/{seat}/{outcome}_rate"] = sum(e.outcome(seat) == outcome for e in there) / len(there)
    return metrics


class _TrainingLines:
    """Progress lines of a multi-agent run's training (episodes or steps, as its budget counts) when stderr is not a
    terminal; the clock is read every :attr:`LineProgress.CHECK_EVERY` actions."""

    def __init__(self, total_episodes: int | None, total_timesteps: int, episodes: int, steps: int) -> None:
        self.by_episodes = bool(total_episodes)
        counted = (total_episodes, episodes, "episodes") if total_episodes else (total_timesteps, steps, "steps")
        shown = progress_of("auto") == "lines"
        self.lines = ProgressLines("training", counted[0], counted[2], done=counted[1]) if shown else None

    def step(self, taken: int, steps: int) -> None:
        if self.lines is not None and not self.by_episodes and taken % LineProgress.CHECK_EVERY == 0:
            self.lines.update(steps)

    def episode(self, episodes: int) -> None:
        if self.lines is not None and self.by_episodes:
            self.lines.update(episodes)

    def finish(self, episodes: int, steps: int) -> None:
        if self.lines is not None:
            self.lines.finish(episodes if self.by_episodes else steps)
