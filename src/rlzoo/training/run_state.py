"""What a single-agent run's future depends on beyond its weights, saved at each checkpoint without pickle, so that
a resumed run goes on as the uninterrupted run would have:

- the random generators: Python's, NumPy's global one, torch's (CPU, and CUDA when present);
- SB3's runtime state of the model (:data:`MODEL_RUNTIME`: the last observations and episode-start flags, counters,
  the schedules' progress, the exploration rate) and its episode-info buffers; SB3's logger values not yet written;
- the training envs where their state can be saved: composed by :mod:`rlzoo.training.env_state` from the parts
  that own it (:class:`rlzoo.stateful.Stateful`).

Files in the checkpoint folder: ``run_state.json`` (numbers and generator states) and ``run_state.npz`` (arrays,
read with ``allow_pickle=False``). A restore sets only attributes that exist and hold plain values (or nothing yet),
so a crafted file can change no more than those; a value of the wrong kind or shape is one line
(:class:`~rlzoo.errors.Refused`).

SB3's private members are read and written here and nowhere else in ``training/``.
"""

from __future__ import annotations

import random
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm

from rlzoo.checkpoint_format import read_run_state, write_run_state
from rlzoo.errors import Refused
from rlzoo.stateful import MISSING, plain_state, set_plain_state

# SB3's runtime members of a model that its zip's plain counters do not restore exactly, or not at all.
MODEL_RUNTIME = (
    "_last_obs", "_last_original_obs", "_last_episode_starts", "_n_calls", "_n_updates", "_episode_num",
    "_current_progress_remaining", "num_timesteps", "exploration_rate",
)  # fmt: skip
EPISODE_BUFFERS = ("ep_info_buffer", "ep_success_buffer")
# The NumPy types of a logger value that a snapshot may name.
NUMBER_TYPES = frozenset(f"{kind}{bits}" for kind in ("float", "int", "uint") for bits in (8, 16, 32, 64)) - {"float8"}


class Snapshot:
    """Flat keys to JSON values (``values``) and to numeric arrays (``arrays``)."""

    def __init__(self, values: dict[str, Any] | None = None, arrays: dict[str, np.ndarray] | None = None) -> None:
        self.values = values if values is not None else {}
        self.arrays = arrays if arrays is not None else {}

    def put(self, key: str, value: Any) -> None:
        if isinstance(value, np.ndarray):
            self.arrays[key] = value.copy()
        else:
            self.values[key] = value.item() if isinstance(value, np.generic) else value

    def get(self, key: str) -> Any:
        return self.arrays[key] if key in self.arrays else self.values.get(key, MISSING)

    def section(self, prefix: str) -> dict[str, Any]:
        """The values and arrays under ``prefix``, by their names after it."""
        found = {**self.values, **self.arrays}
        return {key[len(prefix) :]: value for key, value in found.items() if key.startswith(prefix)}

    def write(self, folder: Path) -> None:
        """Write the snapshot into checkpoint ``folder`` (:func:`rlzoo.checkpoint_format.write_run_state`)."""
        write_run_state(folder, self.values, self.arrays)

    @classmethod
    def read(cls, folder: Path) -> Snapshot | None:
        """The snapshot in ``folder`` (None: a checkpoint without one); unreadable files are one line."""
        found = read_run_state(folder)
        return None if found is None else cls(*found)


def capture_plain(snapshot: Snapshot, prefix: str, obj: Any, names: tuple[str, ...] = ()) -> None:
    """Put ``obj``'s plain attributes (``names``; empty: all of them) under ``prefix``."""
    for name, value in plain_state(obj, names).items():
        snapshot.put(prefix + name, value)


def restore_plain(snapshot: Snapshot, prefix: str, obj: Any, names: tuple[str, ...] = ()) -> None:
    """Set ``obj``'s plain attributes (``names``; empty: all) from the snapshot
    (:func:`rlzoo.stateful.set_plain_state`)."""
    try:
        set_plain_state(obj, snapshot.section(prefix), names)
    except ValueError as error:
        raise Refused(f"run state {prefix}{error}") from None


# --- generators ------------------------------------------------------------------------------------------------------
def _jsonable(state: Any) -> Any:
    """A generator state (nested dicts of ints, maybe arrays) as JSON values."""
    if isinstance(state, dict):
        return {key: _jsonable(value) for key, value in state.items()}
    return state.tolist() if isinstance(state, np.ndarray) else state


def generator_state(generator: np.random.Generator | None) -> Any:
    return None if generator is None else _jsonable(generator.bit_generator.state)


def set_generator(state: Any, generator: np.random.Generator | None, what: str) -> np.random.Generator | None:
    """``generator`` (a new PCG64 one when there is none) with ``state``; None when ``state`` is None."""
    if state is None:
        return None
    if generator is None:
        generator = np.random.Generator(np.random.PCG64())
    try:
        generator.bit_generator.state = state
    except (TypeError, ValueError, KeyError) as error:
        raise Refused(f"run state {what}: not a generator state of {generator.bit_generator.__class__.__name__} "
                      f"({error})") from None  # fmt: skip
    return generator


def capture_generators(snapshot: Snapshot) -> None:
    """Python's, NumPy's global and torch's generators."""
    version, internal, gauss = random.getstate()
    snapshot.put("random/python", [version, list(internal), gauss])
    numpy = np.random.get_state(legacy=False)
    assert isinstance(numpy, dict)
    snapshot.put("random/numpy/key", np.asarray(numpy["state"]["key"]))
    snapshot.put("random/numpy", {"pos": numpy["state"]["pos"], "has_gauss": numpy["has_gauss"],
                                  "gauss": numpy["gauss"]})  # fmt: skip
    snapshot.put("random/torch", torch.get_rng_state().numpy())
    if torch.cuda.is_available():
        for index, state in enumerate(torch.cuda.get_rng_state_all()):
            snapshot.put(f"random/cuda/{index}", state.cpu().numpy())


def restore_generators(snapshot: Snapshot) -> None:
    python, numpy, key = snapshot.get("random/python"), snapshot.get("random/numpy"), snapshot.get("random/numpy/key")
    try:
        random.setstate((python[0], tuple(python[1]), python[2]))
        np.random.set_state({"bit_generator": "MT19937", "state": {"key": key, "pos": numpy["pos"]},
                             "has_gauss": numpy["has_gauss"], "gauss": numpy["gauss"]})  # fmt: skip
        torch.set_rng_state(torch.from_numpy(np.asarray(snapshot.get("random/torch"), dtype=np.uint8)))
    except (TypeError, ValueError, KeyError, IndexError, RuntimeError) as error:
        raise Refused(f"run state: the random generators cannot be restored ({error})") from None
    if torch.cuda.is_available():
        states = [snapshot.get(f"random/cuda/{i}") for i in range(torch.cuda.device_count())]
        if all(isinstance(s, np.ndarray) for s in states):
            torch.cuda.set_rng_state_all([torch.from_numpy(s.astype(np.uint8)) for s in states])


# --- the model -------------------------------------------------------------------------------------------------------
def capture_model(snapshot: Snapshot, model: BaseAlgorithm, envs_saved: bool) -> None:
    """SB3's runtime members (the last observations only when the envs' state is saved too) and episode buffers."""
    names = MODEL_RUNTIME if envs_saved else MODEL_RUNTIME[3:]
    capture_plain(snapshot, "model/", model, names)
    for name in EPISODE_BUFFERS:
        buffer = getattr(model, name, None)
        if buffer is not None:
            snapshot.put(f"model/{name}", [_episode_info(item) for item in buffer])


def _episode_info(item: Any) -> Any:
    if isinstance(item, dict):
        return {str(k): float(v) for k, v in item.items() if isinstance(v, int | float | np.number)}
    return float(item)


def restore_model(snapshot: Snapshot, model: BaseAlgorithm) -> None:
    restore_plain(snapshot, "model/", model, MODEL_RUNTIME)
    window = getattr(model, "_stats_window_size", 100)
    for name in EPISODE_BUFFERS:
        saved = snapshot.get(f"model/{name}")
        if saved is MISSING:
            continue
        if not isinstance(saved, list) or not all(_is_episode_info(item) for item in saved):
            raise Refused(f"run state model/{name}: expected a list of episode figures")
        setattr(model, name, deque(saved, maxlen=window))


def _is_episode_info(item: Any) -> bool:
    if isinstance(item, dict):
        return all(isinstance(v, int | float) and not isinstance(v, bool) for v in item.values())
    return isinstance(item, int | float)


def capture_logger(snapshot: Snapshot, model: BaseAlgorithm) -> None:
    """SB3's logger values recorded but not yet written (they go into the next row of progress.csv), with the NumPy
    type of those that have one (a float32 loss is written with float32's digits)."""
    logger = model.logger
    values = {k: v for k, v in logger.name_to_value.items() if isinstance(v, int | float | np.number)}
    snapshot.put("logger/values", {k: v.item() if isinstance(v, np.number) else v for k, v in values.items()})
    snapshot.put("logger/types", {k: np.asarray(v).dtype.name for k, v in values.items() if isinstance(v, np.number)})
    snapshot.put("logger/counts", {k: int(logger.name_to_count.get(k, 0)) for k in values})
    excluded = {k: logger.name_to_excluded.get(k) for k in values}
    snapshot.put("logger/excluded", {k: list(v) if isinstance(v, tuple | list) else v for k, v in excluded.items()})


def restore_logger(snapshot: Snapshot, model: BaseAlgorithm) -> None:
    values, counts = snapshot.get("logger/values"), snapshot.get("logger/counts")
    excluded = snapshot.get("logger/excluded")
    if not isinstance(values, dict) or not isinstance(counts, dict) or not isinstance(excluded, dict):
        return
    logger, types = model.logger, snapshot.get("logger/types")
    for key, value in values.items():
        if isinstance(value, int | float) and isinstance(counts.get(key), int):
            logger.name_to_value[str(key)] = _typed(value, types.get(key) if isinstance(types, dict) else None)
            logger.name_to_count[str(key)] = counts[key]
            exclude = excluded.get(key)
            if exclude is None or (isinstance(exclude, list) and all(isinstance(e, str) for e in exclude)):
                logger.name_to_excluded[str(key)] = tuple(exclude) if exclude is not None else None  # type: ignore[assignment]


def _typed(value: int | float, dtype: Any) -> Any:
    """A logger value as it was recorded: a NumPy number of ``dtype`` (a name: ``float32``), else the int or float."""
    if dtype in NUMBER_TYPES:
        return np.dtype(dtype).type(value)
    return value
