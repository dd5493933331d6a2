"""Loading a run dir without running its code: what a shared config may import, and the pickle-free model load.

A run dir may come from someone else, so by default nothing in it is code:

- ``config.yaml`` is parsed into a typed description and written again by rlzoo
  (:func:`rlzoo.training.shared_config.shared_config`); this module names what it may import beyond rlzoo's own
  tables: the algorithms the loading user registered in their own config folder (``rlzoo_conf/algo/<name>.yaml`` or
  ``$RLZOO_CONF``: :func:`user_algorithms`) and the classes of modules they name (``allow``: :func:`user_class`); a
  module ``env.id`` names (``module:EnvId``, a multi-agent run's PettingZoo module) must be under :data:`ENV_MODULES`
  or ``allow`` (:func:`check_env_module`); no module is imported from the run dir, the folder holding it or the
  current folder.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from hydra._internal.utils import _locate
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from rlzoo.algos.factory import AlgorithmFactory
from rlzoo.config import user_config_dir
from rlzoo.confined import JSON_CAP, check_zip, check_zip_member, memory_budget, open_regular, parse_json
from rlzoo.errors import ConfigError, Refused
from rlzoo.jax_weights import JAX_WEIGHTS, is_jax_model, load_jax_weights
from rlzoo.untrusted import TRUST_HINT, check_import, check_links, check_origin

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


def user_class(target: str, allow: Sequence[str], run_root: Path | None = None) -> bool:
    """Whether ``target`` is an algorithm class of a module the loading user named in ``allow`` or registered
    (:func:`user_algorithms`); a module the run dir (or the folder above it) holds is never imported
    (:func:`rlzoo.untrusted.check_origin` raises :class:`~rlzoo.errors.Refused`)."""
    if any(part.startswith("_") for part in target.split(".")):
        return False  # no private names, no dunder walks (``PPO.__init__.__globals__``)
    if not (_under(target, allow) or target in user_algorithms()):
        return False
    check_origin(target, f"_target_={target!r}", run_root, current_folder=True)
    try:
        found = _locate(target)
    except Exception:  # not importable: refused like any unknown name
        return False
    return inspect.isclass(found) and issubclass(found, BaseAlgorithm)


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


def check_env_module(values: dict[str, Any], source: Path, allow: Sequence[str]) -> None:
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


def check_encoders(node: Any) -> None:
    """Every encoder folder the representation names (``checkpoint`` keys) holds no link leading out of it."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "checkpoint" and isinstance(value, str) and Path(value).is_dir():
                check_links(Path(value))
            else:
                check_encoders(value)


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
