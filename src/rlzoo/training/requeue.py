"""Slurm's warning before a time limit or preemption (``#SBATCH --signal=USR2@<s>``), for every kind of run: the run
context arms :class:`RequeueSignal` while a run that keeps checkpoints learns (from the claim of its run dir to the
end of learning); the kind's learning, at its next step, saves a checkpoint and hands the signal on to the handler
that was there (Submitit's, which requeues the job; without one, the default: the process ends). The requeued job
resumes from that checkpoint in the same run dir."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from rlzoo.loggers.wandb_state import lost, service_errors


class RequeueSignal:
    """SIGUSR2 noted while armed (``received``): a handler may interrupt a half-done gradient update, so the learning
    acts on it at its next step (:meth:`hand_on` once its checkpoint is saved)."""

    def __init__(self) -> None:
        self.received = False
        self._previous: Any = None

    def arm(self) -> None:
        """Catch SIGUSR2 from now on (in the main thread only: Python runs signal handlers there)."""
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGUSR2, self._note)
            self._previous = signal.SIG_DFL if previous is None else previous

    def _note(self, signum: int, frame: Any) -> None:
        self.received = True

    def learning_ended(self) -> None:
        """Give SIGUSR2 back to the handler that was there (saving and testing run without this one); a signal that
        came after the learning's last step is handed on."""
        if self.received:
            self.hand_on()
        self.disarm()

    def disarm(self) -> None:
        """Give SIGUSR2 back to the handler that was there."""
        if self._previous is not None:
            signal.signal(signal.SIGUSR2, self._previous)
            self._previous = None

    def hand_on(self) -> None:
        """Disarm and send SIGUSR2 again, now to the handler that was there (Submitit's requeues the job and exits)."""
        self.disarm()
        self.received = False
        try:
            os.kill(os.getpid(), signal.SIGUSR2)
        except service_errors() as error:  # Submitit's exit for a requeue met W&B's killed service in its exit hook
            lost(error)
            raise SystemExit(-1) from None  # the exit Submitit asked for: the job is requeued already
