"""Loading a run dir without running its code: the ``_target_`` allowlist and the pickle-free model load.

A run dir may come from someone else, so by default nothing in it is code:

- ``config.yaml`` (:func:`check_targets`) holds no interpolation (:mod:`rlzoo.untrusted`), so the tree checked is the
  tree built; its ``_target_`` entries (every node and list item) are resolved only within an allowlist: algorithm,
  policy, network, feature-extractor and action-noise classes of SB3, sb3-contrib, SBX and rlzoo, SB3's schedules,
  ``torch.nn`` modules (activations, through ``hydra.utils.get_class``), rlzoo's representation wrappers, the
  algorithms the loading user registered in their own config folder (``rlzoo_conf/algo/<name>.yaml`` or
  ``$RLZOO_CONF``: :func:`user_algorithms`) and the modules they name (``allow``). A module ``env.id`` names
  (``module:EnvId``, a multi-agent run's PettingZoo module) must be under :data:`ENV_MODULES` or ``allow``; no module is
  imported from the run dir, the folder holding it or the current folder. Anything else is refused in one line
  naming the key (:class:`~rlzoo.errors.Refused`).
- ``model.zip`` (:func:`load_untrusted`): the model is rebuilt from the checked config; its weights come from the zip's
  ``.pth`` files through ``torch.load(weights_only=True)`` (SB3's ``load_from_zip_file(load_data=False)``), so no
  cloudpickled ``:serialized:`` entry of the ``data`` JSON is ever unpickled; the plain JSON counters listed in
  :data:`PLAIN_KEYS` are copied. SBX models take their weights from ``model.msgpack`` (:mod:`rlzoo.jax_weights`).

``trusted=True`` (``trusted=true`` on the command line) loads with SB3's own ``load`` instead: needed for a plain SB3
zip without an rlzoo config, an SBX run saved before ``model.msgpack`` existed, and configs naming other code.
"""

from __future__ import annotations

import inspect
import pickle
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from hydra._internal.utils import _locate
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.noise import ActionNoise
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.utils import ConstantSchedule, FloatSchedule, LinearSchedule
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecFrameStack

from rlzoo.algos.factory import AlgorithmFactory
from rlzoo.config import user_config_dir
from rlzoo.confined import JSON_CAP, check_zip, check_zip_member, memory_budget, open_regular, parse_json
from rlzoo.errors import ConfigError, Refused
from rlzoo.jax_weights import JAX_WEIGHTS, is_jax_model, load_jax_weights
from rlzoo.untrusted import TRUST_HINT, check_import, check_links, check_origin, refuse_interpolations

# Packages whose classes of the kinds below a config may name.
ALLOWED_ROOTS = ("stable_baselines3", "sb3_contrib", "sbx", "rlzoo", "torch.nn")
ALLOWED_KINDS: tuple[type, ...] = (BaseAlgorithm, BasePolicy, ActionNoise, torch.nn.Module)
ALLOWED_OBJECTS: tuple[Any, ...] = (LinearSchedule, ConstantSchedule, FloatSchedule, VecFrameStack)
# rlzoo's own representation pieces: functions and wrappers (``srl_model.observation_wrapper`` ...).
RLZOO_FUNCTIONS = ("rlzoo.srl.pixels.rendered_pixels",)
RLZOO_KINDS: tuple[type, ...] = (gym.Wrapper, VecEnvWrapper)
RLZOO_WRAPPERS = ("rlzoo.srl", "rlzoo.any_env")  # where those wrappers may come from (not the run's own monitor ...)
GET_CLASS = "hydra.utils.get_class"
# Plain JSON entries of SB3's ``data`` copied onto a rebuilt model: counters that resume and logs read.
PLAIN_KEYS = (
    "num_timesteps",
    "_total_timesteps",
    "_num_timesteps_at_start",
    "_n_updates",
    "_episode_num",
    "_current_progress_remaining",
    "exploration_rate",
)
# Top-level modules an untrusted run's ``env.id`` may make rlzoo import (``module:EnvId``, a PettingZoo module):
# Gymnasium's and rlzoo's registries, PettingZoo and the extras' env packages.
ENV_MODULES = ("gymnasium", "rlzoo", "ale_py", "pettingzoo", "mpe2", "shimmy")


def _under(target: str, roots: Sequence[str]) -> bool:
    return any(target == root or target.startswith(root + ".") for root in roots)


def allowed_target(target: str, node: dict[str, Any], allow: Sequence[str] = (), run_root: Path | None = None) -> bool:
    """Whether a ``_target_`` may be instantiated from a shared config (see the module docstring).

    :param node: the mapping holding it (``hydra.utils.get_class`` is allowed for an allowed ``path`` only).
    :param allow: module or object names the loading user trusts (their own algorithm module).
    :param run_root: the run dir: a module it (or the folder above it) holds is never imported
        (:func:`rlzoo.untrusted.check_origin` raises :class:`~rlzoo.errors.Refused`).
    """
    if any(part.startswith("_") for part in target.split(".")):
        return False  # no private names, no dunder walks (``PPO.__init__.__globals__``)
    if _under(target, allow):  # the user's module: its classes, not its functions
        return _located_kind(target, ALLOWED_KINDS, run_root, user=True)
    if target == GET_CLASS:
        path = node.get("path")
        return set(node) <= {"_target_", "path"} and isinstance(path, str) and _allowed_object(path, run_root)
    return target in RLZOO_FUNCTIONS or _allowed_object(target, run_root)


def _located_kind(target: str, kinds: tuple[type, ...], run_root: Path | None, user: bool = False) -> bool:
    """Whether ``target`` names a class of one of ``kinds`` (or one of :data:`ALLOWED_OBJECTS`)."""
    check_origin(target, f"_target_={target!r}", run_root, current_folder=user)
    try:
        found = _locate(target)
    except Exception:  # not importable: refused like any unknown name
        return False
    if any(found is allowed for allowed in ALLOWED_OBJECTS):
        return True
    wrappers = _under(str(getattr(found, "__module__", "")), RLZOO_WRAPPERS)
    return inspect.isclass(found) and issubclass(found, kinds + (RLZOO_KINDS if wrappers else ()))


def _allowed_object(target: str, run_root: Path | None) -> bool:
    if not _under(target, ALLOWED_ROOTS):
        return False  # never imported: only names inside the allowed packages are looked up
    return _located_kind(target, ALLOWED_KINDS, run_root)


def _targets(node: Any, path: str = "") -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """Every ``_target_`` in a plain container: (dotted key, target, the mapping holding it)."""
    if isinstance(node, dict):
        if "_target_" in node:
            yield path or "<root>", node["_target_"], node
        for key, value in node.items():
            yield from _targets(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _targets(value, f"{path}[{index}]")


def user_algorithms() -> tuple[str, ...]:
    """The ``_target_`` of every option of the ``algo`` group in the user config folder (the loading user's own
    algorithms, registered as for training: ``algo=<name>``)."""
    found = []
    for path in sorted((user_config_dir() / "algo").glob("*.yaml")):
        try:
            option = OmegaConf.load(path)
        except Exception:  # a file that is not YAML: registers nothing
            continue
        target = option.get("_target_") if isinstance(option, DictConfig) else None
        if isinstance(target, str):
            found.append(target)
    return tuple(found)


def check_targets(config: DictConfig, source: Path, allow: Sequence[str] = ()) -> None:
    """Refuse a shared config that names code, in one line naming the key: an interpolation (so the tree checked is
    the tree built), a ``_target_`` outside the allowlist (every node and list item), a module to import outside the
    allowlist or from the run dir (``env.id``), an encoder folder with links leading out of it. Nothing is imported
    outside the allowed packages and nothing is built.

    :param source: the run's ``config.yaml`` (its folder is the run dir).
    """
    refuse_interpolations(config, source)
    check_links(source.parent)
    plain = OmegaConf.to_container(config, resolve=True)  # no interpolation: the values as read, and as built
    assert isinstance(plain, dict)
    allow = (*allow, *user_algorithms())
    for key, target, node in _targets(plain):
        if not isinstance(target, str) or not allowed_target(target, node, allow, source.parent):
            shown = f"{target} (path: {node.get('path')})" if target == GET_CLASS else target
            raise Refused(
                f"{source}: {key}._target_={shown!r} is outside the allowlist (the algorithm, policy, network, "
                f"schedule and noise classes of SB3, sb3-contrib, SBX and rlzoo); {TRUST_HINT}, or allow your own "
                "module with allow=[<module>]"
            )
    _check_env_module({str(k): v for k, v in plain.items()}, source, allow)
    _check_encoders(plain.get("srl_model"))


def _check_env_module(values: dict[str, Any], source: Path, allow: Sequence[str]) -> None:
    """The module ``env.id`` makes rlzoo import: ``module:EnvId``, or a multi-agent run's PettingZoo module."""
    env = values.get("env")
    env_id = env.get("id") if isinstance(env, dict) else None
    if not isinstance(env_id, str):
        return
    if values.get("multiagent"):
        module = env_id
    elif ":" in env_id:
        module = env_id.partition(":")[0]
    else:
        return
    check_import(module, ENV_MODULES, f"{source}: env.id={env_id!r}", source.parent, allow)


def _check_encoders(node: Any) -> None:
    """Every encoder folder the representation names (``checkpoint`` keys) holds no link leading out of it."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "checkpoint" and isinstance(value, str) and Path(value).is_dir():
                check_links(Path(value))
            else:
                _check_encoders(value)


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def weights_error(path: Path, name: str, error: BaseException, hint: bool = True) -> ConfigError:
    """One line for weights that do not load: a pickled object (refused by ``torch.load(weights_only=True)``) is
    named in a few words (``hint``: with how to load it trusted), other errors by their first line."""
    if isinstance(error, pickle.UnpicklingError) or "Weights only load failed" in str(error):
        trust = f"; {TRUST_HINT}" if hint else ""
        return Refused(
            f"{path} cannot be loaded as {name}: its weights hold a pickled object, not plain tensors{trust}"
        )
    return ConfigError(f"{path} cannot be loaded as {name}: {first_line(error)}")


def saved_data(path: Path, what: str = "an SB3 model") -> dict[str, Any]:
    """The ``data`` JSON of an SB3 ``model.zip``, as plain JSON (``:serialized:`` entries stay base64 text).

    :raise ConfigError: not a zip (truncated, foreign) or no ``data`` entry.
    """
    try:
        with open_regular(path.parent, path.name, memory_budget()) as stream, zipfile.ZipFile(stream) as archive:
            check_zip(archive, path)
            check_zip_member(archive.getinfo("data"), path, JSON_CAP)
            data = parse_json(archive.read("data"), f"{path}: data")
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as error:
        raise ConfigError(f"{path} cannot be loaded as {what}: {first_line(error)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} cannot be loaded as {what}: its data entry is not a mapping")
    return data


def describe_saved_space(entry: Any) -> str:
    """``Box((4,))``, ``Discrete(2)`` ...: a space stored in ``data`` described from its plain JSON fields alone."""
    if not isinstance(entry, dict):
        return "unknown"
    name = str(entry.get(":type:", "")).rstrip("'>").rsplit(".", 1)[-1]
    if "n" in entry:
        return f"{name}({entry['n']})"
    shape = str(entry.get("_shape", "")).strip("[]() ")
    dims = tuple(int(d) for d in shape.replace(",", " ").split()) if shape else ()
    return f"{name}({dims})"


def restore_weights(model: BaseAlgorithm, path: Path) -> None:
    """Put the weights of ``path`` (an SB3 ``model.zip``) into ``model``, which was built from the run's config,
    without unpickling anything (see the module docstring).

    :raise ConfigError: a truncated or foreign file, weights ``weights_only`` refuses, weights that do not fit.
    """
    name = type(model).__name__
    data = saved_data(path, name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SB3's notes on an old or odd zip: the one line below says what failed
            if is_jax_model(model):
                _restore_jax(model, path)
            else:
                _restore_torch(model, path)
    except ConfigError:
        raise
    except Exception as error:  # torch's refusal of a pickled object, shapes that differ ...
        raise weights_error(path, name, error) from None
    for key in PLAIN_KEYS:
        value = data.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and hasattr(model, key):
            setattr(model, key, value)


def _restore_torch(model: BaseAlgorithm, path: Path) -> None:
    from stable_baselines3.common.save_util import load_from_zip_file

    _, params, variables = load_from_zip_file(path, device=model.device, load_data=False)
    model.set_parameters(params, exact_match=True, device=model.device)
    names = set(model._get_torch_save_params()[1])  # the rebuilt model's own variables: nothing else is set
    for key, value in (variables or {}).items():
        if key in names and isinstance(value, torch.Tensor):
            _attribute(model, key).data = value.data
    if getattr(model, "use_sde", False):
        model.policy.reset_noise()  # type: ignore[operator]


def _attribute(model: BaseAlgorithm, dotted: str) -> Any:
    found: Any = model
    for part in dotted.split("."):
        found = getattr(found, part)
    return found


def _restore_jax(model: BaseAlgorithm, path: Path) -> None:
    weights = path.parent / JAX_WEIGHTS
    if not weights.is_file():
        raise Refused(
            f"{path} is an SBX model saved without {JAX_WEIGHTS} (a run from an older rlzoo): its weights are in a "
            f"pickle; {TRUST_HINT}"
        )
    load_jax_weights(weights, model)


def load_untrusted(
    factory: AlgorithmFactory, policy: str | type, path: Path, env: VecEnv, **run_kwargs: Any
) -> BaseAlgorithm:
    """The model of a checked plan rebuilt on ``env`` (its spaces: the run's env as built again) with the weights of
    ``path``; nothing in the file is unpickled.

    :param run_kwargs: ``device``, ``verbose``, ``seed`` ..., as for the factory.
    """
    saved_data(path, factory.name)  # a truncated zip fails before the model is built
    with warnings.catch_warnings():  # PPO's rollout-buffer advice: this model acts, it never collects a rollout
        warnings.filterwarnings("ignore", message="You have specified a mini-batch size", category=UserWarning)
        model = factory(policy=policy, env=env, **run_kwargs)
    restore_weights(model, path)
    return model
