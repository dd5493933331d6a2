"""Atomic file writes (ground floor: no rlzoo imports): a file is either absent/old or complete, never half-written."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
