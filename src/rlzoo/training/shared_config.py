"""A shared run's ``config.yaml`` parsed into a closed, typed description, and the config rebuilt from it.

A run dir read without ``trusted=true`` is data: :func:`shared_config` parses its config into :class:`SharedConfig`
and hands back the config rlzoo writes from that description, which is what plan and build then read. What the
description holds:

- the algorithm, by its registry entry: the ``_target_`` of an ``algo`` option of rlzoo's ``conf/``, of the loading
  user's own config folder (:func:`rlzoo.training.safe_load.user_algorithms`) or a class of a module the user named
  (``allow``), at ``algo`` only;
- typed nodes at their own places, each one entry of a closed table with keywords of known types (:data:`PLACES`):
  schedules at an ``algo`` keyword, action noise at ``algo.action_noise``, activation, feature-extractor and optimiser
  classes in ``algo.policy_kwargs``, rlzoo's representation wrappers and SRL losses in ``srl_model``;
- plain data everywhere else: numbers, strings, booleans, nulls, lists and mappings without Hydra's keys
  (``_target_``, ``_partial_``, ``_args_`` ...).

Every ``_target_`` of the rebuilt config is a constant of the tables below (or of rlzoo's algorithm registry), never
the file's text; a node anywhere else, or an entry or keyword outside its table, is one
:class:`~rlzoo.errors.Refused` line naming the key and what it takes. No string of the file is imported, but
``env.id``'s module (:func:`rlzoo.training.safe_load.check_env_module`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlzoo.algos.factory import RUN_LEVEL_KEYWORDS
from rlzoo.config import CONFIG_DIR
from rlzoo.errors import ConfigError, Refused
from rlzoo.schema import check_value, describe_type
from rlzoo.training.safe_load import check_encoders, check_env_module, user_algorithms, user_class
from rlzoo.untrusted import TRUST_HINT, check_links, refuse_interpolations

HYDRA_KEYS = frozenset({"_target_", "_partial_", "_args_", "_recursive_", "_convert_"})
GET_CLASS = "hydra.utils.get_class"
Number = int | float
Numbers = int | float | list[int | float]


@dataclass(frozen=True)
class Table:
    """What a place takes: its entries (short name → the path rlzoo writes) and each entry's keywords (name → type).

    :param partial: how the node is built: ``True`` (a ``_partial_`` the run completes), ``False`` (an object), or
        None (a class through ``hydra.utils.get_class``, no keywords).
    :param plain_keywords: any keyword of plain data (SRL losses, which only ``rlzoo.srl.train`` builds).
    """

    what: str
    entries: Mapping[str, str]
    keywords: Mapping[str, Mapping[str, Any]]
    partial: bool | None = False
    plain_keywords: bool = False

    def names(self) -> str:
        return ", ".join(self.entries)


_UTILS = "stable_baselines3.common.utils"
SCHEDULES = Table(
    "a schedule",
    {
        name: f"stable_baselines3.common.utils.{name}"
        for name in ("LinearSchedule", "ConstantSchedule", "FloatSchedule")
    },
    {
        "LinearSchedule": {"start": Number, "end": Number, "end_fraction": Number},
        "ConstantSchedule": {"val": Number},
        "FloatSchedule": {"value_schedule": Number},
    },
)
NOISES = Table(
    "action noise",
    {name: f"stable_baselines3.common.noise.{name}" for name in ("NormalActionNoise", "OrnsteinUhlenbeckActionNoise")},
    {
        "NormalActionNoise": {"mean": Numbers, "sigma": Numbers},
        "OrnsteinUhlenbeckActionNoise": {
            "mean": Numbers,
            "sigma": Numbers,
            "theta": Number,
            "dt": Number,
            "initial_noise": Numbers | None,
        },
    },
)
ACTIVATIONS = Table(
    "an activation class",
    {
        name: f"torch.nn.{name}"
        for name in ("ReLU", "Tanh", "ELU", "LeakyReLU", "SiLU", "GELU", "Sigmoid", "Softplus", "Mish", "Identity")
    },
    {},
    partial=None,
)
_LAYERS = "stable_baselines3.common.torch_layers"
EXTRACTORS = Table(
    "a feature-extractor class",
    {name: f"{_LAYERS}.{name}" for name in ("FlattenExtractor", "NatureCNN", "CombinedExtractor")},
    {},
    partial=None,
)
OPTIMIZERS = Table(
    "an optimiser class", {name: f"torch.optim.{name}" for name in ("Adam", "AdamW", "RMSprop", "SGD")}, {}, None
)
OBSERVATION_WRAPPERS = Table(
    "an observation wrapper",
    {"rendered_pixels": "rlzoo.srl.pixels.rendered_pixels"},
    {"rendered_pixels": {"height": int, "width": int}},
    partial=True,
)
VEC_WRAPPERS = Table(
    "a vec-env wrapper",
    {
        "VecFrameStack": "stable_baselines3.common.vec_env.VecFrameStack",
        "EncodeObservations": "rlzoo.srl.wrapper.EncodeObservations",
    },
    {
        "VecFrameStack": {"n_stack": int, "channels_order": str | None},
        "EncodeObservations": {"checkpoint": str, "method": str, "device": str, "precision": str},
    },
    partial=True,
)
_LOSSES = ("Reconstruction", "Denoising", "VariationalReconstruction", "InverseDynamics", "ForwardDynamics",
           "RewardPrediction", "RoboticPriors", "GroundTruthRegression")  # fmt: skip
LOSSES = Table(
    "an SRL loss", {name: f"rlzoo.srl.losses.{name}" for name in _LOSSES}, {}, partial=True, plain_keywords=True
)


# Where a typed node may sit (``*``: any key there), and what it takes; every other value is plain data.
PLACES: dict[tuple[str, ...], Table] = {
    ("algo", "action_noise"): NOISES,
    ("algo", "*"): SCHEDULES,
    ("algo", "policy_kwargs", "activation_fn"): ACTIVATIONS,
    ("algo", "policy_kwargs", "features_extractor_class"): EXTRACTORS,
    ("algo", "policy_kwargs", "optimizer_class"): OPTIMIZERS,
    ("srl_model", "observation_wrapper"): OBSERVATION_WRAPPERS,
    ("srl_model", "vec_wrapper"): VEC_WRAPPERS,
    ("srl_model", "losses", "*"): LOSSES,
}


def _place_of(key: tuple[str, ...]) -> Table | None:
    """The table of the typed node a key may hold (None: plain data only)."""
    return PLACES.get(key) or PLACES.get((*key[:-1], "*"))


@dataclass(frozen=True)
class Built:
    """One typed node: an entry of ``table`` and its checked keywords; :meth:`node` is what rlzoo writes for it."""

    table: Table
    name: str
    keywords: dict[str, Any]

    def node(self) -> dict[str, Any]:
        path = self.table.entries[self.name]  # rlzoo's constant, never the file's text
        if self.table.partial is None:
            return {"_target_": GET_CLASS, "path": path}
        partial = {"_partial_": True} if self.table.partial else {}
        return {"_target_": path, **partial, **self.keywords}


@dataclass(frozen=True)
class SharedConfig:
    """A shared config as rlzoo takes it: the algorithm's registry path, and the values with typed nodes in place."""

    algorithm: str
    values: dict[str, Any]

    def config(self) -> DictConfig:
        """The config rlzoo builds from (each typed node written by :meth:`Built.node`)."""
        values = _written(self.values)
        values["algo"] = {"_target_": self.algorithm, "_partial_": True, **values["algo"]}
        return OmegaConf.create(values)


def _written(node: Any) -> Any:
    if isinstance(node, Built):
        return node.node()
    if isinstance(node, dict):
        return {key: _written(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_written(value) for value in node]
    return node


class _Parser:
    """Walks a plain config, keeping plain data and turning each typed node into a :class:`Built`."""

    def __init__(self, source: Path) -> None:
        self.source = source

    def refuse(self, key: Sequence[str], message: str) -> Refused:
        return Refused(f"{self.source}: {'.'.join(key)}{message}; {TRUST_HINT}")

    def value(self, key: tuple[str, ...], node: Any) -> Any:
        if isinstance(node, dict) and HYDRA_KEYS & set(node):
            return self.typed(key, node)
        if isinstance(node, dict):
            return {str(k): self.value((*key, str(k)), v) for k, v in node.items()}
        if isinstance(node, list):
            return [self.plain((*key[:-1], f"{key[-1]}[{i}]"), v) for i, v in enumerate(node)]
        return node

    def plain(self, key: tuple[str, ...], node: Any) -> Any:
        """Plain data: no Hydra key at any depth."""
        if isinstance(node, dict):
            if found := sorted(HYDRA_KEYS & set(node), key=lambda k: k != "_target_"):
                shown = f".{found[0]}={node[found[0]]!r}"
                raise self.refuse(key, f"{shown} is outside the allowlist: this value takes plain data, not an object")
            return {str(k): self.plain((*key, str(k)), v) for k, v in node.items()}
        if isinstance(node, list):
            return [self.plain((*key[:-1], f"{key[-1]}[{i}]"), v) for i, v in enumerate(node)]
        return node

    def typed(self, key: tuple[str, ...], node: dict[str, Any]) -> Built:
        table = _place_of(key)
        if table is None:
            shown = f"._target_={node.get('_target_')!r} is outside the allowlist"
            raise self.refuse(key, f"{shown}: a shared config builds objects only at {_places()}")
        name = self._entry(key, node, table)
        keywords = {
            k: v for k, v in node.items() if k not in HYDRA_KEYS and not (table.partial is None and k == "path")
        }
        expected = table.keywords.get(name, {})
        checked = {}
        for word, value in keywords.items():
            if table.plain_keywords:
                checked[word] = self.plain((*key, word), value)
            elif word not in expected:
                allowed = ", ".join(expected) or "none"
                raise self.refuse(key, f".{word} is not a keyword of {name} here; allowed: {allowed}")
            else:
                checked[word] = self._typed_value((*key, word), value, expected[word])
        return Built(table, name, checked)

    def _entry(self, key: tuple[str, ...], node: dict[str, Any], table: Table) -> str:
        """The table entry a node names, with its Hydra keys as the table builds it."""
        target, path = node.get("_target_"), node.get("path")
        named = path if table.partial is None and target == GET_CLASS else target
        names = {value: name for name, value in table.entries.items()}
        if not isinstance(named, str) or named not in names:
            field = "path" if table.partial is None and target == GET_CLASS else "_target_"
            shown = f".{field}={named!r} is outside the allowlist"
            raise self.refuse(key, f"{shown}: not {table.what} of rlzoo's list ({table.names()})")
        written = {"_target_", "_partial_"} if table.partial else {"_target_"}
        partial = node.get("_partial_", False)
        if HYDRA_KEYS & set(node) - written or partial is not bool(table.partial):
            shown = " and _partial_: true" if table.partial else ""
            raise self.refuse(key, f" takes {table.what} written as rlzoo writes it: _target_{shown}, no other _key_")
        return names[named]

    def _typed_value(self, key: tuple[str, ...], value: Any, hint: Any) -> Any:
        try:
            check_value(".".join(key), value, hint)
        except ConfigError:
            raise self.refuse(key, f"={value!r} must be {describe_type(hint)}") from None
        return value  # as written: the rebuilt config equals the file's


def _places() -> str:
    return ", ".join(f"{'.'.join(place)} ({table.what})" for place, table in PLACES.items())


def parse_shared(plain: dict[str, Any], source: Path, allow: Sequence[str] = ()) -> SharedConfig:
    """The typed description of a shared config's plain values (see the module docstring).

    :param source: the run's ``config.yaml``, for messages.
    :param allow: modules whose algorithm classes the loading user trusts.
    """
    parser = _Parser(source)
    algo = plain.get("algo")
    if not isinstance(algo, dict):
        raise parser.refuse(("algo",), " is missing; a run's config names its algorithm")
    algorithm = _algorithm(parser, algo.get("_target_"), allow, source.parent)
    if algo.get("_partial_", True) is not True or HYDRA_KEYS & set(algo) - {"_target_", "_partial_"}:
        raise parser.refuse(("algo",), " is an algorithm written as rlzoo writes it (_target_ and _partial_: true)")
    if found := sorted(HYDRA_KEYS & set(plain)):
        raise parser.refuse((found[0],), " is refused at the root: a run's config is a mapping of run keys")
    values: dict[str, Any] = {}
    for name, node in plain.items():
        if name == "algo":
            values[name] = {k: _algo_keyword(parser, k, v) for k, v in node.items() if k not in HYDRA_KEYS}
        else:  # srl_model's typed places, or plain data
            values[name] = parser.value((name,), node) if name == "srl_model" else parser.plain((name,), node)
    return SharedConfig(algorithm, values)


def _algo_keyword(parser: _Parser, word: str, value: Any) -> Any:
    key = ("algo", str(word))
    if word in RUN_LEVEL_KEYWORDS:
        raise parser.refuse(key, f" is set by {RUN_LEVEL_KEYWORDS[word]}, not by the algo config")
    if word == "policy" and value is not None and not isinstance(value, str):
        raise parser.refuse(key, "=<object> must be a policy name (MlpPolicy ...) in a shared config")
    if word == "policy_kwargs" and isinstance(value, dict):
        if HYDRA_KEYS & set(value):
            raise parser.refuse(key, " holds _target_ ...: it is a mapping of policy keywords, not an object")
        return {str(k): parser.value((*key, str(k)), v) for k, v in value.items()}
    return parser.value(key, value)


@functools.cache
def algorithm_registry() -> Mapping[str, str]:
    """The algorithm paths rlzoo's ``conf/algo`` options name, by path (the value is rlzoo's own string); read once
    (rlzoo's own ``conf/`` is part of the package)."""
    found: dict[str, str] = {}
    for path in sorted((CONFIG_DIR / "algo").glob("*.yaml")):
        option = OmegaConf.load(path)
        target = option.get("_target_") if isinstance(option, DictConfig) else None
        if isinstance(target, str):
            found[target] = target
    return found


def _algorithm(parser: _Parser, target: Any, allow: Sequence[str], run_root: Path) -> str:
    registry = algorithm_registry()
    if isinstance(target, str) and target in registry:
        return registry[target]
    if isinstance(target, str) and user_class(target, allow, run_root):
        return target  # an algorithm class of the loading user's own module
    raise parser.refuse(
        ("algo", "_target_"),
        f"={target!r} is outside the allowlist: not an algorithm of rlzoo's registry (conf/algo, your "
        "rlzoo_conf/algo); allow your own module with allow=[<module>]",
    )


def shared_config(config: DictConfig, source: Path, allow: Sequence[str] = ()) -> DictConfig:
    """The config rlzoo builds a shared run from: ``config`` (its ``config.yaml`` as read) parsed into the typed
    description and written again by rlzoo (an interpolation, a link leading out of the run dir, an object outside its
    place or table, a module ``env.id`` names off the allowlist: one :class:`~rlzoo.errors.Refused` line).

    :param source: the run's ``config.yaml`` (its folder is the run dir).
    :param allow: modules the loading user trusts (their algorithm classes, their env module).
    """
    refuse_interpolations(config, source)
    check_links(source.parent)
    plain = OmegaConf.to_container(config, resolve=False)
    assert isinstance(plain, dict)
    described = parse_shared({str(k): v for k, v in plain.items()}, source, allow)
    check_env_module(described.values, source, (*allow, *user_algorithms()))
    check_encoders(described.values.get("srl_model"))
    return described.config()
