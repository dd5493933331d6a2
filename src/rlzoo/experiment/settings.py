"""Typed, checked run keys and hardware profile: every bad value fails here, before any work starts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig

from rlzoo.errors import ConfigError

GROUPS = ("algo", "env", "srl_model", "hardware", "logger")


def _integer(name: str, value: Any, minimum: int) -> int:
    """An integer ≥ ``minimum``; integral floats such as ``1e5`` are accepted."""
    if isinstance(value, bool) or not isinstance(value, int | float) or float(value) != int(value):
        raise ConfigError(f"{name}={value!r} must be an integer ≥ {minimum}")
    if int(value) < minimum:
        raise ConfigError(f"{name}={value!r} must be ≥ {minimum}")
    return int(value)


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name}={value!r} must be true or false")
    return value


def _choice(name: str, value: Any, allowed: tuple[Any, ...]) -> Any:
    if value not in allowed:
        raise ConfigError(f"{name}={value!r}; allowed: {', '.join(map(str, allowed))}")
    return value


@dataclass(frozen=True)
class RunSettings:
    """The run keys of ``train.yaml``."""

    seed: int
    total_timesteps: int
    n_envs: int
    vec_env: str
    normalize: bool
    checkpoint_freq: int
    test_episodes: int
    deterministic_test: bool
    progress_bar: bool
    verbose: int
    run_dir: str

    @classmethod
    def from_config(cls, cfg: DictConfig) -> RunSettings:
        known = set(cls.__dataclass_fields__) | set(GROUPS) | {"resume"}  # resume: read by the train entrypoint
        unknown = sorted(str(k) for k in cfg if k not in known)
        if unknown:
            raise ConfigError(f"unknown run key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
        return cls(
            seed=_integer("seed", cfg.seed, 0),
            total_timesteps=_integer("total_timesteps", cfg.total_timesteps, 1),
            n_envs=_integer("n_envs", cfg.n_envs, 1),
            vec_env=_choice("vec_env", cfg.vec_env, ("dummy", "subproc", "batched")),
            normalize=_flag("normalize", cfg.normalize),
            checkpoint_freq=_integer("checkpoint_freq", cfg.checkpoint_freq, 0),
            test_episodes=_integer("test_episodes", cfg.test_episodes, 0),
            deterministic_test=_flag("deterministic_test", cfg.deterministic_test),
            progress_bar=_flag("progress_bar", cfg.progress_bar),
            verbose=_choice("verbose", cfg.verbose, (0, 1, 2)),
            run_dir=str(cfg.run_dir),
        )


@dataclass(frozen=True)
class Hardware:
    """Where the networks run and how many torch threads a run may use."""

    device: str
    torch_threads: int | None

    @classmethod
    def from_config(cls, hardware_cfg: DictConfig) -> Hardware:
        device = str(hardware_cfg.device)
        threads = hardware_cfg.get("torch_threads")
        hardware = cls(device, None if threads is None else _integer("hardware.torch_threads", threads, 1))
        hardware.check()
        return hardware

    def check(self) -> None:
        try:
            kind = torch.device(self.device).type if self.device != "auto" else "auto"
        except RuntimeError:
            raise ConfigError(f"hardware.device={self.device!r}; allowed: cpu, cuda, cuda:<n>, auto") from None
        if kind == "cuda" and not torch.cuda.is_available():
            raise ConfigError(f"hardware.device={self.device!r} but no CUDA GPU is visible; use hardware=cpu")

    def apply(self) -> None:
        if self.torch_threads is not None:
            torch.set_num_threads(self.torch_threads)
