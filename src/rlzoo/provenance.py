"""Where a result came from (ground floor: no rlzoo imports): the source commit of the running rlzoo and the CPU
seconds of this process, which a run records beside its metrics (``provenance.json``, ``time/cpu_seconds``)."""

from __future__ import annotations

import subprocess
import time
from functools import cache
from pathlib import Path

SOURCE = Path(__file__).resolve().parent
UNKNOWN = "unknown"


@cache
def source_commit() -> str:
    """The git commit of the checkout rlzoo runs from (``<sha>-dirty`` when tracked files differ from it), or
    ``unknown`` for an installed copy that is not a git checkout."""
    try:
        head = subprocess.run(
            ["git", "-C", str(SOURCE), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(SOURCE), "diff", "--quiet", "HEAD", "--", "."], capture_output=True, timeout=30
        ).returncode
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    return f"{head}-dirty" if dirty else head


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (every thread; not its child processes)."""
    return time.process_time()
