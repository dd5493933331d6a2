"""Speed of the MobileRobot env: steps per second, and the env's share of a PPO ground-truth training run.

Measured in one process, random actions, episodes reset as they end:

* ``ground_truth``: ``gymnasium.make("rlzoo/MobileRobot-v0")``, the state vector only;
* ``pixels_224`` / ``pixels_64``: the raw-pixels observation exactly as training builds it (``rlzoo.train``'s
  ``srl_model=raw_pixels`` wrapper: ``render_mode="rgb_array"``, rendered natively at that size), one image per step;
* ``vec_env``: the vectorised env of the tuned PPO run (8 envs, Monitor, DummyVecEnv), agent steps per second.

Then one PPO training run with the tuned pair (``algo=ppo env=MobileRobot env.random_target=true``; ``--ppo-steps``
agent steps) in which the vec env's ``step``/``reset`` calls are timed: the env share is their time over the
``learn()`` wall time. The original (PyBullet, 224² images) ran about 800 steps/s; goals here: pixels at 224² at least
40 times that (32,000 steps/s), env share of PPO ground-truth training at most 10 %.

    python benchmarks/env_speed.py                     # ~1 min on 2 cores
    python benchmarks/env_speed.py --steps 2000 --ppo-steps 4096   # smoke run
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

import rlzoo  # noqa: F401  (registers rlzoo/MobileRobot-v0)
from rlzoo.config import compose_config, instantiate
from rlzoo.experiment import environment as envs
from rlzoo.srl.pixels import rendered_pixels

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
    rounds = max(1, steps // venv.num_envs)
    actions = [np.array([venv.action_space.sample() for _ in range(venv.num_envs)]) for _ in range(rounds)]
    start = time.perf_counter()
    for action in actions:
        venv.step(action)
    return rounds * venv.num_envs / (time.perf_counter() - start)


class TimedVecEnv(VecEnvWrapper):
    """Adds up the seconds spent in the wrapped vec env's ``reset`` and ``step``."""

    def __init__(self, venv: VecEnv) -> None:
        super().__init__(venv)
        self.seconds = 0.0

    def reset(self) -> VecEnvObs:
        start = time.perf_counter()
        obs = self.venv.reset()
        self.seconds += time.perf_counter() - start
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        start = time.perf_counter()
        self.venv.step_async(actions)
        self.seconds += time.perf_counter() - start

    def step_wait(self) -> VecEnvStepReturn:
        start = time.perf_counter()
        result = self.venv.step_wait()
        self.seconds += time.perf_counter() - start
        return result


def ppo_env_share(total_timesteps: int) -> dict[str, float]:
    """Train PPO with the tuned MobileRobot pair, timing the vec env; returns the env share of ``learn()``."""
    cfg = compose_config(["algo=ppo", "env=MobileRobot", "env.random_target=true"], run_dir="unused")
    spec = envs.EnvSpec.from_config(cfg.env)
    representation = envs.Representation.from_config(cfg.srl_model)
    timed = TimedVecEnv(envs.make_env(spec, representation, n_envs=cfg.n_envs, seed=0))
    normalizer = envs.normalize_observations(timed)  # as rlzoo.train: normalisation sits above the env, not in it
    factory = instantiate(cfg.algo)
    model = factory(env=normalizer, policy="MlpPolicy", seed=0, verbose=0, device="cpu")
    start = time.perf_counter()
    model.learn(total_timesteps)
    learn_seconds = time.perf_counter() - start
    timed.close()
    return {
        "ppo_steps": float(model.num_timesteps),
        "learn_seconds": learn_seconds,
        "env_seconds": timed.seconds,
        "env_share": timed.seconds / learn_seconds,
        "ppo_steps_per_second": model.num_timesteps / learn_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50_000, help="steps per single-env / vec-env measurement")
    parser.add_argument("--ppo-steps", type=int, default=250_000, help="agent steps of the PPO run (tuned: 250k)")
    parser.add_argument("--out", type=Path, default=Path("bench_out/env_speed.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)

    results: dict[str, Any] = {}
    results["ground_truth"] = single_env_speed(gym.make("rlzoo/MobileRobot-v0", random_target=True), args.steps)
    for size in (224, 64):
        env = gym.make("rlzoo/MobileRobot-v0", random_target=True, render_mode="rgb_array", render_size=size)
        results[f"pixels_{size}"] = single_env_speed(rendered_pixels(env, size, size), args.steps)
    cfg = compose_config(["algo=ppo", "env=MobileRobot", "env.random_target=true"], run_dir="unused")
    spec = envs.EnvSpec.from_config(cfg.env)
    venv = envs.make_env(spec, envs.Representation.from_config(cfg.srl_model), n_envs=cfg.n_envs, seed=0)
    results["vec_env"] = vec_env_speed(venv, args.steps)
    venv.close()
    results["vec_env_n_envs"] = cfg.n_envs
    results |= ppo_env_share(args.ppo_steps)

    speedup = results["pixels_224"] / ORIGINAL_STEPS_PER_SECOND
    print(f"{'measurement':<34} {'value':>12}")
    for name in ("ground_truth", "pixels_224", "pixels_64", "vec_env"):
        print(f"{name + ' (steps/s)':<34} {results[name]:>12,.0f}")
    print(f"{'pixels_224 / original (800/s)':<34} {speedup:>11.1f}x   goal >= 40x")
    print(f"{'PPO learn() seconds':<34} {results['learn_seconds']:>12.1f}   ({results['ppo_steps']:,.0f} steps)")
    print(f"{'env share of PPO training':<34} {100 * results['env_share']:>11.1f}%   goal <= 10%")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"raw figures: {args.out}")


if __name__ == "__main__":
    main()
