"""Where rlzoo's Hydra configs live, how they are composed outside the CLI, and the one instantiate helper."""

from __future__ import annotations

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


def _wandb_group() -> str:
    """``${rlzoo.wandb_group:}``: a sweep's jobs share its sweep dir as group; a single run is grouped by
    ``<algo>_<env>_<srl_model>``."""
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN:
        return str(hydra_cfg.sweep.dir)
    choices = hydra_cfg.runtime.choices
    return f"{choices.get('algo')}_{choices.get('env')}_{choices.get('srl_model')}"


def _help_groups(config_name: str) -> str:
    """``${rlzoo.help_groups:train}``: the groups an entrypoint's defaults list names, one line each with their options
    (``--help``; Hydra's own list would show every group under ``conf/``, also those only other entrypoints accept)."""
    entry_config = OmegaConf.load(CONFIG_DIR / f"{config_name}.yaml")
    defaults = entry_config.get("defaults", []) if isinstance(entry_config, DictConfig) else []
    groups = [str(next(iter(entry))).split()[-1] for entry in defaults if isinstance(entry, DictConfig)]
    lines = []
    for group in groups:
        options = sorted(path.stem for path in (CONFIG_DIR / group).glob("*.yaml"))
        lines.append(f"{group}: {', '.join(options)}")
    return "\n".join(lines)


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


def compose_config(
    overrides: Sequence[str] = (),
    *,
    run_dir: str | Path,
    config_name: str = "train",
    config_dir: Path = CONFIG_DIR,
) -> DictConfig:
    """Compose the same config as ``python -m rlzoo.train <overrides>``, resolved, for a run writing to ``run_dir``.

    :param overrides: Hydra command-line overrides, e.g. ``["algo=dqn", "seed=3"]``.
    :param run_dir: the run directory (Hydra's output dir on the CLI).
    :return: the resolved config, without the ``hydra`` node.
    """
    overrides = [*overrides, f"run_dir={Path(run_dir).resolve()}"]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=overrides, return_hydra_config=True)
        previous = HydraConfig.instance().cfg
        HydraConfig.instance().set_config(cfg)  # lets ${hydra:...} interpolations resolve as on the CLI
        try:
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
