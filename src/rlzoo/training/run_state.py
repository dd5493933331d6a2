"""What a single-agent run's future depends on beyond its weights, saved at each checkpoint without pickle, so that
a resumed run goes on as the uninterrupted run would have:

- the random generators: Python's, NumPy's global one, torch's (CPU, and CUDA when present);
- SB3's runtime state of the model (:data:`MODEL_RUNTIME`: the last observations and episode-start flags, counters,
  the schedules' progress, the exploration rate) and its episode-info buffers; SB3's logger values not yet written;
- the training envs where their state can be saved (:func:`exact_env`: rlzoo's MobileRobot family, Gymnasium's
  classic control, the Kuka arm but KukaRandButton): every wrapper's and env's plain attributes (numbers, flags,
  numeric arrays: positions, step counters, time limits; the arm's physics and counters through
  :mod:`rlzoo.envs.kuka_state`, unless a contact at the checkpoint keeps it from continuing exactly), every env's
  ``np_random`` and action-space generator, the monitor's running episodes, a frame stack, the batched vec env's
  arrays. Other envs are reset by the resumed run, which says so in one line.

Files in the checkpoint folder: ``run_state.json`` (numbers and generator states) and ``run_state.npz`` (arrays,
read with ``allow_pickle=False``). A restore sets only attributes that exist and hold plain values (or nothing yet),
so a crafted file can change no more than those; a value of the wrong kind or shape is one line
(:class:`~rlzoo.errors.Refused`).

SB3's private members are read and written here and nowhere else in ``training/``.
"""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecEnvWrapper, VecFrameStack

from rlzoo.confined import load_npz, read_json
from rlzoo.envs.mobile_robot_batched import BatchedMobileRobot
from rlzoo.errors import Refused
from rlzoo.files import atomic_path
from rlzoo.rundir import RUN_STATE, RUN_STATE_ARRAYS
from rlzoo.training.monitor import PerEnvMonitor

# SB3's runtime members of a model that its zip's plain counters do not restore exactly, or not at all.
MODEL_RUNTIME = (
    "_last_obs", "_last_original_obs", "_last_episode_starts", "_n_calls", "_n_updates", "_episode_num",
    "_current_progress_remaining", "num_timesteps", "exploration_rate",
)  # fmt: skip
EPISODE_BUFFERS = ("ep_info_buffer", "ep_success_buffer")
BATCHED_STATE = ("_robots", "_targets", "_current", "_steps")  # the batched vec env's robots (its envs' truth)
# Envs whose whole state is plain attributes and their generator: a resumed run continues their episodes exactly.
EXACT_ENV_MODULES = ("rlzoo.envs.mobile_robot", "gymnasium.envs.classic_control")
ARM_MODULES = "rlzoo.envs.kuka"  # the arm envs: their state through rlzoo.envs.kuka_state
MISSING: Any = object()
Scalar = bool | int | float | None


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

    def write(self, folder: Path) -> None:
        arrays: dict[str, Any] = self.arrays
        with atomic_path(folder / RUN_STATE_ARRAYS) as tmp, tmp.open("wb") as stream:
            np.savez(stream, **arrays)
        with atomic_path(folder / RUN_STATE) as tmp:
            tmp.write_text(json.dumps(self.values) + "\n")

    @classmethod
    def read(cls, folder: Path) -> Snapshot | None:
        """The snapshot in ``folder`` (None: a checkpoint without one); unreadable files are one line."""
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
        return cls(values, arrays)


def _plain(value: Any) -> bool:
    """A number, a flag, None, or a numeric array: what a snapshot keeps of an object's attributes."""
    if value is None or isinstance(value, bool | int | float | np.bool_ | np.integer | np.floating):
        return True
    return isinstance(value, np.ndarray) and value.dtype.kind in "biuf"


def capture_plain(snapshot: Snapshot, prefix: str, obj: Any, names: Iterator[str] | tuple[str, ...] = ()) -> None:
    """Put ``obj``'s plain attributes (``names``; empty: all of them) under ``prefix``."""
    chosen = names or tuple(vars(obj))
    for name in chosen:
        value = getattr(obj, name, MISSING)
        if not name.startswith("__") and value is not MISSING and _plain(value):
            snapshot.put(prefix + name, value)


def restore_plain(snapshot: Snapshot, prefix: str, obj: Any, names: tuple[str, ...] = ()) -> None:
    """Set ``obj``'s plain attributes (``names``; empty: all) from the snapshot: an array of the same shape for an
    array, a number for a number; None (nothing yet) takes either."""
    for name in names or tuple(vars(obj)):
        current: Any = getattr(obj, name, MISSING)
        saved = snapshot.get(prefix + name)
        if saved is MISSING or current is MISSING or not _plain(current) or not _plain(saved):
            continue
        if isinstance(current, np.ndarray) or isinstance(saved, np.ndarray):
            if not isinstance(saved, np.ndarray) or (current is not None and np.shape(current) != saved.shape):
                raise Refused(f"run state {prefix}{name}: expected an array shaped like {np.shape(current)}")
            value: Any = saved.astype(current.dtype) if isinstance(current, np.ndarray) else saved.copy()
        else:
            value = type(current)(saved) if isinstance(current, np.generic) and saved is not None else saved
        setattr(obj, name, value)


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
    """SB3's logger values recorded but not yet written (they go into the next row of progress.csv)."""
    logger = model.logger
    values = {k: v for k, v in logger.name_to_value.items() if isinstance(v, int | float | np.number)}
    snapshot.put("logger/values", {k: float(v) for k, v in values.items()})
    snapshot.put("logger/counts", {k: int(logger.name_to_count.get(k, 0)) for k in values})
    excluded = {k: logger.name_to_excluded.get(k) for k in values}
    snapshot.put("logger/excluded", {k: list(v) if isinstance(v, tuple | list) else v for k, v in excluded.items()})


def restore_logger(snapshot: Snapshot, model: BaseAlgorithm) -> None:
    values, counts = snapshot.get("logger/values"), snapshot.get("logger/counts")
    excluded = snapshot.get("logger/excluded")
    if not isinstance(values, dict) or not isinstance(counts, dict) or not isinstance(excluded, dict):
        return
    logger = model.logger
    for key, value in values.items():
        if isinstance(value, int | float) and isinstance(counts.get(key), int):
            logger.name_to_value[str(key)] = float(value)
            logger.name_to_count[str(key)] = counts[key]
            exclude = excluded.get(key)
            if exclude is None or (isinstance(exclude, list) and all(isinstance(e, str) for e in exclude)):
                logger.name_to_excluded[str(key)] = tuple(exclude) if exclude is not None else None  # type: ignore[assignment]


# --- the envs --------------------------------------------------------------------------------------------------------
def exact_env(env: gym.Env) -> bool:
    """An env whose whole state is its plain attributes and its generator (rlzoo's MobileRobot family, Gymnasium's
    classic control), or an arm env whose state :mod:`rlzoo.envs.kuka_state` saves."""
    arm = _arm(env)
    if arm is not None:
        return bool(arm.restorable(env.unwrapped))
    return type(env.unwrapped).__module__.startswith(EXACT_ENV_MODULES)


def _arm(env: gym.Env) -> ModuleType | None:
    """:mod:`rlzoo.envs.kuka_state` for an arm env (imported only then: it needs PyBullet); None for other envs."""
    if not type(env.unwrapped).__module__.startswith(ARM_MODULES):
        return None
    from rlzoo.envs import kuka_state

    return kuka_state


def _layers(env: gym.Env) -> list[Any]:
    """``env``'s wrappers, outermost first, then the env itself."""
    layers: list[Any] = []
    while isinstance(env, gym.Wrapper):
        layers.append(env)
        env = env.env
    return [*layers, env]


def _spaces(env: gym.Env) -> list[gym.Space[Any]]:
    outer, inner = env.action_space, env.unwrapped.action_space
    return [outer] if outer is inner else [outer, inner]


def _vec_layers(venv: VecEnv) -> tuple[list[VecEnvWrapper], VecEnv]:
    layers = []
    while isinstance(venv, VecEnvWrapper):
        layers.append(venv)
        venv = venv.venv
    return layers, venv


def _gym_envs(base: VecEnv) -> list[gym.Env] | None:
    """The gym envs under a vec env whose state can be saved (None: another vec env, or an env that is not exact)."""
    envs = list(base.envs) if isinstance(base, DummyVecEnv | BatchedMobileRobot) else None
    return envs if envs is not None and all(exact_env(env) for env in envs) else None


def envs_saveable(venv: VecEnv) -> bool:
    return _gym_envs(_vec_layers(venv)[1]) is not None


def capture_envs(snapshot: Snapshot, venv: VecEnv) -> bool:
    """The state of every env under ``venv`` and of the vec wrappers holding some; False: it cannot be saved."""
    layers, base = _vec_layers(venv)
    envs = _gym_envs(base)
    if envs is None or any(_in_contact(env) for env in envs):
        return False
    for layer in layers:
        if isinstance(layer, PerEnvMonitor):
            capture_plain(snapshot, "monitor/", layer, ("_return", "_length"))
        elif isinstance(layer, VecFrameStack):
            stacked = getattr(layer.stacked_obs, "stacked_obs", None)
            if not isinstance(stacked, np.ndarray):  # a dict observation's stacks
                return False
            snapshot.put("frame_stack", stacked)
    if isinstance(base, BatchedMobileRobot):
        capture_plain(snapshot, "batched/", base, BATCHED_STATE)
    for rank, env in enumerate(envs):
        _capture_env(snapshot, f"env/{rank}/", env)
    return True


def _in_contact(env: gym.Env) -> bool:
    """An arm env with bodies in contact: its state would not continue exactly."""
    arm = _arm(env)
    return arm is not None and bool(arm.in_contact(env.unwrapped))


def _capture_env(snapshot: Snapshot, prefix: str, env: gym.Env) -> None:
    """Every layer's plain attributes (an arm env's own state through :mod:`rlzoo.envs.kuka_state`), generators."""
    arm = _arm(env)
    for depth, layer in enumerate(_layers(env)[:-1] if arm else _layers(env)):
        capture_plain(snapshot, f"{prefix}{depth}/", layer)
    for key, value in arm.capture(env.unwrapped).items() if arm else ():
        snapshot.put(f"{prefix}arm/{key}", value)
    snapshot.put(f"{prefix}np_random", generator_state(env.unwrapped._np_random))
    for index, space in enumerate(_spaces(env)):
        snapshot.put(f"{prefix}space/{index}", generator_state(space._np_random))


def restore_envs(snapshot: Snapshot, venv: VecEnv) -> None:
    """Put the saved state into the envs under ``venv`` (reset first below any normaliser, so that every wrapper
    knows the env was reset; the statistics are left as they are)."""
    layers, base = _vec_layers(venv)
    envs = _gym_envs(base)
    assert envs is not None
    below = next((layer for layer in layers if isinstance(layer, PerEnvMonitor)), base)
    below.reset()
    for layer in layers:
        if isinstance(layer, PerEnvMonitor):
            restore_plain(snapshot, "monitor/", layer, ("_return", "_length"))
        elif isinstance(layer, VecFrameStack):
            stack = layer.stacked_obs
            saved = snapshot.get("frame_stack")
            if not isinstance(saved, np.ndarray) or saved.shape != stack.stacked_obs.shape:
                raise Refused("run state frame_stack: expected the stacked observations of the frame stack")
            stack.stacked_obs = saved.astype(stack.stacked_obs.dtype)
    if isinstance(base, BatchedMobileRobot):
        restore_plain(snapshot, "batched/", base, BATCHED_STATE)
    for rank, env in enumerate(envs):
        _restore_env(snapshot, rank, env)


def _restore_env(snapshot: Snapshot, rank: int, env: gym.Env) -> None:
    prefix, arm = f"env/{rank}/", _arm(env)
    for depth, layer in enumerate(_layers(env)[:-1] if arm else _layers(env)):
        restore_plain(snapshot, f"{prefix}{depth}/", layer)
    if arm:
        arm.restore(env.unwrapped, {key: snapshot.get(f"{prefix}arm/{key}") for key in arm.KEYS})
    unwrapped: Any = env.unwrapped  # gymnasium types _np_random as set; a saved None leaves it unset
    unwrapped._np_random = set_generator(snapshot.get(f"{prefix}np_random"), unwrapped._np_random, "np_random")
    for index, space in enumerate(_spaces(env)):
        held: Any = space  # gymnasium types _np_random as set; a saved None leaves it unset
        held._np_random = set_generator(
            snapshot.get(f"{prefix}space/{index}"), space._np_random, f"action space of env {rank}"
        )
