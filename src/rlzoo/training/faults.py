"""Faults while a run writes (a full disk, a folder gone read-only): one line naming the path and what survived."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager

from rlzoo.errors import ConfigError, RunFailure
from rlzoo.rundir import RunDir

# Errors of writing files, as opposed to OSErrors of other origins (a subprocess env's broken pipe ...).
WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO, errno.EFBIG}


def surviving(run: RunDir) -> str:
    """What a stopped run keeps, in words."""
    checkpoints = run.checkpoints()
    if checkpoints:
        newest = checkpoints[-1]
        return f"the run dir keeps checkpoint {newest.name} ({newest}); resume={run.path} continues from it"
    return f"no checkpoint had been saved yet; {run.path} holds the config and logs only"


@contextmanager
def run_writes(run: RunDir) -> Iterator[None]:
    """Turn an error of writing into :class:`~rlzoo.errors.RunFailure`: the path, the error and what survived."""
    try:
        yield
    except OSError as error:
        if error.errno not in WRITE_ERRORS and error.filename is None:
            raise
        where = error.filename or run.path
        reason = error.strerror or str(error)
        raise RunFailure(f"cannot write {where}: {reason} (errno {error.errno}); {surviving(run)}") from error


@contextmanager
def building(what: str) -> Iterator[None]:
    """Any error while ``what`` is built (the model: its policy from ``policy_kwargs``, its buffers) is a bad input:
    one line, before the run dir is claimed."""
    try:
        yield
    except ConfigError:
        raise
    except Exception as error:  # torch's errors for a bad layer size, a policy keyword SB3 does not take ...
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ConfigError(f"{what} could not be built: {type(error).__name__}: {first}") from None
