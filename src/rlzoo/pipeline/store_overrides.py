"""A received store's ``store.yaml`` ``overrides`` (``python -m rlzoo.records action=rerun``): checked as values before
they reach the rerun's sweep, since a store may come from anyone."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType
from omegaconf import DictConfig, OmegaConf

from rlzoo.errors import ConfigError
from rlzoo.pipeline.spec import compose_pipeline
from rlzoo.reporting.store_table import StoreInfo

RUN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_/-]*")
HYDRA_KEYS = frozenset({"_target_", "_partial_", "_args_", "_recursive_", "_convert_"})
# Run keys that are the caller's word (their command line), never a store's: trust, the memory budget, other runs.
CALLER_KEYS = frozenset({"trusted", "memory_budget_gb", "resume", "init_from", "run_dir"})
# The pipeline's step settings: keys of another entrypoint (collect, srl.train, an srl_model option) at any depth,
# which the experiment leaves unset (pipeline_spec checks that they apply).
STEP_NODES = ("pipeline.collect", "pipeline.srl_train", "pipeline.srl_model")
_ABSENT = object()  # no value at a key


def store_overrides(info: StoreInfo, source: Path) -> list[str]:
    """The overrides of a store's ``store.yaml`` (a store may come from anyone), each checked as ``key=value``: a
    key the experiment's pipeline config has, a keyword inside a node it has (``algo.policy_kwargs.net_arch``) or a
    step setting below one of :data:`STEP_NODES` (not ``hydra``, no Hydra key such as ``_target_``, none of
    :data:`CALLER_KEYS`; no ``+``, ``++`` or ``~`` prefix, no ``@package``: what is added is rlzoo's decision), set to
    one plain value (a config group: an option's name; no sweep, no interpolation, no ``_target_`` or other Hydra key
    in it). Returned as the rerun composes them: a key the experiment lacks with rlzoo's own ``+``.

    :raise ConfigError: one line naming the override and what a store's overrides take.
    """
    if not NAME.fullmatch(info.experiment):
        raise ConfigError(f"{source}: experiment={info.experiment!r} is not an experiment's name")
    config = compose_pipeline([f"experiment={info.experiment}"])
    for override in info.overrides:
        problem = _override_problem(override, config)
        if problem:
            raise ConfigError(
                f"{source}: overrides entry {override!r} {problem}; a store's overrides set run keys of experiment "
                f"{info.experiment} to plain values (key=value)"
            )
    return [o if _has_key(config, o.split("=", 1)[0]) else f"+{o}" for o in info.overrides]


def _override_problem(override: str, config: DictConfig) -> str:
    """What is wrong with one store override (empty: nothing)."""
    try:
        parsed = OverridesParser.create().parse_override(override)
    except Exception:  # Hydra's grammar errors
        return "is not key=value"
    key = parsed.key_or_group
    if parsed.type is not OverrideType.CHANGE or parsed.package is not None:
        return "adds, deletes or moves a key or a config (a +, ++ or ~ prefix, @package)"
    parts = key.split(".")
    inside = "." in key and isinstance(_node(config, key.rsplit(".", 1)[0]), dict)  # a keyword of a node it has
    known = _has_key(config, key) or inside or any(key.startswith(f"{node}.") for node in STEP_NODES)
    if not RUN_KEY.fullmatch(key) or parts[0] == "hydra" or HYDRA_KEYS & set(parts) or not known:
        return f"names {key!r}, not a run key of the experiment"
    if key in CALLER_KEYS:
        return f"sets {key}, which only your command line sets"
    if parsed.is_sweep_override():
        return "is a sweep, not one value"
    value = parsed.value()
    if "." not in key and isinstance(config.get(key), DictConfig) and not _option_name(value):  # a config group
        return f"chooses {value!r}, not an option's name"
    return "" if _plain(value) else "holds an interpolation or an object (_target_ ...), not a plain value"


def _option_name(value: Any) -> bool:
    return isinstance(value, str) and bool(NAME.fullmatch(value)) and ".." not in value.split("/")


def _has_key(config: DictConfig, key: str) -> bool:
    """Whether the composed config has ``key`` (nothing resolved)."""
    return _node(config, key) is not _ABSENT


def _node(config: DictConfig, key: str) -> Any:
    """The value at ``key`` in the composed config, unresolved (:data:`_ABSENT`: none)."""
    node: Any = OmegaConf.to_container(config, resolve=False)
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def _plain(value: Any) -> bool:
    if isinstance(value, dict):
        return not HYDRA_KEYS & set(value) and all(_plain(v) for v in value.values())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return not (isinstance(value, str) and "${" in value)
