"""What every run writes while it trains: the returns100 curve and periodic checkpoints with their resume state
(SB3 callbacks for single-agent runs; the writers themselves for every kind)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.vec_env import VecNormalize

from rlzoo.checkpoint_format import write_checkpoint
from rlzoo.confined import open_plain
from rlzoo.rundir import RETURNS100_HEADER, RunDir
from rlzoo.training.budget import RunClock
from rlzoo.training.requeue import RequeueSignal
from rlzoo.training.resume import log_state


class Returns100Writer:
    """``frame,mean,std,max,min`` for every non-overlapping window of ``window`` training episodes, and a final
    partial window at :meth:`close` (the autonomous-learning-library's returns100, with a header).

    :param path: the CSV file (appended to when it exists).
    :param pending: returns of episodes not yet written (a resumed run's, from its checkpoint).
    """

    def __init__(self, path: Path, window: int = 100, pending: Sequence[float] = ()) -> None:
        self.path, self.window = path, window
        self._returns: list[float] = list(pending)
        self._stream: TextIO | None = None
        self._frame = 0

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._stream = open_plain(self.path, "a")  # a resumed run dir's log: never through a link or into a FIFO
        if new:
            self._stream.write(RETURNS100_HEADER + "\n")
            self._stream.flush()

    def add(self, episode_return: float, frame: int) -> None:
        """One finished training episode's return, at ``frame`` agent steps."""
        self._frame = frame
        self._returns.append(episode_return)
        if len(self._returns) == self.window:
            self._write_row()

    @property
    def pending(self) -> list[float]:
        """Returns of the episodes since the last written row."""
        return list(self._returns)

    def _write_row(self) -> None:
        assert self._stream is not None
        values = np.asarray(self._returns)
        row = (self._frame, values.mean(), values.std(), values.max(), values.min())
        self._stream.write("{},{:.6g},{:.6g},{:.6g},{:.6g}\n".format(*row))
        self._stream.flush()
        self._returns.clear()

    def close(self, frame: int | None = None) -> None:
        """Write the partial window (at ``frame``, else the last episode's) and close the file."""
        if self._stream is None:
            return
        self._frame = self._frame if frame is None else frame
        if self._returns:
            self._write_row()
        self._stream.close()
        self._stream = None


class Returns100(BaseCallback):
    """The run's returns100 curve (:class:`Returns100Writer`) from the training episodes SB3's Monitor reports.

    :param path: the CSV file (appended to when it exists).
    :param window: episodes per row.
    :param pending: returns of episodes not yet written (a resumed run's, from its checkpoint).
    """

    def __init__(self, path: Path, window: int = 100, pending: Sequence[float] = ()) -> None:
        super().__init__()
        self.writer = Returns100Writer(path, window, pending)
        self._seen: list[int] | None = None  # episodes already read per Monitor (polling mode only)

    def _on_training_start(self) -> None:
        self.writer.open()

    def _on_step(self) -> bool:
        infos = self.locals.get("infos")
        if infos is None:  # algorithms that run episodes internally (ARS) pass no step locals
            self._poll_monitors()
            return True
        for info in infos:
            episode = info.get("episode")
            if episode is not None:
                self.writer.add(float(episode["r"]), self.num_timesteps)
        return True

    def _poll_monitors(self) -> None:
        """Read new episodes straight from the Monitor wrappers."""
        per_env = self.training_env.get_attr("episode_returns")
        if self._seen is None:
            self._seen = [0] * len(per_env)
        for rank, returns in enumerate(per_env):
            for value in returns[self._seen[rank] :]:
                self.writer.add(float(value), self.num_timesteps)
            self._seen[rank] = len(returns)

    @property
    def pending(self) -> list[float]:
        """Returns of the episodes since the last written row."""
        return self.writer.pending

    def _on_training_end(self) -> None:
        if self._seen is not None:
            self._poll_monitors()
        self.writer.close(self.num_timesteps)


def save_checkpoint(
    run: RunDir,
    steps: int,
    models: BaseAlgorithm | Mapping[str, BaseAlgorithm],
    normalizer: VecNormalize | None,
    pending: Sequence[float],
    clock: RunClock | None,
    kind_state: dict[str, Any] | None = None,
    write_more: Callable[[Path], None] | None = None,
) -> None:
    """Save a checkpoint at ``steps`` with its resume state: the logs' lengths, the returns not yet in returns100
    (``pending``), the run clock's reading, what the kind of run keeps of its own (``kind_state``) and what
    ``write_more`` writes into the folder (the run state: :mod:`rlzoo.training.exact_resume`)."""
    state = log_state(run, list(pending), clock.elapsed() if clock is not None else None, kind_state)
    write_checkpoint(run.checkpoint(steps), models, normalizer, state, write_more)


# Writes a checkpoint's run state into its folder (rlzoo.training.exact_resume.RunStateWriter).
RunStateWriter = Callable[[Path, BaseAlgorithm], None]


class Checkpoint(BaseCallback):
    """Save the model and its normalisation statistics every ``every_steps`` agent steps (summed over envs), and once
    more when the run's :class:`~rlzoo.training.requeue.RequeueSignal` was received (Slurm's warning), before handing
    the signal on.

    SB3's on- and off-policy algorithms are checkpointed where a fresh ``learn()`` goes on from: at the start of the
    first rollout at or past the interval (or at the end of training), with the run state (``run_state``); other
    algorithms at the first step past it, without.

    :param run: the run directory.
    :param every_steps: checkpoint interval in agent steps.
    :param normalizer: the training env's observation normaliser, if any.
    :param returns100: the run's returns100 writer, whose unwritten episodes go into the resume state.
    :param clock: the run's clock, whose reading goes into the resume state.
    :param requeue: the run's SIGUSR2 catcher (None: only the interval).
    :param run_state: writes the run state into the checkpoint folder.
    """

    def __init__(
        self,
        run: RunDir,
        every_steps: int,
        normalizer: VecNormalize | None,
        returns100: Returns100 | None = None,
        clock: RunClock | None = None,
        requeue: RequeueSignal | None = None,
        run_state: RunStateWriter | None = None,
    ) -> None:
        super().__init__()
        self.run, self.run_state = run, run_state
        self._rollouts = False
        self.clock = clock
        self.every_steps = every_steps
        self.normalizer = normalizer
        self.returns100 = returns100
        self.requeue = requeue
        self._next = every_steps

    def _on_training_start(self) -> None:
        self._rollouts = isinstance(self.model, OnPolicyAlgorithm | OffPolicyAlgorithm)
        self._aim()

    def _aim(self) -> None:
        """Aim at the next multiple of the interval (also right after a save)."""
        self._next = (self.num_timesteps // self.every_steps + 1) * self.every_steps

    def _on_step(self) -> bool:
        if not self._rollouts:
            self._checkpoint_when_due()
        return True

    def _on_rollout_start(self) -> None:
        if self._rollouts:
            self._checkpoint_when_due()

    def _on_training_end(self) -> None:
        if self._rollouts and self.num_timesteps >= self._next:
            self._save()
            self._aim()

    def _checkpoint_when_due(self) -> None:
        signalled = self.requeue is not None and self.requeue.received
        if self.num_timesteps >= self._next or signalled:
            self._save()
            self._aim()
        if signalled:
            assert self.requeue is not None
            self.requeue.hand_on()  # the previous handler (or the default action) takes over

    def _save(self) -> None:
        pending = self.returns100.pending if self.returns100 is not None else []
        writer = self.run_state
        more = (lambda folder: writer(folder, self.model)) if writer is not None and self._rollouts else None
        save_checkpoint(self.run, self.num_timesteps, self.model, self.normalizer, pending, self.clock, None, more)
