"""Who works on a pipeline dir: the one launcher that holds it, and the Slurm jobs in flight.

A launcher on Slurm records each job it puts in flight, ``<pipeline dir>/.inflight/<name>.json``: the job (an
encoder's job id, or the job name of a sweep's array), the RL runs it trains, and the launcher's pid and host. A
launcher run again (after a dropped login session) reads these records: a step whose job is still queued or running
is waited for, never deleted or submitted twice; a step whose job is gone without its result is cleared and
submitted again. An encoder's job also carries its step's folder name as its Slurm comment, so that a job whose
launcher died between ``sbatch`` and the record is found too.

A second launcher on the same pipeline dir while the first lives is refused (:func:`launcher_lock`, the kernel's
lock: a dead launcher's is free at once); locally the launcher does the work itself, and on Slurm two live launchers
would each submit the runs of an encoder they both waited for.

The sweep child a launcher starts (``python -m rlzoo.train -m``) dies with it (:func:`die_with_parent`), so that
no two processes ever submit the same runs: its jobs already submitted stay in flight for the next launcher.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from rlzoo.confined import bare_name, check_not_link, output_folder, read_json, read_text, write_bytes
from rlzoo.errors import ConfigError, Refused, RunFailure
from rlzoo.files import locked
from rlzoo.progress_lines import ProgressLines

FOLDER = Path(".inflight")
LAUNCHER_LOCK = ".launcher.lock"
POLL_S = 2.0  # seconds between two looks at the queue while waiting for a job
PR_SET_PDEATHSIG = 1  # prctl(2)
JOB_ID = re.compile(r"^[0-9]{1,12}(_[0-9]{1,9})?$")  # a Slurm job id (an array task's: <id>_<task>)
JOB_NAME = re.compile(r"^rlzoo-[a-z]+(-[0-9a-f]{1,64})?$")  # the job names rlzoo's launchers give their jobs


@dataclass(frozen=True)
class InFlight:
    """One Slurm job a launcher put in flight for a pipeline step.

    :param job: the job id (an encoder's job) or the job name (a sweep's array, named before it is submitted).
    :param runs: the RL runs the job trains (empty for an encoder).
    """

    name: str
    job: str
    runs: list[str]
    pid: int
    host: str

    def owner(self) -> str:
        return f"launcher pid {self.pid} on {self.host}"


def record_path(pipeline_dir: Path, name: str) -> Path:
    return pipeline_dir / FOLDER / f"{bare_name(name, 'an .inflight name')}.json"


def record(pipeline_dir: Path, name: str, job: str, runs: list[str] | None = None) -> InFlight:
    """Record (atomically) that this launcher put ``job`` in flight for the step ``name``."""
    entry = InFlight(name, job, list(runs or []), os.getpid(), socket.gethostname())
    path = record_path(pipeline_dir, name)
    write_bytes(output_folder(path.parent), path.name, json.dumps(asdict(entry)).encode())
    return entry


def find(pipeline_dir: Path, name: str) -> InFlight | None:
    """The record of the step ``name``, or None."""
    path = record_path(pipeline_dir, name)
    return _read(path) if path.is_file() or path.is_symlink() else None


def records(pipeline_dir: Path) -> list[InFlight]:
    """Every record of the pipeline dir."""
    folder = pipeline_dir / FOLDER
    if folder.is_symlink():
        output_folder(folder)  # refused: a link
    return [_read(path) for path in sorted(folder.glob("*.json"))]


def _read(path: Path) -> InFlight:
    """A record, checked: a bare name (its file's), a Slurm job id or an rlzoo job name, run names, a pid."""
    values = read_json(path.parent, path.name)
    try:
        entry = InFlight(**values)
    except TypeError as error:
        raise ConfigError(f"{path}: not a record of a job in flight ({error}); remove it") from None
    if entry.name != bare_name(entry.name, f"{path}: name") or f"{entry.name}.json" != path.name:
        raise Refused(f"{path}: name={entry.name!r} is not its file's name; remove it")
    if not isinstance(entry.job, str) or not (JOB_ID.match(entry.job) or entry.job == entry.name):
        raise Refused(
            f"{path}: job={str(entry.job)[:40]!r} is neither a Slurm job id nor the entry's own name; remove it"
        )
    if not isinstance(entry.runs, list) or not all(isinstance(run, str) for run in entry.runs):
        raise Refused(f"{path}: runs is not a list of run names; remove it")
    for run in entry.runs:
        bare_name(run, f"{path}: runs")
    return entry


def forget(pipeline_dir: Path, name: str) -> None:
    record_path(pipeline_dir, name).unlink(missing_ok=True)


def queued(job: str, tries: int = 3, comment: str | None = None) -> bool:
    """Whether Slurm still has ``job`` (an id or a job name) queued, running or ending (``squeue``; a controller
    that does not answer is asked again ``tries`` times in all). A job id counts only when the job carries an rlzoo
    job name and, given, the Slurm ``comment`` its launcher wrote: a record naming someone else's job is not waited
    for."""
    selector = ["--jobs", job] if job.replace("_", "").isdigit() else ["--name", job]
    for attempt in range(tries):
        done = subprocess.run(
            ["squeue", "--noheader", "--format=%T %j %k", *selector],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if done.returncode == 0:
            return any(_ours(line, comment) for line in done.stdout.splitlines() if line.strip())
        if "Invalid job id" in done.stderr:  # the controller forgot it: ended long ago
            return False
        if attempt + 1 < tries:
            time.sleep(POLL_S)
    raise RunFailure(f"squeue {' '.join(selector)} failed: {done.stderr.strip() or done.stdout.strip()}")


def _ours(line: str, comment: str | None) -> bool:
    """Whether a ``%T %j %k`` line of squeue is a live job an rlzoo launcher named (with ``comment``, if given)."""
    state, name, *rest = [*line.split(maxsplit=2), ""][:3]
    owned = bool(JOB_NAME.match(name)) and (comment is None or rest == [comment])
    return owned and state not in ENDED


def queued_with_comment(job_name: str, comment: str) -> str | None:
    """The id of a job named ``job_name`` with ``comment`` that Slurm has queued or running, or None: a job whose
    launcher died before it could record the job (between ``sbatch`` and the record)."""
    done = subprocess.run(
        ["squeue", "--noheader", "--format=%i %T %k", "--name", job_name],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        job_id, state, *rest = line.split(maxsplit=2)
        if rest == [comment] and state not in ENDED:
            return job_id
    return None


# Job states after which nothing more runs (squeue shows them for a while after the end).
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL",
         "DEADLINE", "REVOKED", "SPECIAL_EXIT"}  # fmt: skip


def wait_while(condition: Callable[[], bool], poll_s: float = POLL_S, phase: str = "waiting for Slurm jobs") -> None:
    """Return once ``condition()`` is false, looking every ``poll_s`` seconds (a job runs as long as it needs); a
    progress line names ``phase`` and the time waited every 10 s."""
    lines = ProgressLines(phase, 1, "arrays")
    while condition():
        lines.update(0)
        time.sleep(poll_s)


@contextmanager
def launcher_lock(pipeline_dir: Path) -> Iterator[None]:
    """Hold the pipeline dir for this launcher: a second one is refused with one line naming the first's pid."""
    lock_path = check_not_link(pipeline_dir / LAUNCHER_LOCK, "the launcher's lock")
    held = ExitStack()
    try:
        lock_file = held.enter_context(locked(lock_path, wait=False))
    except BlockingIOError:
        holder = read_text(pipeline_dir, LAUNCHER_LOCK, 4096).split() if lock_path.is_file() else []
        raise ConfigError(
            f"pipeline.dir={pipeline_dir} is in use: another launcher (pid {holder[0] if holder else 'unknown'}) "
            "runs this pipeline; wait for it to end, or stop it"
        ) from None
    with held:
        lock_file.truncate(0)
        lock_file.write(f"{os.getpid()} {socket.gethostname()}")
        lock_file.flush()
        try:
            yield
        finally:
            lock_path.unlink(missing_ok=True)  # while still held, so no one locks a file about to go


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` for a child that must end with the launcher, even one killed with SIGKILL (Linux's
    ``PR_SET_PDEATHSIG``: the child gets SIGTERM when the thread that started it ends); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
    parent = os.getpid()

    def set_death_signal() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the launcher died before the call
            os._exit(1)

    return set_death_signal
