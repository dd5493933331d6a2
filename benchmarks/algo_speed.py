"""Training speed of rlzoo's own algorithms against the closest SB3 one, in the same process.

Agent steps per second of ``learn()`` on CartPole-v1 (one torch thread, no evaluation, no logging to disk):

* DQN family (``ddqn``, ``per``, ``c51``, ``rainbow``) against SB3's ``DQN``, all with the same replay settings
  (buffer 10,000, learning from step 500, batch 64, ``train_freq`` 4, 1 gradient step, net [64, 64]); the goal is
  at least 0.7x SB3 DQN's speed. rlzoo's DQN family fuses Adam by default (SB3 does not): the row
  ``dqn (SB3, fused Adam)`` shows SB3's DQN with it too;
* ``acer`` and ``acktr`` against SB3's ``A2C`` (8 envs, ``n_steps`` 5 / 20, net [64, 64]);
* CrossQ on Pendulum-v1 with sb3-contrib's default critic ([1024, 1024]) and rlzoo's CPU-sized one ([256, 256]),
  learning from step 100 (run it with ``--only`` and fewer ``--steps``: the default critic is slow on a CPU).

Algorithms run in turns (``--repeats`` rounds, each algorithm once per round, best round kept), so that load from
other processes on a shared machine hits all of them alike; the ratio to the SB3 baseline is the figure to read.
Steps per second are counted both per wall second and per CPU second of this process (one thread: the CPU figure
is what an idle machine's wall clock would show, and moves less with other processes' load); the load average is
printed.

    python benchmarks/algo_speed.py                    # ~3 min on 2 cores
    python benchmarks/algo_speed.py --steps 2000 --repeats 1   # smoke run
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

import stable_baselines3 as sb3
import torch
from sb3_contrib import CrossQ
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.env_util import make_vec_env

from rlzoo.algos.acer import ACER
from rlzoo.algos.acktr import ACKTR
from rlzoo.algos.dqn_family import CategoricalDQN, DeepQ

REPLAY = {
    "buffer_size": 10_000, "learning_starts": 500, "batch_size": 64, "train_freq": 4, "gradient_steps": 1,
    "policy_kwargs": {"net_arch": [64, 64]},
}  # fmt: skip
FUSED = {"optimizer_kwargs": {"fused": True}}
PER = {"prioritized_replay": {"alpha": 0.5, "beta": 0.4}}
RAINBOW = {**PER, "n_steps": 3, "noisy_std": 0.5, "exploration_initial_eps": 0.0, "exploration_final_eps": 0.0}
CROSSQ = {"learning_starts": 100, "buffer_size": 10_000}
ALGORITHMS: dict[str, tuple[Callable[..., BaseAlgorithm], int, dict[str, Any], str]] = {
    "dqn (SB3)": (sb3.DQN, 1, {**REPLAY, "target_update_interval": 500}, ""),
    # rlzoo's DQN family fuses Adam by default; SB3's DQN with it too, for how much of the gap that alone closes.
    "dqn (SB3, fused Adam)": (
        sb3.DQN,
        1,
        {**REPLAY, "target_update_interval": 500, "policy_kwargs": {**REPLAY["policy_kwargs"], **FUSED}},
        "dqn (SB3)",
    ),
    # DeepQ with double and dueling off computes what SB3's DQN computes: the cost of rlzoo's machinery alone.
    "deepq (as dqn)": (
        DeepQ,
        1,
        {**REPLAY, "double": False, "dueling": False, "target_update_interval": 125},
        "dqn (SB3)",
    ),
    "ddqn": (DeepQ, 1, {**REPLAY, "target_update_interval": 125}, "dqn (SB3)"),
    "per": (DeepQ, 1, {**REPLAY, **PER, "target_update_interval": 125}, "dqn (SB3)"),
    "c51": (
        CategoricalDQN,
        1,
        {**REPLAY, "double": False, "dueling": False, "target_update_interval": 125},
        "dqn (SB3)",
    ),
    "rainbow": (CategoricalDQN, 1, {**REPLAY, **RAINBOW, "target_update_interval": 125}, "dqn (SB3)"),
    "a2c (SB3)": (sb3.A2C, 8, {"n_steps": 5}, ""),
    "acer": (ACER, 8, {"n_steps": 20}, "a2c (SB3)"),
    "acktr": (ACKTR, 8, {"n_steps": 20}, "a2c (SB3)"),
    # On Pendulum-v1: sb3-contrib's default critic [1024, 1024] against conf/algo/crossq.yaml's CPU-sized [256, 256].
    "crossq (sb3-contrib default)": (CrossQ, 1, CROSSQ, ""),
    "crossq (rlzoo default)": (
        CrossQ,
        1,
        {**CROSSQ, "policy_kwargs": {"net_arch": {"pi": [256, 256], "qf": [256, 256]}}},
        "crossq (sb3-contrib default)",
    ),
}


def steps_per_second(name: str, steps: int, seed: int = 0) -> tuple[float, float]:
    """Agent steps per wall second and per CPU second of ``learn()``."""
    make, n_envs, kwargs, _ = ALGORITHMS[name]
    env = make_vec_env("Pendulum-v1" if make is CrossQ else "CartPole-v1", n_envs=n_envs, seed=seed)
    model = make("MlpPolicy", env, seed=seed, device="cpu", **kwargs)
    wall, cpu = time.perf_counter(), time.process_time()
    model.learn(steps)
    return model.num_timesteps / (time.perf_counter() - wall), model.num_timesteps / (time.process_time() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10_000, help="agent steps per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; the fastest of each algorithm is kept")
    default = [n for n in ALGORITHMS if not n.startswith("crossq")]
    parser.add_argument("--only", nargs="*", default=default, help="algorithms to measure (names as printed)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    importlib.import_module("torch._dynamo")  # imported by the first optimizer step: paid here, not by one algorithm
    names = [n for n in ALGORITHMS if n in args.only]
    best: dict[str, float] = {}
    best_cpu: dict[str, float] = {}
    for _ in range(args.repeats):
        for name in names:
            wall, cpu = steps_per_second(name, args.steps)
            best[name], best_cpu[name] = max(best.get(name, 0.0), wall), max(best_cpu.get(name, 0.0), cpu)
    print(json.dumps({"load_average": [round(x, 2) for x in os.getloadavg()], "cores": os.cpu_count()}))
    for name in names:
        baseline = ALGORITHMS[name][3]
        row: dict[str, Any] = {"algo": name, "steps_per_s": round(best[name]), "steps_per_cpu_s": round(best_cpu[name])}
        row["vs"] = baseline or None
        row["ratio"] = round(best[name] / best[baseline], 2) if baseline in best else None
        row["cpu_ratio"] = round(best_cpu[name] / best_cpu[baseline], 2) if baseline in best else None
        print(json.dumps(row))


if __name__ == "__main__":
    main()
