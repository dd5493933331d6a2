"""A run planned once: a config becomes a typed plan, every input checked, nothing written or built.

:func:`plan_run` never writes into the config it is given: the plan carries its own resolved copy (the env's action
type decided, a learned encoder pinned to its folder), which is what the run records in ``config.yaml``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlzoo.algos.factory import AlgorithmFactory, build_algorithm_factory, fit_action_type
from rlzoo.any_env.observations import observe
from rlzoo.any_env.spec import EnvSpec, check_env
from rlzoo.config import resolved_values
from rlzoo.confined import MEMORY_KEY
from rlzoo.hardware import Hardware
from rlzoo.loggers.live_plot import VisdomSettings
from rlzoo.loggers.outputs import WandbSettings, check_formats, check_wandb_online
from rlzoo.rundir import RunDir
from rlzoo.srl.augment import merge_policy_kwargs
from rlzoo.srl.representation import Representation, pin_representation
from rlzoo.training.budget import check_budget
from rlzoo.training.finetune import InitPoint, find_init_point
from rlzoo.training.memory import check_memory
from rlzoo.training.policy_kwargs import check_policy_kwargs
from rlzoo.training.resume import ResumePoint, find_resume_point, resume_config, training_seed
from rlzoo.training.settings import RunSettings


@dataclass(frozen=True)
class LogPlan:
    """Where SB3's metrics go: its output formats, W&B's settings (``logger=wandb``), visdom's (``logger=visdom``)."""

    formats: list[str]
    wandb: WandbSettings | None
    visdom: VisdomSettings | None = None


@dataclass(frozen=True)
class RunPlan:
    """Everything a run needs to be built, checked: every bad input has failed once this exists.

    :param config: the resolved config to record (action type decided, encoder pinned); the input is untouched.
    :param resume_point: where an unfinished run in ``run_dir`` continues from (None: a fresh start).
    :param init_point: the saved model a fine-tuning run starts from (``init_from``; None: fresh weights).
    """

    config: DictConfig
    settings: RunSettings
    hardware: Hardware
    factory: AlgorithmFactory
    spec: EnvSpec
    representation: Representation
    policy: str | type
    logging: LogPlan
    resume_point: ResumePoint | None
    init_point: InitPoint | None = None

    @property
    def run(self) -> RunDir:
        return RunDir(Path(self.settings.run_dir))

    @property
    def seed(self) -> int:
        """The seed training starts from (a resumed run plays new episodes: see :func:`training_seed`)."""
        return training_seed(self.settings.seed, self.resume_point)


@dataclass(frozen=True)
class Prologue:
    """What every kind's plan starts from, checked: the run keys, the hardware, the algorithm factory (its keywords
    and ``policy_kwargs``), the loggers, and the resolved config's values, which the kind's plan completes.

    :param values: the resolved config (a resumed run's saved one) as plain values, for the kind's plan to complete.
    """

    values: dict[str, Any]
    settings: RunSettings
    hardware: Hardware
    factory: AlgorithmFactory
    logging: LogPlan

    @classmethod
    def of(cls, cfg: DictConfig, overrides: Sequence[str] = ()) -> Prologue:
        """The checks every kind of run makes first (``resume=<run dir>``: on the saved config, which ``overrides``
        must agree with); ``cfg`` is not changed."""
        if cfg.get("resume"):
            cfg = resume_config(Path(str(cfg.resume)), cfg, list(overrides))
        values = resolved_values(cfg)
        values[MEMORY_KEY] = None  # the caller's (train applies it); a run records null, a saved value is not read
        settings = RunSettings.from_values(values)
        hardware = Hardware.from_config(values["hardware"])
        check_budget(settings, overrides)
        factory = check_policy_kwargs(build_algorithm_factory(OmegaConf.create(values["algo"])))
        check_memory(factory.name, factory.kwargs)
        return cls(values, settings, hardware, factory, log_plan(values["logger"], settings.verbose))

    def finish(self, run_dir_state: bool) -> tuple[DictConfig, ResumePoint | None]:
        """The config to record (the completed values) and, with ``run_dir_state``, where an unfinished run in the
        run dir continues from (a finished run is refused)."""
        config = OmegaConf.create(self.values)
        run = RunDir(Path(self.settings.run_dir))
        return config, find_resume_point(run, config) if run_dir_state else None


def plan_run(cfg: DictConfig, overrides: Sequence[str] = (), *, run_dir_state: bool = True) -> RunPlan:
    """Check ``cfg`` as ``train(cfg)`` does and plan the run; ``cfg`` is not changed.

    :param overrides: the command line's overrides, checked against a saved config for ``resume=<run dir>``.
    :param run_dir_state: read the run dir's state (refuse a finished run, find a resume point); off for presets,
        whose run dir is chosen when they are saved.
    """
    prologue = Prologue.of(cfg, overrides)
    values, settings, factory = prologue.values, prologue.settings, prologue.factory
    spec = EnvSpec.from_values(values["env"])
    spec = spec.with_kwargs(**fit_action_type(spec.kwargs, factory.algo_class))
    values["srl_model"] = pin_representation(values["srl_model"], spec.id)
    representation = Representation.from_values(values["srl_model"])
    factory = dataclasses.replace(factory, kwargs=merge_policy_kwargs(factory.kwargs, representation.policy_kwargs))
    check_env(spec, representation)
    spec, observing = observe(spec, representation, settings.normalize)  # recorded: env.observation, normalize
    settings = dataclasses.replace(settings, normalize=observing.normalize)
    values["env"], values["normalize"] = spec.values(), observing.normalize
    policy = factory.policy_for(observing.policy_family)
    init_point = find_init_point(settings.init_from, values, factory.algo_class) if settings.init_from else None
    values["init_from"] = init_point.pinned if init_point is not None else None  # recorded: the model used
    config, resume_point = prologue.finish(run_dir_state)
    return RunPlan(config, settings, prologue.hardware, factory, spec, representation, policy, prologue.logging,
                   resume_point, init_point)  # fmt: skip


def log_plan(logger_values: dict[str, Any], verbose: int) -> LogPlan:
    """The checked ``logger`` group (W&B online: its credentials and server reached before the run dir exists)."""
    formats = check_formats(logger_values.get("formats", []), verbose)
    wandb, visdom = logger_values.get("wandb"), logger_values.get("visdom")
    wandb_settings = WandbSettings.from_values(wandb) if wandb else None
    if wandb_settings is not None:
        check_wandb_online(wandb_settings)  # credentials and the server, before the run dir exists
    return LogPlan(formats, wandb_settings, VisdomSettings.from_values(visdom) if visdom else None)
