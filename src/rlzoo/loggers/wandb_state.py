"""One training run, one W&B run: the W&B run id and the last step W&B has, kept in the run dir (``wandb.json``).

A resumed run (``resume=<run dir>``, a requeued Slurm job) starts W&B with the same id and ``resume="allow"``, and
its writer drops the points at steps W&B already has (the killed process logged past the checkpoint the run resumes
from), so the run's curve in W&B goes on without doubling back.
"""

from __future__ import annotations

import json
import re
import secrets
import string
import warnings
from dataclasses import dataclass
from typing import Any

from rlzoo.errors import ConfigError
from rlzoo.files import atomic_write_text
from rlzoo.rundir import RunDir

RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
ID_ALPHABET = string.ascii_lowercase + string.digits


@dataclass
class WandbState:
    """The W&B run of a run dir.

    :param run: the run dir.
    :param id: the W&B run id.
    :param step: the last step logged to W&B (-1: none yet).
    """

    run: RunDir
    id: str
    step: int = -1

    @classmethod
    def of(cls, run: RunDir) -> WandbState:
        """The run dir's W&B run; a run dir without one gets a new id, written at once (a kill during
        ``wandb.init`` still leaves it)."""
        path = run.wandb_state
        if not path.is_file():
            state = cls(run, "".join(secrets.choice(ID_ALPHABET) for _ in range(8)))  # as W&B makes them
            state.save()
            return state
        try:
            data = json.loads(path.read_text())
            found, step = str(data["id"]), int(data.get("step", -1))
        except (ValueError, KeyError, TypeError) as error:
            raise ConfigError(f"{path} is not rlzoo's W&B record ({error}); remove it to start a new W&B run") from None
        if not RUN_ID.fullmatch(found):
            raise ConfigError(f"{path}: id={found!r} is not a W&B run id (letters, digits, _ and -, at most 64)")
        return cls(run, found, step)

    def save(self) -> None:
        atomic_write_text(self.run.wandb_state, json.dumps({"id": self.id, "step": self.step}) + "\n")

    def advance(self, step: int) -> None:
        """Record that W&B has the points up to ``step``."""
        if step > self.step:
            self.step = step
            self.save()


def service_errors() -> tuple[type[Exception], ...]:
    """What W&B raises when its service went away: a lost connection, an abandoned request (``finish``) or a closed
    mailbox (its exit hook, when the job exits for a requeue)."""
    try:
        from wandb.sdk.mailbox import HandleAbandonedError, MailboxClosedError
    except ImportError:  # another wandb version: its lost connection only
        return (ConnectionError,)
    return (ConnectionError, HandleAbandonedError, MailboxClosedError)


def lost(error: Exception) -> None:
    """Say once that W&B's service went away (Slurm's warning signal reaches every process of the job, W&B's service
    included): the run goes on; its own files hold every result, and a requeued run continues the W&B run."""
    why = str(error) or type(error).__name__
    warnings.warn(f"W&B's service is gone ({why}); this process logs no more to W&B", RuntimeWarning, stacklevel=3)


def finish(wandb_run: Any) -> None:
    """``wandb_run.finish()``, with a lost service only warned about."""
    try:
        wandb_run.finish()
    except service_errors() as error:
        lost(error)


def init_kwargs(state: WandbState) -> dict[str, Any]:
    """``wandb.init``'s keywords that continue the run dir's W&B run (or start it under its id)."""
    return {"id": state.id, "resume": "allow"}
