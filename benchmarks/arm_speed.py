"""Speed of the arm envs (PyBullet): steps per second, against the straightforward implementation, and the env's share
of a SAC ground-truth training run. Needs the extra: ``pip install -e ".[arm]"``.

Measured in one process, random continuous Cartesian actions, episodes reset as they end, in alternating chunks (a
change of load on a shared machine then affects every figure alike):

* ``ground_truth/<env>``: ``gymnasium.make("rlzoo/<env>-v0", continuous=True)``, the state vector only (no image);
* ``pixels_64`` / ``pixels_224``: KukaButton with the image as the observation, as ``srl_model=raw_pixels`` builds it
  (``render_mode="rgb_array"``, rendered natively at that size, Gymnasium's ``AddRenderObservation``; floor and table
  rendered once, :mod:`rlzoo.envs.kuka_camera`);
* ``straightforward_224``: the straightforward implementation in the same run: the same physics (DIRECT client, one
  physics step of 1/240 s per agent step), but the scene reloaded and settled (500 physics steps) at every reset as
  the original did, and a 224² TinyRenderer image as the observation of every step.

Then a SAC training run on KukaButton with random buttons (ground truth, the tuned pair
``conf/algo_env/sac_KukaButton.yaml``, built as ``rlzoo.train`` builds it; ``--sac-steps`` agent steps) in which the
vec env's ``step``/``reset`` calls are timed: the env share is their time over ``learn()``'s,
in wall-clock and in CPU seconds (one torch thread). Goals: pixels at 64² at least 5x the straightforward 224² rate;
ground-truth steps never render; env share of SAC training at most 20 %.

    python benchmarks/arm_speed.py                                  # ~5 min on 2 cores
    python benchmarks/arm_speed.py --steps 1000 --sac-steps 1000    # smoke run
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
from env_speed import env_share_of_learning  # this folder's benchmark of the MobileRobot env
from gymnasium import spaces
from gymnasium.wrappers import AddRenderObservation
from omegaconf import OmegaConf

import rlzoo.envs  # noqa: F401  (registers the ids)
from rlzoo.config import compose_config
from rlzoo.envs.kuka_button import KukaButtonEnv
from rlzoo.envs.kuka_scene import ArmScene
from rlzoo.training.build import RunBuilder
from rlzoo.training.plan import plan_run

ENVS = ("KukaButton", "KukaRandButton", "Kuka2Button", "KukaMovingButton")
STRAIGHTFORWARD_SIZE = 224


class StraightforwardKukaButton(KukaButtonEnv):
    """The straightforward implementation of KukaButton: at every reset the scene is loaded again into a new client
    and settled for 500 physics steps; the observation of every step is a 224² TinyRenderer image of the whole scene
    (no cached background)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(render_mode="rgb_array", render_size=STRAIGHTFORWARD_SIZE, **kwargs)
        shape = (STRAIGHTFORWARD_SIZE, STRAIGHTFORWARD_SIZE, 3)
        self.observation_space = spaces.Box(0, 255, shape, dtype=np.uint8)  # type: ignore[arg-type]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        workspace = self._scene.arm.workspace
        self._scene.close()
        self._scene = ArmScene(len(self.default_buttons), workspace, self.null_space, cached_background=False)
        self._load_extras()
        self._settled = self._settle()
        _, info = super().reset(seed=seed, options=options)
        return self.render(), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        _, reward, terminated, truncated, info = super().step(action)
        return self.render(), reward, terminated, truncated, info


class Meter:
    """Steps an env under random actions (resetting episodes as they end) and adds up the time taken."""

    def __init__(self, env: gym.Env, seed: int = 0) -> None:
        self.env = env
        self.steps = 0
        self.seconds = 0.0
        env.reset(seed=seed)  # not timed
        env.action_space.seed(seed)

    def run(self, steps: int) -> None:
        actions = [self.env.action_space.sample() for _ in range(steps)]
        start = time.perf_counter()
        for action in actions:
            _, _, terminated, truncated, _ = self.env.step(action)
            if terminated or truncated:
                self.env.reset()
        self.seconds += time.perf_counter() - start
        self.steps += steps

    @property
    def rate(self) -> float:
        return self.steps / self.seconds


def interleaved_rates(meters: dict[str, tuple[Meter, int]], rounds: int) -> dict[str, float]:
    """Steps per second of each meter, measured in ``rounds`` alternating chunks (``(meter, steps)``: ``steps`` in
    all), so that a change of load on a shared machine affects every measurement alike."""
    for _ in range(rounds):
        for meter, steps in meters.values():
            meter.run(max(1, steps // rounds))
    rates = {name: meter.rate for name, (meter, _) in meters.items()}
    for meter, _ in meters.values():
        meter.env.close()
    return rates


def sac_env_share(total_timesteps: int) -> dict[str, Any]:
    """Train SAC on KukaButton (ground truth, random buttons) with the env, normalisation and model that
    ``python -m rlzoo.train algo=sac env=KukaButton env.random_target=true`` builds (the tuned pair applies), timing
    the env; :return: the env's share of ``learn()``."""
    cfg = compose_config(["algo=sac", "env=KukaButton", "env.random_target=true", "verbose=0"], run_dir="unused")
    venv = RunBuilder(plan_run(cfg, run_dir_state=False)).training_env()
    return {"sac_env": OmegaConf.to_container(cfg.env), **env_share_of_learning(cfg, venv, total_timesteps, "sac")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--steps", type=int, default=20_000, help="ground-truth steps per env (pixels: 1/5, straightforward: 1/10)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="alternating chunks the measurements are split into")
    parser.add_argument("--sac-steps", type=int, default=10_000, help="agent steps of the SAC run")
    parser.add_argument("--out", type=Path, default=Path("bench_out/arm_speed.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)

    results: dict[str, Any] = {}
    meters = {
        f"ground_truth/{name}": (Meter(gym.make(f"rlzoo/{name}-v0", continuous=True)), args.steps) for name in ENVS
    }
    for size in (64, 224):
        env = gym.make("rlzoo/KukaButton-v0", continuous=True, render_mode="rgb_array", render_size=size)
        meters[f"pixels_{size}"] = (Meter(AddRenderObservation(env, render_only=True)), args.steps // 5)
    meters["straightforward_224"] = (Meter(StraightforwardKukaButton(continuous=True)), args.steps // 10)
    results |= interleaved_rates(meters, args.rounds)
    results |= sac_env_share(args.sac_steps)

    print(f"{'measurement':<40} {'steps/s':>10}")
    for key in [f"ground_truth/{name}" for name in ENVS] + ["pixels_64", "pixels_224", "straightforward_224"]:
        print(f"{key:<40} {results[key]:>10,.0f}")
    baseline = results["straightforward_224"]
    print(f"{'pixels_64 / straightforward_224':<40} {results['pixels_64'] / baseline:>9.1f}x   goal >= 5x")
    print(f"{'pixels_224 / straightforward_224':<40} {results['pixels_224'] / baseline:>9.1f}x")
    print(f"{'ground_truth / straightforward_224':<40} {results['ground_truth/KukaButton'] / baseline:>9.1f}x")
    sac = f"SAC learn() ({results['sac_steps']:,.0f} steps, s)"
    print(f"{sac:<40} {results['learn_seconds']:>10.1f}   ({results['sac_steps_per_second']:.0f} steps/s)")
    print(f"{'env share of SAC training (wall)':<40} {100 * results['env_share']:>9.1f}%   goal <= 20%")
    print(f"{'env share of SAC training (CPU)':<40} {100 * results['env_cpu_share']:>9.1f}%")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"raw figures: {args.out}")


if __name__ == "__main__":
    main()
