"""Where rlzoo's Hydra configs live, how they are composed outside the CLI, and the one instantiate helper."""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from rlzoo.errors import ConfigError


def _find_config_dir() -> Path:
    """``conf/`` at the repository top (editable install) or inside the package (wheel install)."""
    package_dir = Path(__file__).resolve().parent
    for candidate in (package_dir / "conf", package_dir.parent.parent / "conf"):
        if (candidate / "train.yaml").is_file():
            return candidate
    raise FileNotFoundError(f"rlzoo's conf/ folder was not found near {package_dir}")


CONFIG_DIR = _find_config_dir()
PACKAGE_DIR = Path(__file__).resolve().parent
# The user config folder (on Hydra's search path after CONFIG_DIR, by hydra_plugins/rlzoo_user_config): the user's own
# options of rlzoo's groups, such as the tuned pairs rlzoo.tune exports (algo_env/tuned/<name>.yaml).
USER_CONFIG_ENV = "RLZOO_CONF"
USER_CONFIG_DEFAULT = "rlzoo_conf"


def user_config_dir() -> Path:
    """The user config folder: ``$RLZOO_CONF``, or ``rlzoo_conf/`` in the working directory (beside ``outputs/``)."""
    return Path(os.environ.get(USER_CONFIG_ENV) or USER_CONFIG_DEFAULT).expanduser().resolve()


def inside_package(path: Path) -> bool:
    """Whether ``path`` lies in rlzoo's installed package or its ``conf/`` (where rlzoo never writes)."""
    resolved = path.resolve()
    return any(resolved == root or root in resolved.parents for root in (PACKAGE_DIR, CONFIG_DIR))


def _wandb_group() -> str:
    """``${rlzoo.wandb_group:}``: a sweep's jobs share its sweep dir as group; a single run is grouped by
    ``<algo>_<env>_<srl_model>``."""
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN:
        return str(hydra_cfg.sweep.dir)
    choices = hydra_cfg.runtime.choices
    return f"{choices.get('algo')}_{choices.get('env')}_{choices.get('srl_model')}"


def entry_groups(config_name: str) -> dict[str, Any]:
    """The config groups an entrypoint's config takes, with their defaults (None: none chosen), in its defaults
    list's order; an entry naming another entrypoint's config (tune's ``train``) brings that one's groups."""
    entry_config = OmegaConf.load(CONFIG_DIR / f"{config_name}.yaml")
    defaults = entry_config.get("defaults", []) if isinstance(entry_config, DictConfig) else []
    groups: dict[str, Any] = {}
    for entry in defaults:
        if isinstance(entry, str) and entry != "_self_" and (CONFIG_DIR / f"{entry}.yaml").is_file():
            groups |= entry_groups(entry)
        elif isinstance(entry, DictConfig):
            key, default = next(iter(entry.items_ex(resolve=False)))
            words = str(key).split()
            if words[0] != "override":
                groups[words[-1]] = default
    return groups


def group_options(group: str, folders: Sequence[Path] = ()) -> list[str]:
    """The options of a config group: the YAML files of ``conf/<group>/``, the user config folder's and those of
    ``folders`` (extra search-path folders)."""
    found = {
        path.stem for folder in (CONFIG_DIR, user_config_dir(), *folders) for path in (folder / group).glob("*.yaml")
    }
    return sorted(found)


def _help_groups(config_name: str) -> str:
    """``${rlzoo.help_groups:train}``: the groups an entrypoint's defaults list names, one line each with their options
    (``--help``; Hydra's own list would show every group under ``conf/``, also those only other entrypoints accept)."""
    return "\n".join(f"{group}: {', '.join(group_options(group))}" for group in entry_groups(config_name))


# Env options that take any id (env.id=...): a run is named after the id, not after the option.
ANY_ID_ENVS = ("gym", "atari", "pettingzoo")


def _env_name(option: str, env_id: Any = None) -> str:
    """``${rlzoo.env_name:<env option>,<env id>}``: the env part of a run dir's name: the option (``CartPole``), or
    for ``env=gym`` / ``env=atari`` the id as a folder name (``Taxi-v4``, ``ALE-Breakout-v5``)."""
    if option in ANY_ID_ENVS and env_id:
        return str(env_id).replace("/", "-")
    return option


OmegaConf.register_new_resolver("rlzoo.wandb_group", _wandb_group, replace=True)
OmegaConf.register_new_resolver("rlzoo.env_name", _env_name, replace=True)
OmegaConf.register_new_resolver("rlzoo.help_groups", _help_groups, replace=True)


def instantiate(config: Any, **kwargs: Any) -> Any:
    """Build objects from a config node (``_target_`` ...), converting every container to plain Python."""
    if config is None:
        return None
    return hydra.utils.instantiate(config, _convert_="all", **kwargs)


OPTIONAL_GROUPS = ("algo_env",)  # ``optional`` in the defaults: Hydra skips a missing option without a word


def check_chosen_options(hydra_cfg: Any) -> None:
    """An option of an optional group named on the command line (``algo_env=tuned/<name>``) must exist in a config
    folder of the search path; Hydra itself would go on without it.

    :param hydra_cfg: the ``hydra`` node (``HydraConfig.get()``, or a composed config's ``hydra``).
    :raise ConfigError: naming the option and the folders searched.
    """
    folders = [Path(s.path) for s in hydra_cfg.runtime.config_sources if s.schema == "file"]
    for override in hydra_cfg.overrides.task:
        key, _, value = str(override).partition("=")
        group = key.lstrip("+~")
        if group not in OPTIONAL_GROUPS or not value or value == "null":
            continue
        if not any((folder / group / f"{value}.yaml").is_file() for folder in folders):
            raise ConfigError(
                f"{group}={value}: no {group}/{value}.yaml in the config folders searched "
                f"({', '.join(map(str, folders))}); rlzoo.tune exports a study's best pair to the user config folder "
                f"({USER_CONFIG_DEFAULT}/ in the working directory, or ${USER_CONFIG_ENV})"
            )


# What a user may have meant by an option that does not exist (group, option) → a hint.
OPTION_HINTS = {
    ("logger", "tensorboard"): "TensorBoard events are written with every logger option (logger=default: CSV and "
    "TensorBoard)",
}
SWEEP_SYNTAX = set("()[]{}*$ '\"")  # choice(...), glob(*), interpolations: left to Hydra


def check_group_choices(config_name: str, arguments: Sequence[str]) -> None:
    """The group options a command line chooses (``algo=ppo``, a sweep's ``env=CartPole,Pendulum``) exist, before
    Hydra composes the config (whose own messages run over many lines, or end in a traceback for ``group=null``).

    :param arguments: the command line after the command (``sys.argv[1:]``).
    :raise ConfigError: naming the option, the options there are and, for a known slip, what was meant.
    """
    groups = entry_groups(config_name)
    folders = _search_path_folders(arguments)
    if folders is None:  # a search path this check cannot read: Hydra checks
        return
    for argument in arguments:
        key, equals, value = argument.partition("=")
        group = key.lstrip("+~").split("@")[0]
        if argument.startswith("-") or not equals or group not in groups or group in OPTIONAL_GROUPS:
            continue
        if SWEEP_SYNTAX & set(value):
            continue
        for option in value.split(","):
            _check_option(group, option, groups[group] is None, folders)


def _check_option(group: str, option: str, optional: bool, folders: list[Path]) -> None:
    options = group_options(group, folders)
    if option in options:
        return
    listed = ", ".join(options)
    if option in ("null", ""):
        left_out = f"leave {group} out (none by default) or choose" if optional else "choose"
        raise ConfigError(f"{group}={option}: a config group takes one of its options: {left_out} one of {listed}")
    hint = OPTION_HINTS.get((group, option))
    lowered = {o.lower(): o for o in options}
    matches = [option.lower()] if option.lower() in lowered else difflib.get_close_matches(option.lower(), lowered)
    close = [lowered[o] for o in matches]
    suggestion = f"; {hint}" if hint else f"; did you mean {', '.join(close)}?" if close else ""
    raise ConfigError(f"{group}={option} is not an option of {group} (options: {listed}){suggestion}")


def _search_path_folders(arguments: Sequence[str]) -> list[Path] | None:
    """The folders a ``hydra.searchpath=[file://...]`` argument adds (None: one that is not a folder)."""
    folders: list[Path] = []
    for argument in arguments:
        key, _, value = argument.partition("=")
        if key.lstrip("+") != "hydra.searchpath":
            continue
        for entry in value.strip("[]").split(","):
            if not entry.strip().startswith("file://"):
                return None
            folders.append(Path(entry.strip().removeprefix("file://")))
    return folders


def compose_config(
    overrides: Sequence[str] = (),
    *,
    run_dir: str | Path | None,
    config_name: str = "train",
    config_dir: Path = CONFIG_DIR,
) -> DictConfig:
    """Compose the same config as ``python -m rlzoo.train <overrides>``, resolved, for a run writing to ``run_dir``.

    :param overrides: Hydra command-line overrides, e.g. ``["algo=dqn", "seed=3"]``.
    :param run_dir: the run directory (Hydra's output dir on the CLI); None for configs without one.
    :return: the resolved config, without the ``hydra`` node.
    """
    if run_dir is not None:  # None: a config without run_dir (enjoy, plot, report ...)
        overrides = [*overrides, f"run_dir={Path(run_dir).resolve()}"]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=list(overrides), return_hydra_config=True)
        previous = HydraConfig.instance().cfg
        HydraConfig.instance().set_config(cfg)  # lets ${hydra:...} interpolations resolve as on the CLI
        try:
            check_chosen_options(cfg.hydra)
            with open_dict(cfg):
                del cfg["hydra"]
            OmegaConf.resolve(cfg)
        finally:
            HydraConfig.instance().cfg = previous
    return cfg


def resolved_values(cfg: DictConfig) -> dict[str, Any]:
    """A resolved plain copy of ``cfg``; an interpolation that does not resolve is one :class:`ConfigError`."""
    try:
        values = OmegaConf.to_container(cfg, resolve=True)
    except Exception as error:  # an interpolation that does not resolve
        raise ConfigError(f"the config does not resolve: {error}") from None
    assert isinstance(values, dict)
    return {str(k): v for k, v in values.items()}
