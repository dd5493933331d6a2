"""One training run: what ``python -m rlzoo.train`` (and ``rlzoo.train.train``) does with a composed config.

Data flow: seed → vec env (env group) → representation (srl_model group) → observation normalisation →
algorithm (algo group) → learn with callbacks → save → test episodes → metrics.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.utils import set_random_seed
from stable_baselines3.common.vec_env import VecNormalize

from rlzoo.experiment import environment as envs
from rlzoo.experiment.callbacks import Checkpoint, Returns100
from rlzoo.experiment.evaluation import run_test_episodes, summarize
from rlzoo.experiment.loggers import WandbSettings, check_formats, make_logger, start_wandb
from rlzoo.experiment.plan import plan_run
from rlzoo.experiment.resume import find_resume_point, resume_config, resume_model, truncate_logs
from rlzoo.experiment.rundir import RunDir, save_model
from rlzoo.experiment.settings import RunSettings


def train_run(cfg: DictConfig) -> dict[str, float]:
    """Train, save and test one agent as ``cfg`` describes; return its metrics (``test/mean_return`` ...).

    Every input is checked before the run dir is written to; ``metrics.json`` is written last.
    """
    started = time.perf_counter()
    if cfg.get("resume"):
        cfg = resume_config(Path(cfg.resume), cfg, overrides=[])
    plan = plan_run(cfg)  # every input checked; cfg.env.continuous records the action type
    settings, hardware, factory, spec = plan.settings, plan.hardware, plan.factory, plan.spec
    representation, policy = plan.representation, plan.policy
    formats = check_formats(cfg.logger.formats, settings.verbose)
    wandb_settings = WandbSettings(**cfg.logger.wandb) if cfg.logger.get("wandb") else None

    run = RunDir(Path(settings.run_dir))
    resume_point = find_resume_point(run, cfg)  # None: a fresh start
    run.path.mkdir(parents=True, exist_ok=True)
    truncate_logs(run, resume_point)
    if resume_point is not None:
        run.record_resume(resume_point.timesteps)
    run.write_config(cfg)
    hardware.apply()
    seed = settings.seed + max(resume_point.timesteps, 0) if resume_point else settings.seed  # new episodes on resume
    set_random_seed(seed)
    venv = envs.make_env(
        spec, representation, n_envs=settings.n_envs, seed=seed, vec_env=settings.vec_env,
        monitor_dir=run.monitor_dir, monitor_append=resume_point is not None,
    )  # fmt: skip
    normalizer = envs.normalize_observations(venv) if settings.normalize else None
    wandb_run, model = None, None
    try:
        if wandb_settings is not None:
            wandb_run = start_wandb(wandb_settings, run, OmegaConf.to_container(cfg))  # type: ignore[arg-type]
        model_kwargs: dict[str, Any] = {"env": normalizer or venv, "device": hardware.device}
        model_kwargs["verbose"] = settings.verbose
        if resume_point is None:
            model = factory(policy=policy, seed=seed, **model_kwargs)
        else:
            model = resume_model(factory.algo_class, resume_point, normalizer, **model_kwargs)
        model.set_logger(make_logger(run, formats, wandb_run))
        returns100 = Returns100(run.returns100, pending=resume_point.pending_returns if resume_point else ())
        callbacks: list[Any] = [returns100]
        if settings.checkpoint_freq:
            callbacks.append(Checkpoint(run, settings.checkpoint_freq, normalizer, returns100))
        remaining = settings.total_timesteps - model.num_timesteps
        if remaining > 0:
            model.learn(
                remaining, callback=callbacks, progress_bar=settings.progress_bar,
                reset_num_timesteps=resume_point is None,
            )  # fmt: skip
        train_seconds = time.perf_counter() - started
        save_model(run.path, model, normalizer)
        metrics = {"train/timesteps": float(model.num_timesteps), "time/train_seconds": train_seconds}
        returns, lengths = _test(spec, representation, model, normalizer, settings)
        if returns:
            metrics |= summarize(returns)
        metrics["time/total_seconds"] = time.perf_counter() - started
        if wandb_run is not None:
            wandb_run.summary.update(metrics)
        run.write_test_results(returns, lengths, metrics)
    finally:
        if model is not None:
            model.logger.close()
        venv.close()
        if wandb_run is not None:
            wandb_run.finish()
    return metrics


def _test(
    spec: envs.EnvSpec,
    representation: envs.Representation,
    model: Any,
    normalizer: VecNormalize | None,
    settings: RunSettings,
) -> tuple[list[float], list[int]]:
    if not settings.test_episodes:
        return [], []
    test_env = envs.make_env(
        spec, representation, n_envs=min(settings.n_envs, settings.test_episodes), seed=settings.seed + 10_000
    )
    try:
        return run_test_episodes(
            model, envs.frozen_copy(test_env, normalizer), settings.test_episodes, settings.deterministic_test
        )
    finally:
        test_env.close()
