"""The training envs' state in a checkpoint, composed from the parts that own it.

Every part of the training vec env (its vec wrappers, the vec env, and each of its envs' wrappers and the env itself)
is taken through its :class:`~rlzoo.stateful.Stateful` view (:func:`rlzoo.any_env.state.stateful`: the part itself
when it implements ``get_state`` / ``set_state``, or an adapter of a known third-party part). The envs' state is saved
when the vec env and every env have a view and none declines at that moment (``get_state()`` is None); a vec wrapper
without one holds nothing to save (an encoder, a normaliser, whose statistics the checkpoint keeps apart). Every env's
generator (``np_random``) and its action spaces' generators are saved beside its parts: the generic part, needed by
every env. Each part's state goes under its own prefix in the run state (``vec/<depth>/``, ``vec/base/``,
``env/<rank>/<depth>/``) and is checked by the part when it is put back (a value that does not fit is one line,
:class:`~rlzoo.errors.Refused`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from rlzoo.any_env.state import stateful
from rlzoo.errors import Refused
from rlzoo.stateful import Stateful
from rlzoo.training.monitor import PerEnvMonitor
from rlzoo.training.run_state import Snapshot, generator_state, set_generator

# The layout of the envs' keys; a checkpoint of another layout resumes with its envs reset.
ENVS_FORMAT = "envs_format"
FORMAT = 2


def _vec_layers(venv: VecEnv) -> tuple[list[VecEnvWrapper], VecEnv]:
    layers = []
    while isinstance(venv, VecEnvWrapper):
        layers.append(venv)
        venv = venv.venv
    return layers, venv


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


def _envs(base: VecEnv) -> list[gym.Env]:
    """The Gymnasium envs under a vec env (its ``envs``, as SB3's ``DummyVecEnv`` lists them; none: another kind)."""
    envs = getattr(base, "envs", None)
    return list(envs) if isinstance(envs, list) and all(isinstance(env, gym.Env) for env in envs) else []


def _parts(venv: VecEnv) -> dict[str, Stateful] | None:
    """Every part of ``venv`` that holds state, by its prefix; None: the vec env or an env has no state view."""
    layers, base = _vec_layers(venv)
    found = {f"vec/{depth}/": stateful(layer) for depth, layer in enumerate(layers)}
    parts = {prefix: part for prefix, part in found.items() if part is not None}
    base_part, envs = stateful(base), _envs(base)
    if base_part is None or not envs:
        return None
    parts["vec/base/"] = base_part
    for rank, env in enumerate(envs):
        for depth, layer in enumerate(_layers(env)):
            part = stateful(layer)
            if part is None:
                return None
            parts[f"env/{rank}/{depth}/"] = part
    return parts


def envs_saveable(venv: VecEnv) -> bool:
    """Whether every part of ``venv`` can hold its state (one may still decline at a given moment)."""
    return _parts(venv) is not None


def capture_envs(snapshot: Snapshot, venv: VecEnv) -> bool:
    """The state of every part of ``venv`` and every env's generators; False: it cannot be saved now."""
    parts = _parts(venv)
    if parts is None:
        return False
    states = {prefix: part.get_state() for prefix, part in parts.items()}
    if any(state is None for state in states.values()):
        return False
    for prefix, state in states.items():
        for name, value in (state or {}).items():
            snapshot.put(prefix + name, value)
    for rank, env in enumerate(_envs(_vec_layers(venv)[1])):
        snapshot.put(f"env/{rank}/np_random", generator_state(env.unwrapped.np_random))
        for index, space in enumerate(_spaces(env)):
            snapshot.put(f"env/{rank}/space/{index}", generator_state(space.np_random))
    snapshot.put(ENVS_FORMAT, FORMAT)
    return True


def same_format(snapshot: Snapshot) -> bool:
    """Whether the snapshot's envs were saved in this layout (an older checkpoint's are not put back)."""
    return snapshot.get(ENVS_FORMAT) == FORMAT


def restore_envs(snapshot: Snapshot, venv: VecEnv) -> None:
    """Put the saved state into the parts of ``venv`` (reset first below any normaliser, so that every wrapper knows
    the env was reset; the statistics are left as they are), then every env's generators."""
    parts = _parts(venv)
    assert parts is not None
    layers, base = _vec_layers(venv)
    below = next((layer for layer in layers if isinstance(layer, PerEnvMonitor)), base)
    below.reset()
    for prefix, part in parts.items():
        try:
            part.set_state(snapshot.section(prefix))
        except ValueError as error:
            raise Refused(f"run state {prefix}{error}") from None
    for rank, env in enumerate(_envs(base)):
        set_generator(snapshot.get(f"env/{rank}/np_random"), env.unwrapped.np_random, f"np_random of env {rank}")
        for index, space in enumerate(_spaces(env)):
            set_generator(snapshot.get(f"env/{rank}/space/{index}"), space.np_random, f"action space of env {rank}")
