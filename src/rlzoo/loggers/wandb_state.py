"""One training run, one W&B run: the W&B run id and the last step W&B has, kept in the run dir (``wandb.json``), and
rlzoo's own copy of every point the run logged to W&B (``wandb_history.jsonl``).

A resumed run (``resume=<run dir>``, a requeued Slurm job) starts W&B with the same id and ``resume="allow"``. Offline
(the default), W&B writes each process's points into a new folder of its own and loses those its service had not yet
written when the process was killed, so a resumed run sets the earlier processes' folders aside
(``wandb/superseded/``) and logs again, with their times, the points of its copy, cut back to the checkpoint like
every log: ``wandb sync <run dir>/wandb`` then sends one run holding every point once, in step order. Online, the
server holds the points; the writer drops those at steps W&B already has (the killed process logged past the
checkpoint the run resumes from), so the run's curve goes on without doubling back.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import secrets
import string
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rlzoo.confined import CSV_CAP, open_plain, read_bytes, read_json, write_bytes
from rlzoo.errors import ConfigError, Refused
from rlzoo.files import atomic_write_text
from rlzoo.rundir import RunDir

LOG = logging.getLogger("rlzoo")
RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
ID_ALPHABET = string.ascii_lowercase + string.digits
OFFLINE_RUNS = "offline-run-*"  # W&B's folder of one offline process, which `wandb sync <wandb dir>` sends
SUPERSEDED = "superseded"  # wandb/superseded/: earlier processes' folders, out of `wandb sync <wandb dir>`'s reach
Point = tuple[float, dict[str, float]]  # when it was logged (seconds since the epoch), its values
WANDB_STATE = "wandb.json"  # the W&B run id and the last step W&B has
WANDB_HISTORY = "wandb_history.jsonl"  # every point logged to an offline W&B run, logged again on resume


def state_file(run: RunDir) -> Path:
    """The run dir's W&B record: its run id and the last step W&B has."""
    return run.path / WANDB_STATE


def history_file(run: RunDir) -> Path:
    """The run dir's copy of every point logged to W&B offline: a log that a resume cuts back
    (:func:`rlzoo.training.resume.appended_logs`)."""
    return run.path / WANDB_HISTORY


@dataclass
class WandbState:
    """The W&B run of a run dir.

    :param run: the run dir.
    :param id: the W&B run id.
    :param step: the last step logged to W&B (-1: none yet).
    :param offline: W&B writes offline: every point is kept in the run dir's copy and a resumed run logs them again.
    """

    run: RunDir
    id: str
    step: int = -1
    offline: bool = True
    _copy: IO[str] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, run: RunDir, offline: bool = True) -> WandbState:
        """The run dir's W&B run; a run dir without one gets a new id, written at once (a kill during
        ``wandb.init`` still leaves it)."""
        path = state_file(run)
        if not os.path.lexists(path):
            state = cls(run, "".join(secrets.choice(ID_ALPHABET) for _ in range(8)), offline=offline)  # as W&B's
            state.save()
            return state
        data = read_json(path.parent, path.name)  # a shared run dir's file: plain, no link, capped
        try:
            found, step = str(data["id"]), int(data.get("step", -1))
        except (KeyError, TypeError, ValueError) as error:
            raise ConfigError(f"{path} is not rlzoo's W&B record ({error}); remove it to start a new W&B run") from None
        if not RUN_ID.fullmatch(found):
            raise ConfigError(f"{path}: id={found!r} is not a W&B run id (letters, digits, _ and -, at most 64)")
        return cls(run, found, step, offline)

    @property
    def floor(self) -> int:
        """Points at steps up to this one are not logged: those W&B already has (online; offline: none)."""
        return -1 if self.offline else self.step

    def save(self) -> None:
        atomic_write_text(state_file(self.run), json.dumps({"id": self.id, "step": self.step}) + "\n")

    def advance(self, step: int) -> None:
        """Record that W&B has the points up to ``step``."""
        if step > self.step:
            self.step = step
            self.save()

    def record(self, values: dict[str, float]) -> None:
        """Keep a point logged offline in the run dir's copy (one JSON line, written through)."""
        if not self.offline:
            return
        if self._copy is None:
            self._copy = _open_for_append(history_file(self.run))
        self._copy.write(json.dumps({"time": time.time(), "values": values}) + "\n")
        self._copy.flush()

    def points(self) -> list[Point]:
        """The points of the run dir's copy, checked (a shared run dir's file: one line when it is not rlzoo's); a
        last line cut short by a kill is not a point."""
        path = history_file(self.run)
        if not os.path.lexists(path):
            return []
        lines = read_bytes(path.parent, path.name, CSV_CAP).split(b"\n")[:-1]
        return [_point(path, number, line) for number, line in enumerate(lines, 1)]

    def continue_offline(self, wandb_run: Any) -> None:
        """Log the points of the run dir's copy (cut back to the resume point) into ``wandb_run``, with their times,
        then keep each new point there too; nothing when W&B is online."""
        if not self.offline:
            return
        for when, values in self.points():
            try:
                wandb_run.log({**values, "_timestamp": when})
            except service_errors() as error:  # the writer finds it gone too, and goes on without W&B
                lost(error)
                break
        self._copy = _open_for_append(history_file(self.run))

    def close(self) -> None:
        if self._copy is not None:
            self._copy.close()
            self._copy = None


def _open_for_append(path: Path) -> IO[str]:
    """``path`` opened to append lines (never through a link), a last line cut short by a kill removed first."""
    if os.path.lexists(path):
        data = read_bytes(path.parent, path.name, CSV_CAP)
        if data and not data.endswith(b"\n"):
            write_bytes(path.parent, path.name, data[: data.rfind(b"\n") + 1])
    return open_plain(path, "a")


def _point(path: Path, number: int, line: bytes) -> Point:
    """One line of the copy: ``{"time": seconds, "values": {key: number}}``; :class:`Refused` otherwise."""
    try:
        data = json.loads(line.decode("utf-8"))
    except ValueError as error:
        raise Refused(f"{path} line {number} is not a W&B point as rlzoo writes them ({error})") from None
    fields: dict[str, Any] = data if isinstance(data, dict) else {}
    when: Any = fields.get("time")
    values: Any = fields.get("values")
    if not (_is_number(when) and math.isfinite(when) and isinstance(values, dict)) or not all(
        isinstance(key, str) and _is_number(value) for key, value in values.items()
    ):
        raise Refused(
            f"{path} line {number} is not a W&B point as rlzoo writes them (a time and numbers by key): {line[:120]!r}"
        )
    return float(when), values


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def set_aside(run: RunDir) -> list[Path]:
    """Move the offline W&B folders of the run dir's earlier processes into ``wandb/superseded/`` (kept whole, out of
    ``wandb sync <run dir>/wandb``'s reach: the resumed run's own folder holds every point again); the moved
    folders."""
    folder = run.path / "wandb"
    found = sorted(folder.glob(OFFLINE_RUNS)) if folder.is_dir() and not folder.is_symlink() else []
    if not found:
        return []
    aside = folder / SUPERSEDED
    if aside.is_symlink() or (aside.exists() and not aside.is_dir()):
        raise Refused(f"{aside} is not a folder; rlzoo keeps the earlier W&B runs of a resumed run there")
    aside.mkdir(exist_ok=True)
    moved = []
    for path in found:
        target, n = aside / path.name, 1
        while target.exists() or target.is_symlink():
            target, n = aside / f"{path.name}.{n}", n + 1
        path.rename(target)  # a link is moved, never followed
        moved.append(target)
    if not history_file(run).is_file():
        LOG.warning(f"{run.path} holds no {history_file(run).name}: the W&B points logged before this resume stay "
                    f"in {aside} only")  # fmt: skip
    return moved


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
