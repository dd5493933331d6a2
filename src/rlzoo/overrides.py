"""Command-line overrides Hydra would refuse in many lines, refused in one before Hydra starts: a sweep without
``-m`` (``seed=1,2``, ``seed=range(3)``) and a key the config does not have, given without ``+`` (``algo.gama=0.9``:
"did you mean algo.gamma").

A key is looked up in the YAML files of the entry config and of the chosen group options first (cheap); only a key
not found there is checked by composing the config, so that a command without a slip pays nothing more.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlzoo.config import CONFIG_DIR, entry_groups, user_config_dir
from rlzoo.errors import ConfigError

MULTIRUN_FLAGS = ("-m", "--multirun", "hydra.mode=MULTIRUN")
VALUE_FLAGS = ("-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir", "--experimental-rerun", "-c",
               "--cfg", "-p", "--package")  # fmt: skip
NO_CHECK_FLAGS = ("-h", "--help", "--hydra-help", "--info", "-i", "--shell-completion", "-sc")
NOT_OVERRIDDEN = re.compile(r"Could not override '([^']+)'")


def hydra_overrides(arguments: Sequence[str]) -> list[str] | None:
    """The overrides of a command line (``sys.argv[1:]``) without Hydra's flags; None when it asks for help."""
    overrides, skip = [], False
    for argument in arguments:
        if argument in NO_CHECK_FLAGS:
            return None
        if skip or argument.startswith("-"):
            skip = argument in VALUE_FLAGS
            continue
        overrides.append(argument)
    return overrides


def check_overrides(config_name: str, arguments: Sequence[str], sweeps_in: str | None = None) -> None:
    """Refuse a sweep without ``-m`` and a key without ``+`` that ``config_name``'s config does not have.

    :param arguments: the command line after the command (``sys.argv[1:]``).
    :param sweeps_in: the config node where the entrypoint takes its sweep axes as lists (the pipeline's
        ``pipeline.sweep``), which the message names instead of ``-m``; None: a sweep runs with ``-m``.
    :raise ConfigError: one line naming the override and what to do (``add -m``, ``did you mean ...``).
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = hydra_overrides(arguments)
    if not overrides:
        return
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # a syntax error: Hydra's own message says where
        return
    if not any(flag in arguments for flag in MULTIRUN_FLAGS):
        _refuse_sweeps(parsed, config_name, sweeps_in)
    groups = entry_groups(config_name)
    singles = {_one_value(o): str(o.input_line) for o in parsed if not o.key_or_group.startswith("hydra")}
    chosen = {o.key_or_group: o.value() for o in parsed if o.key_or_group in groups and not o.is_sweep_override()}
    suspects = [o.key_or_group for o in parsed if _suspect(o, config_name, groups, chosen)]
    if suspects:
        _compose_or_explain(config_name, singles)


def _refuse_sweeps(parsed: list[Any], config_name: str, sweeps_in: str | None) -> None:
    """A sweep in a command without ``-m``: one line saying how this entrypoint runs one."""
    sweep = next((o for o in parsed if o.is_sweep_override()), None)
    if sweep is None:
        return
    line = f"{sweep.input_line} is a sweep (one job per value)"
    if sweeps_in is None:
        raise ConfigError(f"{line}: add -m / --multirun to run it, or give one value")
    key = str(sweep.key_or_group).lstrip("+~")
    axis = key if key.startswith(f"{sweeps_in}.") else f"{sweeps_in}.{key}"
    plus = "" if any(_has_key(path, axis) for path in _entry_yamls(config_name)) else "+"
    values = _values(sweep)
    listed = f"{plus}{axis}=[{','.join(values)}]" if values else f"{plus}{axis}=[...]"
    raise ConfigError(f"{line}: this command runs its sweep from {sweeps_in}: write {listed}, or give one value")


def _values(override: Any) -> list[str]:
    """The values of a sweep override (none for one that cannot be listed: ``interval(0,1)``)."""
    try:
        return [str(value) for value in override.sweep_string_iterator()]
    except Exception:  # an interval, or a glob (which needs Hydra's config loader)
        return []


def _one_value(override: Any) -> str:
    """A sweep override as its first value (enough to check the key): an interval's start."""
    if not override.is_sweep_override():
        return str(override.input_line)
    start = getattr(override.value(), "start", None)
    first = next(iter(_values(override)), "null" if start is None else str(start))
    return f"{override.get_key_element()}={first}"


def _suspect(override: Any, config_name: str, groups: dict[str, Any], chosen: dict[str, Any]) -> bool:
    """Whether a plain key override (no ``+``, ``~``, ``++``) names a key not found in the YAML files it would
    override (a key a defaults list or a tuned pair adds is found by composing)."""
    key = str(override.key_or_group)
    if override.is_add() or override.is_delete() or override.is_force_add() or key.startswith("hydra"):
        return False
    if key in groups or "@" in key:
        return False
    if any(_has_key(path, key) for path in _entry_yamls(config_name)):  # the pipeline's own pipeline.dir
        return False
    head, _, rest = key.partition(".")
    option = chosen.get(head, groups.get(head))
    in_option = head in groups and bool(rest) and isinstance(option, str) and _has_key(_option_yaml(head, option), rest)
    return not in_option


def _entry_yamls(config_name: str) -> list[Path]:
    """The entry config's YAML file and those of the entry configs its defaults list names (tune's ``train``)."""
    paths = [CONFIG_DIR / f"{config_name}.yaml"]
    loaded = OmegaConf.load(paths[0])
    for entry in loaded.get("defaults", []) if isinstance(loaded, DictConfig) else []:
        if isinstance(entry, str) and (CONFIG_DIR / f"{entry}.yaml").is_file():
            paths.extend(_entry_yamls(entry))
    return paths


def _option_yaml(group: str, option: str) -> Path:
    for folder in (CONFIG_DIR, user_config_dir()):
        if (folder / group / f"{option}.yaml").is_file():
            return folder / group / f"{option}.yaml"
    return CONFIG_DIR / group / f"{option}.yaml"


def _has_key(path: Path, dotted: str) -> bool:
    try:
        node: Any = OmegaConf.load(path)
    except Exception:  # unreadable: composing decides
        return False
    for part in dotted.split("."):
        if not isinstance(node, DictConfig) or part not in node:
            return False
        node = node._get_node(part)
    return True


def _compose(config_name: str, overrides: list[str]) -> DictConfig:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            return compose(config_name=config_name, overrides=overrides)
    finally:
        GlobalHydra.instance().clear()


def _compose_or_explain(config_name: str, given: dict[str, str]) -> None:
    """Compose the config with ``given`` (one value of each override → the override as typed); an override of a
    missing key becomes one line with the keys it may have meant."""
    from hydra.errors import ConfigCompositionException

    overrides = list(given)
    try:
        _compose(config_name, overrides)
        return
    except ConfigCompositionException as error:
        found = NOT_OVERRIDDEN.match(str(error))
    except Exception:  # anything else: Hydra's own message
        return
    if found is None:
        return
    key = found.group(1)
    line = next((typed for o, typed in given.items() if o.split("=", 1)[0] == key), key)
    others = [o for o in overrides if o.split("=", 1)[0] != key]
    raise ConfigError(_missing_key_line(key, line, _siblings(config_name, others, key)))


def _siblings(config_name: str, overrides: list[str], key: str) -> list[str]:
    """The keys beside ``key`` in the composed config (empty when it does not compose)."""
    try:
        node: Any = _compose(config_name, overrides)
    except Exception:
        return []
    for part in key.split(".")[:-1]:
        node = node.get(part) if isinstance(node, DictConfig) else None
    return [str(k) for k in node] if isinstance(node, DictConfig) else []


def _missing_key_line(key: str, line: str, siblings: list[str]) -> str:
    parent, _, name = key.rpartition(".")
    prefix = f"{parent}." if parent else ""
    close = [prefix + match for match in difflib.get_close_matches(name, siblings, n=3)]
    where = f"{parent} has no key {name}" if parent else f"the config has no key {name}"
    meant = f"; did you mean {', '.join(close)}?" if close else ""
    return f"{line}: {where}{meant} (to add a key, write +{line})"
