"""Time from launch to the first training step: ``python -m rlzoo.train`` against a bare SB3 script (one thread each).

Each variant starts a fresh child process that trains PPO on CartPole-v1 with the tuned pair's settings (8 envs,
``n_steps`` 32) for one rollout (256 steps) and no test episodes; the child prints the clock time of the first
``VecEnv.step`` (a hook installed before anything else runs). Measured per run: seconds from just before the child
is started to that step, the child's whole wall time and its CPU seconds (user + sys, ``os.wait4``).

* ``rlzoo``: ``python -m rlzoo.train algo=ppo env=CartPole seed=0 total_timesteps=256 test_episodes=0``
  (``hardware=cpu``: one torch thread) with the code on ``PYTHONPATH`` as it is;
* ``rlzoo@<label>``: the same with another source tree (``--other label=<path to src>``; its ``conf/`` must sit
  beside it, as in ``git archive <commit> src conf``);
* ``bare``: a minimal SB3 script, ``torch.set_num_threads(1)``, the same hyperparameters.

Variants run in turns (``--repeats`` rounds) so that load from other processes hits all alike; medians are printed
with the load average.

    python benchmarks/startup.py --repeats 5
    python benchmarks/startup.py --other before=/tmp/before/src --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOOK = """
import sys, time
from stable_baselines3.common.vec_env.base_vec_env import VecEnv
_step = VecEnv.step
def _first(self, actions):
    if not getattr(VecEnv, "_timed", False):
        VecEnv._timed = True
        print(f"FIRST_STEP {time.time()!r}", flush=True)
    return _step(self, actions)
VecEnv.step = _first
"""
RLZOO = (
    HOOK
    + """
import runpy
sys.argv = ["rlzoo.train", *sys.argv[1:]]
runpy.run_module("rlzoo.train", run_name="__main__", alter_sys=True)
"""
)
BARE = (
    HOOK
    + """
import torch
torch.set_num_threads(1)
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.utils import LinearSchedule
env = make_vec_env("CartPole-v1", n_envs=8, seed=0)
model = PPO(
    "MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
    learning_rate=LinearSchedule(1e-3, 0.0, 1.0), clip_range=LinearSchedule(0.2, 0.0, 1.0), seed=0, verbose=0,
)
model.learn(int(sys.argv[1]))
"""
)
STEPS = 256


def command(variant: str, workdir: Path) -> list[str]:
    if variant == "bare":
        return [sys.executable, "-c", BARE, str(STEPS)]
    return [
        sys.executable, "-c", RLZOO, "algo=ppo", "env=CartPole", "seed=0", f"total_timesteps={STEPS}",
        "test_episodes=0", "checkpoint_freq=0", f"hydra.run.dir={workdir / 'run'}",
    ]  # fmt: skip


def run_once(variant: str, src: str | None) -> dict[str, float]:
    workdir = Path(tempfile.mkdtemp(prefix="bench_startup_"))
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    if src is not None:
        env["PYTHONPATH"] = src
    started = time.time()
    proc = subprocess.Popen(command(variant, workdir), cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, text=True)  # fmt: skip
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.time() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    first = [line for line in output.splitlines() if line.startswith("FIRST_STEP ")]
    if proc.returncode or not first:
        sys.exit(f"{variant} failed (exit {proc.returncode}):\n{output[-3000:]}")
    return {"first_step_s": float(first[0].split()[1]) - started, "wall_s": wall,
            "cpu_s": usage.ru_utime + usage.ru_stime}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--other", action="append", default=[], help="label=<src dir> of another rlzoo tree")
    args = parser.parse_args()
    variants: dict[str, str | None] = {"rlzoo": os.environ.get("PYTHONPATH"), "bare": os.environ.get("PYTHONPATH")}
    for other in args.other:
        label, path = other.split("=", 1)
        variants[f"rlzoo@{label}"] = path
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for _ in range(args.repeats):
        for variant, src in variants.items():
            runs[variant].append(run_once(variant.split("@")[0], src))
    print(f"PPO CartPole-v1 (8 envs x 32 steps, one rollout), one torch thread, medians of {args.repeats}, "
          f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    print(f"{'variant':16s} {'first step s':>12s} {'wall s':>7s} {'cpu s':>7s}   first step, each run")
    for variant, measured in runs.items():
        med = {k: statistics.median(r[k] for r in measured) for k in ("first_step_s", "wall_s", "cpu_s")}
        each = " ".join(f"{r['first_step_s']:.2f}" for r in measured)
        print(f"{variant:16s} {med['first_step_s']:12.2f} {med['wall_s']:7.2f} {med['cpu_s']:7.2f}   {each}")


if __name__ == "__main__":
    main()
