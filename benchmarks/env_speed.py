"""Speed of the MobileRobot env: steps per second, and the env's share of a PPO ground-truth training run.

Measured in one process, random actions, episodes reset as they end:

* ``ground_truth``: ``gymnasium.make("rlzoo/MobileRobot-v0")``, the state vector only;
* ``pixels_224`` / ``pixels_64``: the raw-pixels observation exactly as training builds it (``rlzoo.train``'s
  ``srl_model=raw_pixels`` wrapper: ``render_mode="rgb_array"``, rendered natively at that size), one image per step;
* ``vec_env``: the vectorised env of the tuned PPO run (``conf/algo_env/ppo_MobileRobot.yaml``: its ``n_envs`` and
  ``vec_env``, with its episode monitor), agent steps per second;
* ``vec_env_dummy``: the same envs in SB3's ``DummyVecEnv`` (``gym.make`` + ``Monitor`` per env), for comparison.

Then one PPO training run with the tuned pair (``algo=ppo env=MobileRobot env.random_target=true``; ``--ppo-steps``
agent steps) in which the vec env's ``step``/``reset`` calls are timed: the env share is their time over the
``learn()`` time, in wall-clock seconds and in this process's CPU seconds (one torch thread; the CPU share is the
steadier figure on a machine shared with other jobs). The original (PyBullet, 224² images) ran about 800 steps/s;
goals here: pixels at 224² at least 40 times that (32,000 steps/s), env share of PPO ground-truth training at most 10 %.

    python benchmarks/env_speed.py                     # ~1 min on 2 cores
    python benchmarks/env_speed.py --steps 2000 --ppo-steps 4096   # smoke run
    python benchmarks/env_speed.py --ppo-vec-env dummy             # the env share with SB3's DummyVecEnv
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

import rlzoo  # noqa: F401  (registers rlzoo/MobileRobot-v0)
from rlzoo.config import compose_config
from rlzoo.srl.pixels import rendered_pixels
from rlzoo.training.build import RunBuilder
from rlzoo.training.plan import plan_run

ORIGINAL_STEPS_PER_SECOND = 800  # S-RL Toolbox MobileRobotGymEnv with PyBullet rendering at 224²


def single_env_speed(env: gym.Env, steps: int, seed: int = 0) -> float:
    """Steps per second of ``env`` under random actions (resets included)."""
    env.reset(seed=seed)
    env.action_space.seed(seed)
    actions = [env.action_space.sample() for _ in range(steps)]
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def vec_env_speed(venv: VecEnv, steps: int) -> float:
    """Agent steps per second of ``venv`` under random actions (``steps`` summed over its envs)."""
    venv.reset()
    venv.action_space.seed(0)
    rounds = max(1, steps // venv.num_envs)
    actions = [np.array([venv.action_space.sample() for _ in range(venv.num_envs)]) for _ in range(rounds)]
    start = time.perf_counter()
    for action in actions:
        venv.step(action)
    return rounds * venv.num_envs / (time.perf_counter() - start)


class Clock:
    """Wall-clock and CPU seconds added up over the timed calls."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    @contextmanager
    def timing(self) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.wall += time.perf_counter() - wall
            self.cpu += time.process_time() - cpu


class TimedVecEnv(VecEnvWrapper):
    """Adds up the time spent in the wrapped vec env's ``reset`` and ``step`` (``clock``)."""

    def __init__(self, venv: VecEnv) -> None:
        super().__init__(venv)
        self.clock = Clock()

    def reset(self) -> VecEnvObs:
        with self.clock.timing():
            return self.venv.reset()

    def step_async(self, actions: np.ndarray) -> None:
        with self.clock.timing():
            self.venv.step_async(actions)

    def step_wait(self) -> VecEnvStepReturn:
        with self.clock.timing():
            return self.venv.step_wait()


def tuned_ppo_config() -> DictConfig:
    """The config of the tuned PPO run on MobileRobot with random targets (ground truth)."""
    return compose_config(["algo=ppo", "env=MobileRobot", "env.random_target=true", "verbose=0"], run_dir="unused")


def make_vec_env_of(cfg: DictConfig, vec_env: str) -> VecEnv:
    """The vec env that ``rlzoo.train`` builds for ``cfg`` (without monitor files), as ``vec_env``."""
    plan = plan_run(OmegaConf.merge(cfg, {"vec_env": vec_env}), run_dir_state=False)  # type: ignore[arg-type]
    return RunBuilder(plan).training_env()


def env_share_of_learning(cfg: DictConfig, venv: VecEnv, total_timesteps: int, prefix: str) -> dict[str, Any]:
    """Train on ``venv`` with the normalisation and model ``rlzoo.train`` builds for ``cfg``, timing the env's
    ``step``/``reset`` calls; :return: the steps (``<prefix>_steps``, ``<prefix>_steps_per_second``), the ``learn()``
    and env seconds (wall and CPU) and the env's share of ``learn()``."""
    timed = TimedVecEnv(venv)
    build = RunBuilder(plan_run(cfg, run_dir_state=False))
    normalizer = build.normalizer(timed)  # as rlzoo.train: normalisation sits above the env, not in it
    model = build.model(normalizer or timed, normalizer)
    learn = Clock()
    with learn.timing():
        model.learn(total_timesteps)
    timed.close()
    return {
        f"{prefix}_steps": float(model.num_timesteps),
        "learn_seconds": learn.wall,
        "learn_cpu_seconds": learn.cpu,
        "env_seconds": timed.clock.wall,
        "env_cpu_seconds": timed.clock.cpu,
        "env_share": timed.clock.wall / learn.wall,
        "env_cpu_share": timed.clock.cpu / learn.cpu,
        f"{prefix}_steps_per_second": model.num_timesteps / learn.wall,
    }


def ppo_env_share(total_timesteps: int, vec_env: str) -> dict[str, Any]:
    """Train PPO with the tuned MobileRobot pair on ``vec_env``, timing the env; returns its share of ``learn()``."""
    cfg = tuned_ppo_config()
    return {"ppo_vec_env": vec_env, **env_share_of_learning(cfg, make_vec_env_of(cfg, vec_env), total_timesteps, "ppo")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50_000, help="steps per single-env / vec-env measurement")
    parser.add_argument("--ppo-steps", type=int, default=250_000, help="agent steps of the PPO run (tuned: 250k)")
    parser.add_argument("--ppo-vec-env", help="vec_env of the PPO run (default: the tuned pair's), e.g. dummy")
    parser.add_argument("--out", type=Path, default=Path("bench_out/env_speed.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)

    results: dict[str, Any] = {}
    results["ground_truth"] = single_env_speed(gym.make("rlzoo/MobileRobot-v0", random_target=True), args.steps)
    for size in (224, 64):
        env = gym.make("rlzoo/MobileRobot-v0", random_target=True, render_mode="rgb_array", render_size=size)
        results[f"pixels_{size}"] = single_env_speed(rendered_pixels(env, size, size), args.steps)
    cfg = tuned_ppo_config()
    for name, vec_env in (("vec_env", cfg.vec_env), ("vec_env_dummy", "dummy")):
        venv = make_vec_env_of(cfg, vec_env)
        results[name] = vec_env_speed(venv, args.steps)
        venv.close()
    results["vec_env_kind"], results["vec_env_n_envs"] = cfg.vec_env, cfg.n_envs
    results |= ppo_env_share(args.ppo_steps, args.ppo_vec_env or cfg.vec_env)

    speedup = results["pixels_224"] / ORIGINAL_STEPS_PER_SECOND
    labels = {
        "ground_truth": "ground_truth",
        "pixels_224": "pixels_224",
        "pixels_64": "pixels_64",
        "vec_env": f"vec_env ({cfg.vec_env}, {cfg.n_envs} envs)",
        "vec_env_dummy": f"vec_env (dummy, {cfg.n_envs} envs)",
    }
    print(f"{'measurement':<34} {'value':>12}")
    for name, label in labels.items():
        print(f"{label + ' (steps/s)':<34} {results[name]:>12,.0f}")
    print(f"{'pixels_224 / original (800/s)':<34} {speedup:>11.1f}x   goal >= 40x")
    print(f"{f'vec_env {cfg.vec_env} / dummy':<34} {results['vec_env'] / results['vec_env_dummy']:>11.1f}x")
    ppo = f"PPO learn() seconds ({results['ppo_vec_env']})"
    print(f"{ppo:<34} {results['learn_seconds']:>12.1f}   ({results['ppo_steps']:,.0f} steps)")
    print(f"{'env share of PPO training (wall)':<34} {100 * results['env_share']:>11.1f}%   goal <= 10%")
    print(f"{'env share of PPO training (CPU)':<34} {100 * results['env_cpu_share']:>11.1f}%")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"raw figures: {args.out}")


if __name__ == "__main__":
    main()
