"""What one pipeline run is: its experiment, sweep axes, the overrides of every step, and the folder it caches in.

``python -m rlzoo.pipeline experiment=<name> [overrides]`` composes ``conf/pipeline.yaml``: the training config with
the experiment (``conf/experiment/<name>.yaml``: the RL sweep, ``hydra.sweeper.params``) and its pipeline settings
(``conf/pipeline/<name>.yaml``: dataset and encoder steps, in the ``pipeline`` node). :func:`pipeline_spec` turns that
into a checked :class:`PipelineSpec`; every axis value is checked against its config group before anything runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from rlzoo.config import CONFIG_DIR
from rlzoo.confined import YAML_CAP, read_text
from rlzoo.errors import ConfigError
from rlzoo.files import atomic_write_text
from rlzoo.pipeline.slurm import slurm_parameters
from rlzoo.results.verdicts import check_confidence
from rlzoo.untrusted import read_yaml

PIPELINE_CONFIG = "pipeline"
IDENTITY = "experiment.yaml"
# Axes the job names start with, in this order; other axes follow.
NAMED_AXES = ("env", "srl_model", "seed")
# Overrides that do not change results: where and how jobs run, what they log (left out of the cache identity).
NOT_IDENTITY = ("hardware", "logger", "hydra", "verbose", "progress_bar", "memory_budget_gb")
STEP_FREE_KEYS = ("progress_bar", "n_workers", "device", "torch_threads")  # of collect and srl.train, likewise


def content_key(values: Any) -> str:
    """A short stable hash of JSON-able ``values`` (the name of a cached step's folder)."""
    text = json.dumps(values, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def group_options(group: str) -> list[str]:
    """The options of a config group of ``conf/`` (its YAML files)."""
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


@dataclass(frozen=True)
class PipelineSpec:
    """A checked pipeline run.

    :param axes: the sweep's keys and values (``env``, ``srl_model``, ``seed`` first), their product is the jobs.
    :param train: overrides every RL job gets (the command line's, axes and pipeline keys apart).
    :param collect: overrides of ``python -m rlzoo.collect`` for each env's dataset (``pipeline.collect``).
    :param srl_train: overrides of ``python -m rlzoo.srl.train`` for every encoder (``pipeline.srl_train``).
    :param srl_model: per representation, ``srl_model.*`` overrides of its encoder and its RL runs.
    :param typed: the ``pipeline.*`` keys the command line set (the experiment's own are not among them).
    """

    experiment: str
    dir: Path
    axes: dict[str, list[Any]]
    train: list[str]
    collect: list[str]
    srl_train: list[str]
    srl_model: dict[str, list[str]] = field(default_factory=dict)
    report: bool = True
    videos: bool = True
    wandb: dict[str, Any] | None = None
    encoder_workers: int = 1
    runs_beside_encoders: bool = False
    verdict_of: str | None = None
    verdict_ci: float = 0.95
    slurm: dict[str, Any] | None = None  # Submitit's parameters of an encoder job (hardware=slurm_*), else None
    typed: tuple[str, ...] = ()

    @property
    def runs_dir(self) -> Path:
        return self.dir / "runs"

    def experiment_files(self) -> dict[str, str]:
        """The experiment's files (``conf/experiment`` and ``conf/pipeline``) by path, as text."""
        files = [
            CONFIG_DIR / "experiment" / f"{self.experiment}.yaml",
            CONFIG_DIR / "pipeline" / f"{self.experiment}.yaml",
        ]
        return {str(p.relative_to(CONFIG_DIR)): p.read_text() for p in files if p.is_file()}

    def identity(self) -> dict[str, Any]:
        """What makes the pipeline dir this experiment's cache: the experiment's files (their YAML content: a comment
        changes nothing) and every override that changes results (axis values apart: adding seeds or options extends
        the same experiment)."""
        contents = {
            path: {"package": re.findall(r"^# *@package.*$", text, re.MULTILINE), "values": yaml.safe_load(text)}
            for path, text in self.experiment_files().items()
        }
        train = sorted(o for o in self.train if _key(o).split(".")[0].split("/")[0] not in NOT_IDENTITY)
        return {
            "experiment": self.experiment,
            "experiment_files": content_key(contents),
            "train": train,
            "collect": [o for o in self.collect if _key(o) not in STEP_FREE_KEYS],
            "srl_train": [o for o in self.srl_train if _key(o) not in STEP_FREE_KEYS],
            "srl_model": self.srl_model,
        }

    def check_dir(self) -> None:
        """Refuse a pipeline dir that holds another experiment's cache, or other files (nothing is written)."""
        record = self.dir / IDENTITY
        if os.path.lexists(record):  # a received pipeline dir's file: plain YAML, no link, capped
            ours, theirs = self.identity(), OmegaConf.to_container(read_yaml(record), resolve=False)
            assert isinstance(theirs, dict)
            if theirs.get("experiment_files") == content_key(self.experiment_files()):
                ours["experiment_files"] = theirs["experiment_files"]  # an older record: the files' text
            differences = [f"{k}: {theirs.get(k)!r} there, {v!r} now" for k, v in ours.items() if theirs.get(k) != v]
            if differences:
                raise ConfigError(
                    f"pipeline.dir={self.dir} holds the cache of another experiment ({'; '.join(differences)}); "
                    "rlzoo never mixes them: choose another pipeline.dir, or run that experiment as it was"
                )
        elif self.dir.is_dir() and any(self.dir.iterdir()):
            raise ConfigError(
                f"pipeline.dir={self.dir} is not empty and is no pipeline's (no {IDENTITY}): choose a new folder"
            )

    def claim_dir(self) -> None:
        """Make the pipeline dir this experiment's (after :meth:`check_dir`); a record of the files' text (an older
        record's form) is rewritten with their content, so that a comment changed later keeps the cache."""
        self.check_dir()
        record, text = self.dir / IDENTITY, OmegaConf.to_yaml(OmegaConf.create(self.identity()))
        if not record.is_file() or read_text(self.dir, IDENTITY, YAML_CAP) != text:
            self.dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(record, text)


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def compose_pipeline(overrides: Sequence[str]) -> DictConfig:
    """``conf/pipeline.yaml`` composed with ``overrides``, the ``hydra`` node kept (sweeper params, choices)."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose(config_name=PIPELINE_CONFIG, overrides=list(overrides), return_hydra_config=True)
    except Exception as error:  # Hydra's composition errors: an unknown experiment, key or option
        message = " ".join(str(error).split("Config search path")[0].split())
        raise ConfigError(message) from None
    finally:
        GlobalHydra.instance().clear()
    return cfg


def _values(key: str, text: Any) -> list[Any]:
    """The values of a sweep entry (``a,b``, ``range(3)``, a list, a single value)."""
    if isinstance(text, list | tuple):
        return list(text)
    override = OverridesParser.create().parse_override(f"{key}={text}")
    return list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]


def _axes(sweeper: dict[str, Any], pipeline_sweep: dict[str, Any], narrowed: dict[str, Any]) -> dict[str, list[Any]]:
    """Axes from the experiment's sweeper params, replaced by ``pipeline.sweep`` entries, narrowed to one value by a
    plain override of the key on the command line; ``env`` and ``srl_model`` first, then ``seed``, then the rest."""
    chosen = {key: value for key, value in pipeline_sweep.items() if value is not None}
    axes = {key: _values(key, value) for key, value in {**sweeper, **chosen}.items()}
    axes |= {key: [value] for key, value in narrowed.items() if key in axes}
    ordered = {key: axes.pop(key) for key in NAMED_AXES if key in axes}
    return ordered | axes


def _check_axes(axes: dict[str, list[Any]]) -> None:
    for key in ("env", "srl_model", "algo"):
        options = group_options(key)
        unknown = [v for v in axes.get(key, []) if str(v) not in options]
        if unknown:
            raise ConfigError(
                f"the experiment sweeps {key}={','.join(map(str, unknown))}: not an option of conf/{key} "
                f"(options: {', '.join(options)})"
            )
    for key, values in axes.items():
        repeated = sorted({str(v) for v in values if list(map(str, values)).count(str(v)) > 1})
        if repeated:
            raise ConfigError(
                f"the sweep's {key} axis repeats {', '.join(repeated)} ({key}={values}); allowed: distinct values"
            )
    empty = [key for key, values in axes.items() if not values]
    if empty:
        raise ConfigError(
            f"the sweep's {empty[0]} axis is empty ({empty[0]}=[]); allowed: one value or more, "
            f"e.g. pipeline.sweep.{empty[0]}=[0,1,2]"
        )
    if "srl_model" not in axes:
        raise ConfigError(
            f"the experiment's sweep needs srl_model and non-empty axes (got {axes}); set hydra.sweeper.params in "
            "conf/experiment/<name>.yaml or pipeline.sweep.<key>=[...]"
        )


def pipeline_spec(overrides: Sequence[str]) -> PipelineSpec:
    """Compose and check the pipeline that ``python -m rlzoo.pipeline <overrides>`` runs."""
    cfg = compose_pipeline(overrides)
    experiment = str(cfg.hydra.runtime.choices.get("experiment"))
    sweeper: dict[str, Any] = OmegaConf.to_container(cfg.hydra.sweeper.get("params") or {})  # type: ignore[assignment]
    previous = HydraConfig.instance().cfg
    HydraConfig.instance().set_config(cfg)  # lets ${hydra:...} in pipeline.dir resolve
    try:
        node: dict[str, Any] = OmegaConf.to_container(cfg.pipeline, resolve=True)  # type: ignore[assignment]
        launcher: dict[str, Any] = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)  # type: ignore[assignment]
    finally:
        HydraConfig.instance().cfg = previous
    _check_keys(node)
    plain = [o for o in overrides if "=" in o and not _key(o).startswith(("pipeline.", "hydra"))]
    narrowed = {_key(o): _values(_key(o), o.split("=", 1)[1])[0] for o in plain}
    axes = _axes(sweeper, dict(node.get("sweep") or {}), narrowed)
    _check_axes(axes)
    env_axis: list[Any] = axes.get("env", [str(cfg.hydra.runtime.choices.env)])  # not swept: the config's own
    seed_axis: list[Any] = axes.get("seed", [int(cfg.seed)])
    axes = {"env": env_axis, "srl_model": axes["srl_model"], "seed": seed_axis} | axes
    train = [o for o in plain if _key(o) not in axes and _key(o) != "experiment"]
    train += [o for o in overrides if _key(o).startswith(("hydra.launcher", "hydra/launcher"))]
    per_method = {str(k): as_overrides(v, "srl_model.") for k, v in (node.get("srl_model") or {}).items()}
    # The experiment's own representations may have settings while the sweep is narrowed to others.
    ran = {str(v) for v in [*axes["srl_model"], *_values("srl_model", sweeper.get("srl_model", []))]}
    unknown = sorted(set(per_method) - ran)
    if unknown:
        raise ConfigError(
            f"pipeline.srl_model has {unknown}, which the sweep does not run (srl_model axis: {axes['srl_model']})"
        )
    wandb = OmegaConf.to_container(cfg.logger, resolve=False).get("wandb")  # type: ignore[union-attr]
    return PipelineSpec(
        experiment=experiment,
        dir=Path(str(node["dir"])).expanduser().resolve(),
        axes=axes,
        train=train,
        collect=as_overrides(node.get("collect")),
        srl_train=as_overrides(node.get("srl_train")),
        srl_model=per_method,
        report=bool(node.get("report", True)),
        videos=bool(node.get("videos", True)),
        wandb=wandb if isinstance(wandb, dict) else None,
        encoder_workers=_encoder_workers(node.get("encoder_workers", 1)),
        runs_beside_encoders=_flag("runs_beside_encoders", node.get("runs_beside_encoders", False)),
        verdict_of=_verdict_of(node.get("verdict_of"), axes["srl_model"]),
        verdict_ci=check_confidence(node.get("verdict_ci", 0.95), "pipeline.verdict_ci"),
        slurm=slurm_parameters(launcher),
        typed=tuple(_key(o) for o in overrides if _key(o).startswith("pipeline.")),
    )


PIPELINE_KEYS = {
    "dir", "collect", "srl_train", "srl_model", "sweep", "report", "videos", "encoder_workers", "runs_beside_encoders",
    "verdict_of", "verdict_ci",
}  # fmt: skip


def _verdict_of(value: Any, srl_models: list[Any]) -> str | None:
    """The representation the table's verdicts compare: null, or an srl_model option (none when the sweep is
    narrowed to representations without it)."""
    if value is None:
        return None
    options = group_options("srl_model")
    if str(value) not in options:
        raise ConfigError(f"pipeline.verdict_of={value!r}: not an option of conf/srl_model ({', '.join(options)})")
    return str(value) if str(value) in map(str, srl_models) else None


def _flag(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"pipeline.{key}={value!r}; allowed: true or false")
    return value


def _encoder_workers(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"pipeline.encoder_workers={value!r}; allowed: a whole number ≥ 1 (encoders trained at once)")
    return value


def _check_keys(node: dict[str, Any]) -> None:
    unknown = sorted(set(node) - PIPELINE_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join('pipeline.' + k for k in unknown)}; allowed: "
            + ", ".join("pipeline." + k for k in sorted(PIPELINE_KEYS))
        )
    for key in ("collect", "srl_train", "srl_model", "sweep"):
        if not isinstance(node.get(key) or {}, dict):
            raise ConfigError(f"pipeline.{key}={node[key]!r}; allowed: a mapping of keys to values, e.g. {{seed: 3}}")


SIMPLE = re.compile(r"^[\w./:+-]+$")


def override_value(value: Any) -> str:
    """``value`` as Hydra's override grammar writes it (lists in brackets, odd strings quoted)."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, list | tuple):
        return "[" + ",".join(override_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{override_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    return text if not isinstance(value, str) or SIMPLE.match(text) else "'" + text.replace("'", "\\'") + "'"


def as_overrides(values: Any, prefix: str = "") -> list[str]:
    """A nested mapping as ``key=value`` overrides: ``{training: {epochs: 5}}`` -> ``["training.epochs=5"]``."""
    overrides = []
    for key, value in (values or {}).items():
        if isinstance(value, dict) and value:
            overrides += as_overrides(value, f"{prefix}{key}.")
        else:
            overrides.append(f"{prefix}{key}={override_value(value)}")
    return overrides
