"""Atomic file writes (ground floor): a file is either absent/old or complete, never half-written."""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from rlzoo.errors import Refused


@contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; move it into place only if the block succeeds."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=final.suffix, dir=final.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    tmp.chmod(0o644)  # mkstemp makes files owner-only; results are for everyone who may read the folder
    try:
        yield tmp
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` so that ``path`` is either absent/old or complete, never half-written."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


@contextmanager
def atomic_folder(final: Path) -> Iterator[Path]:
    """Yield a staging folder beside ``final`` (which may exist); the block fills it, then it replaces ``final``
    whole, so that ``final`` is either absent/old or complete. An :class:`OSError` (a full disk) names ``final``."""
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    # mkdtemp makes an owner-only folder: give it the mode of the folder around it (the user's umask)
    staging.chmod(stat.S_IMODE(final.parent.stat().st_mode))
    try:
        yield staging
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
    except OSError as error:
        error.filename = str(final)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def write_pid(lock_file: IO[str]) -> None:
    """Write this process's pid into a held lock file (for the message of a process it refuses); a full disk fails
    later, at the first real write, in one line."""
    try:
        lock_file.truncate(0)
        lock_file.write(str(os.getpid()))
        lock_file.flush()
    except OSError:
        pass


@contextmanager
def locked(lock_path: Path, *, wait: bool = True) -> Iterator[IO[str]]:
    """Hold the kernel's exclusive lock (``flock``) on ``lock_path`` (made if missing) while the block runs; yield the
    open lock file. A killed holder frees it. ``wait=False``: raise :class:`BlockingIOError` at once when another
    process holds it. On a file system without locks (some network or FUSE mounts) the block runs unguarded.

    Every file lock of rlzoo is this one: a run dir's (:meth:`rlzoo.rundir.RunDir.locked`), a sweep summary's writers,
    a study's output writers.
    """
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    try:  # never through a link: a lock named by a shared folder could point anywhere
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        if error.errno != errno.ELOOP:
            raise
        raise Refused(f"{lock_path} is a symlink; rlzoo keeps a plain lock file there (remove the link)") from None
    with os.fdopen(fd, "a+") as lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise
        except OSError:  # no locks to take here
            yield lock_file
            return
        try:
            yield lock_file
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)
