"""The checkpoint format: what a checkpoint folder and the run dir's replay chunks hold, read and written here only
(the run dir's core is :mod:`rlzoo.rundir`'s, the model files :mod:`rlzoo.model_files`'s)::

    checkpoints/<steps>/   written whole or not at all (:func:`write_checkpoint`)
        model.zip (+ obs_norm.npz), or models/<learner>/model.zip   the model(s) (a ``ModelFolder``)
        state.json         how many lines each log had, the returns not yet in returns100, the run clock and the kind's
                           own state (:class:`CheckpointState`)
        run_state.json, run_state.npz   generators, envs, SB3's runtime state, the replay chunk lists, as plain JSON
                           and plain arrays (composed by :mod:`rlzoo.training.run_state`)
    replay/<steps>.npz     the rows an off-policy run's replay buffer gained up to checkpoint <steps> (plain arrays)
    replay/<key>/<steps>.npz  a multi-agent run's: each learning key's rows, up to <steps> of that key's own

Every read goes through the confined file layer (:mod:`rlzoo.confined`) and is checked into typed values: a value of
the wrong kind is one :class:`~rlzoo.errors.Refused` line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlzoo.confined import count_lines, keep_lines, load_npz, read_json
from rlzoo.errors import Refused
from rlzoo.files import atomic_folder, atomic_path
from rlzoo.model_files import save_models
from rlzoo.untrusted import inside

if TYPE_CHECKING:  # SB3 (and torch) are imported where runs train, not where run dirs are read
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecNormalize

CHECKPOINTS = "checkpoints"
CHECKPOINT_STATE = "state.json"
RUN_STATE = "run_state.json"  # a checkpoint's generators, env and SB3 runtime state (training/run_state.py)
RUN_STATE_ARRAYS = "run_state.npz"
REPLAY = "replay"  # replay buffer chunks (training/buffer_chunks.py)
CHUNK_NAME = re.compile(r"^[0-9]{1,18}\.npz$")
KEY_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")  # a multi-agent key, as the name of its chunks' folder
BUFFER = "buffer"  # the run state's key of the chunk list
BUFFERS = "buffers"  # a multi-agent run's chunk lists, by agent key


@dataclass(frozen=True)
class CheckpointState:
    """A checkpoint's ``state.json``: what a resume cuts the logs back to and goes on from.

    :param log_lines: run-dir relative path of each log → its complete lines at the checkpoint.
    :param pending_returns: returns100's episodes not yet written.
    :param elapsed: seconds the run had trained (its clock; None: not recorded).
    :param kind: what the kind of run keeps of its own (multi-agent: each key's steps, the seat rotation ...).
    """

    log_lines: dict[str, int] = field(default_factory=dict)
    pending_returns: list[float] = field(default_factory=list)
    elapsed: float | None = None
    kind: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of_logs(
        cls, run_path: Path, logs: Iterable[Path], pending: Sequence[float], elapsed: float | None, kind: Any = None
    ) -> CheckpointState:
        """The state now: the complete lines of each of ``logs`` that exists (files of the run dir ``run_path``)."""
        lines = {}
        for path in logs:
            if path.is_file():
                relative = path.relative_to(run_path)
                lines[str(relative)] = count_lines(run_path, relative.as_posix())
        return cls(lines, list(pending), None if elapsed is None else round(elapsed, 6), dict(kind or {}))

    def to_json(self) -> dict[str, Any]:
        state: dict[str, Any] = {"log_lines": self.log_lines, "pending_returns": self.pending_returns}
        if self.elapsed is not None:
            state["elapsed_seconds"] = self.elapsed
        if self.kind:
            state["kind"] = self.kind
        return state


def _is_number(value: Any, kind: type) -> bool:
    """An int (``kind`` int), or an int or float (``kind`` float); never a bool."""
    allowed = (int,) if kind is int else (int, float)
    return isinstance(value, allowed) and not isinstance(value, bool)


def read_checkpoint_state(run_path: Path, folder: Path) -> CheckpointState:
    """The ``state.json`` of checkpoint ``folder`` (none: an empty state), checked: the log files it names (to cut
    back) lie inside the run dir ``run_path``; one line otherwise."""
    path = folder / CHECKPOINT_STATE
    if not path.is_file():
        return CheckpointState()
    try:
        state = read_json(folder, CHECKPOINT_STATE)
    except Refused:
        raise
    except (OSError, ValueError) as error:
        raise Refused(f"{path} is not JSON: {error}") from None
    if not isinstance(state, dict):
        raise Refused(f"{path} does not hold a mapping of resume state")
    lines, pending = state.get("log_lines", {}), state.get("pending_returns", [])
    if not isinstance(lines, dict) or not all(_is_number(n, int) for n in lines.values()):
        raise Refused(f"{path}: log_lines must map log files of the run to line counts, got {lines!r}"[:300])
    if not isinstance(pending, list) or not all(_is_number(r, float) for r in pending):
        raise Refused(f"{path}: pending_returns must be a list of returns, got {pending!r}"[:300])
    elapsed, kind = state.get("elapsed_seconds", 0.0), state.get("kind", {})
    if not _is_number(elapsed, float) or not isinstance(kind, dict):
        raise Refused(f"{path}: elapsed_seconds must be a number and kind a mapping")
    for relative in lines:
        inside(run_path, relative, f"{path}: log_lines")
    recorded = float(elapsed) if "elapsed_seconds" in state else None
    return CheckpointState(dict(lines), list(pending), recorded, dict(kind))


def cut_logs(run_path: Path, log_lines: Mapping[str, int]) -> None:
    """Cut every log of the run dir ``run_path`` back to its lines at the checkpoint (through the confined layer)."""
    for relative, keep in log_lines.items():
        if inside(run_path, relative, "log_lines").is_file():  # checked when the state was read; checked again here
            keep_lines(run_path, relative, keep)


def write_checkpoint(
    folder: Path,
    models: BaseAlgorithm | Mapping[str, BaseAlgorithm],
    normalizer: VecNormalize | None,
    state: CheckpointState,
    write_more: Callable[[Path], None] | None = None,
) -> Path:
    """Write checkpoint ``folder`` so that it appears complete or not at all (``models`` a mapping: several learners,
    each in ``models/<name>/``; ``write_more``: writes more files into the folder before it appears)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with atomic_folder(folder) as staging:
        save_models(staging, models, normalizer)
        (staging / CHECKPOINT_STATE).write_text(json.dumps(state.to_json(), indent=1) + "\n")
        if write_more is not None:
            write_more(staging)
    return folder


def write_run_state(folder: Path, values: dict[str, Any], arrays: dict[str, Any]) -> None:
    """Write a checkpoint's run state: ``values`` as JSON, ``arrays`` (numeric arrays) as plain arrays."""
    with atomic_path(folder / RUN_STATE_ARRAYS) as tmp, tmp.open("wb") as stream:
        np.savez(stream, **arrays)
    with atomic_path(folder / RUN_STATE) as tmp:
        tmp.write_text(json.dumps(values) + "\n")


def read_run_state(folder: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """The run state in checkpoint ``folder`` (None: a checkpoint without one); unreadable files are one line."""
    path = folder / RUN_STATE
    if not path.is_file():
        return None
    try:
        values = read_json(folder, RUN_STATE)
        arrays = load_npz(folder, RUN_STATE_ARRAYS)
    except Refused:
        raise
    except (OSError, ValueError, EOFError) as error:  # a pickled array, a truncated file ...
        raise Refused(f"{path.parent}: the run state cannot be read ({error})") from None
    if not isinstance(values, dict):
        raise Refused(f"{path}: not a mapping of run state")
    return values, arrays


def write_chunk(folder: Path, steps: int, rows: int, arrays: dict[str, Any]) -> dict[str, Any]:
    """Write the replay chunk ``<steps>.npz`` of ``rows`` rows into ``folder`` (``replay/``, a key's
    ``replay/<key>/``); return its entry in the chunk list."""
    name = f"{steps}.npz"
    with atomic_path(folder / name) as tmp, tmp.open("wb") as stream:
        np.savez(stream, **arrays)
    return {"file": name, "rows": rows, "bytes": (folder / name).stat().st_size}


def chunk_path(run_path: Path, key: str, name: str) -> Path:
    """Where chunk ``name`` of the buffer of ``key`` (``""``: a single-agent run's) lies in the run dir."""
    return run_path / REPLAY / key / name


def read_chunk(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a replay chunk (plain arrays, sized before they are read)."""
    return load_npz(path.parent, path.name)


def manifests(folder: Path) -> dict[str, dict[str, Any]]:
    """The chunk lists a checkpoint folder records, by the folder of their chunks under ``replay/`` (``""``: a
    single-agent run's buffer; an agent key: that key's buffer); empty: it saved no buffer."""
    path = folder / RUN_STATE
    if not path.is_file():
        return {}
    try:
        state = read_json(folder, RUN_STATE)
    except (OSError, ValueError) as error:
        raise Refused(f"{path} is not JSON: {error}") from None
    state = state if isinstance(state, dict) else {}
    found = {"": _checked(state[BUFFER], path)} if state.get(BUFFER) is not None else {}
    by_key = state.get(BUFFERS, {})
    if not isinstance(by_key, dict) or not all(isinstance(k, str) and KEY_NAME.match(k) for k in by_key):
        raise Refused(f"{path}: {BUFFERS} must map agent keys (letters, digits, _ . -) to replay chunk lists")
    return found | {key: _checked(value, path) for key, value in by_key.items()}


def _checked(found: Any, path: Path) -> dict[str, Any]:
    """A manifest whose entries are what :func:`write_chunk` lists (chunk names ``<steps>.npz``)."""
    numbers = ("steps", "pos", "size")
    ok = isinstance(found, dict) and all(isinstance(found.get(k), int) for k in numbers)
    chunks = found.get("chunks") if ok else None
    ok = ok and isinstance(chunks, list) and all(
        isinstance(c, dict) and isinstance(c.get("file"), str) and CHUNK_NAME.match(c["file"])
        and isinstance(c.get("rows"), int) and isinstance(c.get("bytes"), int) for c in chunks
    )  # fmt: skip
    if not ok:
        raise Refused(f"{path}: {BUFFER} must list replay chunks as BufferChunks writes them")
    return found


def chunks_problem(run_path: Path, folder: Path) -> str | None:
    """Why the buffer of checkpoint ``folder`` cannot be rebuilt (a chunk missing or cut short), or None."""
    for key, found in manifests(folder).items():
        for chunk in found["chunks"]:
            path = chunk_path(run_path, key, chunk["file"])
            if not path.is_file():
                return f"its replay chunk {path} is missing"
            if path.stat().st_size != chunk["bytes"]:
                return f"its replay chunk {path} holds {path.stat().st_size} bytes, not the {chunk['bytes']} written"
    return None
