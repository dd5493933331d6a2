"""An off-policy run's replay buffer across checkpoints, as append-only chunks of plain arrays (``checkpoint_buffer``).

At each checkpoint the rows the buffer gained since the previous one go to ``replay/<steps>.npz`` in the run dir
(plain arrays, nothing is unpickled; the files are :mod:`rlzoo.checkpoint_format`'s); the checkpoint's run state lists
the chunks that rebuild the buffer (oldest first; older ones drop out once newer rows cover the whole buffer), each
with its size in bytes, and the buffer's position and fullness. A prioritised buffer's sum tree, largest priority and
rows not yet in the tree go whole into the checkpoint's run state (priorities of old rows change as they are drawn).

A multi-agent run keeps one chunk set per learning key: ``replay/<key>/<steps>.npz``, listed under ``buffers`` (key →
chunk list) in the checkpoint's run state. A buffer class with more per-row arrays names them in ``extra_rows`` (the
multi-agent learners' next-state action masks).

A chunk that is missing or not of its recorded size makes its checkpoint incomplete: the resume takes the checkpoint
before it (:func:`rlzoo.checkpoint_format.chunks_problem`); a chunk whose arrays do not fit the buffer is refused in
one line, before training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.buffers import DictReplayBuffer, ReplayBuffer

from rlzoo.approximation.replay_buffers import PrioritizedReplayBuffer
from rlzoo.checkpoint_format import chunk_path, read_chunk, write_chunk
from rlzoo.errors import Refused


def saveable(buffer: Any) -> bool:
    """SB3's replay buffers (and rlzoo's prioritised one): arrays indexed by row, nothing else kept per row."""
    return type(buffer) in (ReplayBuffer, DictReplayBuffer, PrioritizedReplayBuffer) or (
        isinstance(buffer, ReplayBuffer)
        and (type(buffer).__name__ == "NStepReplayBuffer" or bool(getattr(type(buffer), "extra_rows", ())))
    )


def _fields(buffer: ReplayBuffer) -> dict[str, np.ndarray]:
    """The buffer's per-row arrays by name (a dict observation's keys as ``observations/<key>``)."""
    fields: dict[str, np.ndarray] = {}
    for name in ("observations", "next_observations", "actions", "rewards", "dones", "timeouts"):
        value = getattr(buffer, name, None)
        if isinstance(value, dict):
            fields |= {f"{name}/{key}": array for key, array in value.items()}
        elif isinstance(value, np.ndarray):
            fields[name] = value
    for name in getattr(type(buffer), "extra_rows", ()):
        fields[name] = getattr(buffer, name)
    return fields


class BufferChunks:
    """Writes a buffer's new rows at each checkpoint and keeps the list of chunks that rebuild it.

    :param folder: the run dir's ``replay/`` folder.
    :param manifest: the chunk list of the checkpoint a resumed run continues from (None: a fresh buffer).
    """

    def __init__(self, folder: Path, manifest: dict[str, Any] | None = None) -> None:
        self.folder = folder
        self.chunks: list[dict[str, Any]] = list(manifest["chunks"]) if manifest else []
        self.steps = int(manifest["steps"]) if manifest else 0
        self.pos = int(manifest["pos"]) if manifest else 0

    def save(self, buffer: ReplayBuffer, steps: int) -> dict[str, Any]:
        """Write the rows gained since the last save (at ``steps`` agent steps); return the manifest to record."""
        size = buffer.buffer_size
        added = (steps - self.steps) // buffer.n_envs  # one row per vec-env step
        if 0 <= added < size and (self.pos + added) % size == buffer.pos:
            start, count, chunks = self.pos, added, self.chunks
        else:  # more rows than the buffer holds (or a buffer filled otherwise): the whole buffer
            start, count, chunks = 0, size if buffer.full else buffer.pos, []
        arrays: dict[str, Any] = {"start": np.asarray(start, dtype=np.int64)}
        arrays |= {field: _take(array, start, count) for field, array in _fields(buffer).items()}
        if buffer.optimize_memory_usage:  # the next observation of the newest row lives in the row after it
            arrays["observations_after"] = buffer.observations[buffer.pos]
            arrays["after_row"] = np.asarray(buffer.pos)
        written = write_chunk(self.folder, steps, count, arrays)
        self.chunks = _covering([*chunks, written], size)
        self.steps, self.pos = steps, buffer.pos
        return {"chunks": self.chunks, "steps": steps, "pos": buffer.pos, "full": bool(buffer.full), "size": size}


def _take(array: np.ndarray, start: int, count: int) -> np.ndarray:
    """``count`` rows of a circular ``array`` from ``start`` (views, unless they wrap past its end)."""
    end = start + count
    if end <= len(array):
        return array[start:end]
    return np.concatenate([array[start:], array[: end - len(array)]])


def _put(array: np.ndarray, start: int, values: np.ndarray) -> None:
    """Write ``values`` into a circular ``array`` from row ``start``."""
    first = min(len(values), len(array) - start)
    array[start : start + first] = values[:first]
    array[: len(values) - first] = values[first:]


def _covering(chunks: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """The newest chunks that together hold at least ``size`` rows (all of them when they hold fewer)."""
    total = 0
    for index in range(len(chunks) - 1, -1, -1):
        total += int(chunks[index]["rows"])
        if total >= size:
            return chunks[index:]
    return chunks


def save_priorities(buffer: PrioritizedReplayBuffer, put: Any) -> None:
    """A prioritised buffer's sum tree (every level), largest priority and rows not yet in the tree."""
    for level, values in enumerate(buffer.tree.levels):
        put(f"buffer/tree/{level}", values)
    put("buffer/max_priority", float(buffer.max_priority))
    put("buffer/added", np.asarray(buffer._added, dtype=np.int64))


def restore_priorities(buffer: PrioritizedReplayBuffer, get: Any) -> None:
    levels = [get(f"buffer/tree/{level}") for level in range(len(buffer.tree.levels))]
    added, largest = get("buffer/added"), get("buffer/max_priority")
    shapes_fit = all(
        isinstance(s, np.ndarray) and s.shape == o.shape for s, o in zip(levels, buffer.tree.levels, strict=True)
    )
    if not shapes_fit or not isinstance(added, np.ndarray) or not isinstance(largest, int | float):
        raise Refused("run state: the prioritised buffer's sum tree does not fit the buffer")
    buffer.tree.levels = [level.astype(np.float64) for level in levels]
    buffer.max_priority = float(largest)
    buffer._added = [int(row) for row in added]


def restore_buffer(buffer: ReplayBuffer, run_path: Path, found: dict[str, Any], key: str = "") -> None:
    """Rebuild ``buffer`` (fresh, of the run's size) from the chunks of ``found`` (in ``replay/<key>/``): every row,
    position, fullness."""
    if found["size"] != buffer.buffer_size or not 0 <= found["pos"] < buffer.buffer_size:
        raise Refused(f"replay chunks: a buffer of {found['size']} rows at {found['pos']}, not of {buffer.buffer_size}")
    fields = _fields(buffer)
    for chunk in found["chunks"]:
        path = chunk_path(run_path, key, chunk["file"])
        try:
            _put_rows(buffer, fields, read_chunk(path), path)
        except Refused:
            raise
        except (OSError, ValueError, EOFError, KeyError) as error:
            raise Refused(f"replay chunk {path} cannot be read ({error})") from None
    buffer.pos, buffer.full = found["pos"], bool(found.get("full", False))


def _put_rows(buffer: ReplayBuffer, fields: dict[str, np.ndarray], saved: dict[str, np.ndarray], path: Path) -> None:
    start, size = saved["start"], buffer.buffer_size
    if start.shape != () or start.dtype.kind not in "iu" or not 0 <= int(start) < size:
        raise Refused(f"replay chunk {path}: start={start!r} is not a row of the buffer")
    count = len(saved["rewards"])
    for name, array in fields.items():
        values = saved[name]
        if values.shape != (count, *array.shape[1:]) or count > size:
            raise Refused(f"replay chunk {path}: {name} is shaped {values.shape}, not as the buffer's rows")
        _put(array, int(start), values)
    after = saved.get("observations_after")
    if after is not None and buffer.optimize_memory_usage and isinstance(buffer.observations, np.ndarray):
        if after.shape != buffer.observations.shape[1:]:
            raise Refused(f"replay chunk {path}: observations_after is not shaped as one row")
        buffer.observations[int(saved["after_row"]) % buffer.buffer_size] = after
