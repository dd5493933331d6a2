"""Learner speed: SB3 (torch) against SBX (JAX, ``algo=sbx_*``) on MobileRobot, in the same run, alternating.

Each case trains the same env and representation with the same hyperparameters; only the ``algo`` option differs:

* ``sac``: sac / sbx_sac, continuous actions, absolute ground truth, [64, 64] nets, batch 64 (the tuned pairs);
* ``td3``, ``crossq``: td3 / sbx_td3 and crossq / sbx_crossq with the same env, nets and batch (CrossQ is also
  compared with SB3's SAC: the goal is SBX CrossQ at least as fast);
* ``dqn``: dqn / sbx_dqn, discrete actions, [64, 64] nets, batch 64;
* ``ppo``: ppo / sbx_ppo, 8 batched envs, n_steps 256, batch 256 (ppo_MobileRobot's settings), ground truth;
* ``ppo_pixels``: the same on 64 x 64 rendered images (NatureCNN).

Speed (default): every measurement is a fresh child process, one thread (torch threads 1; XLA's CPU client with one
intra-op thread, ``--xla-threads``), ``--steps`` agent steps of ``model.learn`` on the run's own plan and builder
(:class:`rlzoo.training.build.RunBuilder`: the envs, normalisation and model ``train`` uses). Measurements
alternate SB3, SBX, SB3, ... for ``--repeats`` rounds; printed per case: steps/s over the whole ``learn()`` (JAX
compilation included), steady steps/s over its second half, the time from launch to the first training step
(imports, plan, envs, model, first action), the SBX/SB3 ratio of medians and the issue's goal.

Returns (``--returns``): ``python -m rlzoo.train`` itself for each option and seed at the case's fixed budget
(``env.random_target=true``, 100 test episodes), SB3 and SBX side by side: mean test return and wall seconds.

Headline (``--headline``): the README's ``python -m rlzoo.train algo=sac env=MobileRobot`` as a user types it (its
tuned pair: 12k steps, then 100 deterministic test episodes) and ``algo=sbx_sac``, each seed, alternating: mean
test return, wall and CPU seconds of the whole command (start-up and test episodes included). Start-up (always
printed first): the wall time of ``python -m rlzoo.train algo=sac env=MobileRobot --cfg job``, median of 5.

    python benchmarks/learner_speed.py                                  # speed, all cases, 3 repeats (~30 min)
    python benchmarks/learner_speed.py --cases sac crossq --repeats 1   # a subset
    python benchmarks/learner_speed.py --returns --cases sac ppo        # returns at the budget, 3 seeds (~25 min)
    python benchmarks/learner_speed.py --headline                       # the README's headline, 3 seeds (~25 min)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROBOT = ["env=MobileRobot", "env.random_target=true"]
SMALL_OFF_POLICY = ["env.relative_ground_truth=false", "algo.batch_size=64", "+algo.policy_kwargs.net_arch=[64,64]"]
PPO_SETTINGS = ["n_envs=8", "vec_env=batched", "algo.n_steps=256", "algo.batch_size=256"]
PIXELS = ["srl_model=raw_pixels", "srl_model.height=64", "srl_model.width=64"]
ONE_XLA_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"  # what rlzoo sets by default


@dataclass(frozen=True)
class Case:
    """SB3's and SBX's option for one algorithm, the overrides both get, the speed steps and the returns budget."""

    sb3: str
    sbx: str
    overrides: tuple[str, ...]
    steps: int
    budget: int
    goal: float  # SBX steps/s over SB3 steps/s


CASES = {
    "sac": Case("sac", "sbx_sac", (*ROBOT, *SMALL_OFF_POLICY), 10_000, 50_000, 2.5),
    "td3": Case("td3", "sbx_td3", (*ROBOT, *SMALL_OFF_POLICY), 10_000, 50_000, 1.0),
    "crossq": Case("crossq", "sbx_crossq", (*ROBOT, *SMALL_OFF_POLICY), 10_000, 50_000, 1.0),
    "dqn": Case("dqn", "sbx_dqn", (*ROBOT, "algo.batch_size=64", "+algo.policy_kwargs.net_arch=[64,64]"), 20_000,
                100_000, 1.5),
    "ppo": Case("ppo", "sbx_ppo", (*ROBOT, *PPO_SETTINGS), 40_960, 250_000, 1.5),
    "ppo_pixels": Case("ppo", "sbx_ppo", (*ROBOT, *PPO_SETTINGS, *PIXELS), 8192, 1_000_000, 1.5),
}  # fmt: skip


def child(option: str, overrides: list[str], steps: int, launched: float) -> dict[str, Any]:
    """In the child process: plan and build the run as ``train`` does, then time ``steps`` steps of ``learn()``."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.utils import set_random_seed

    from rlzoo.config import compose_config
    from rlzoo.training.build import RunBuilder
    from rlzoo.training.plan import plan_run

    class Clock(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.marks: list[tuple[int, float]] = []

        def _on_step(self) -> bool:
            self.marks.append((self.num_timesteps, time.time()))
            return True

    with tempfile.TemporaryDirectory(prefix="learner_speed_") as folder:
        cfg = compose_config([f"algo={option}", *overrides, "verbose=0"], run_dir=Path(folder) / "run")
        plan = plan_run(cfg, run_dir_state=False)
        build = RunBuilder(plan)
        plan.hardware.apply()
        set_random_seed(plan.seed)
        venv = build.training_env()
        normalizer = build.normalizer(venv)
        model = build.model(normalizer or venv, normalizer)
        clock = Clock()
        started, cpu_started = time.time(), time.process_time()
        model.learn(steps, callback=clock)
        ended, cpu_ended = time.time(), time.process_time()
        venv.close()
    first, (last_steps, _) = clock.marks[0][1], clock.marks[-1]
    half_steps, half = next(m for m in clock.marks if m[0] >= last_steps // 2)
    return {
        "algo": type(model).__module__.split(".")[0] + "." + type(model).__name__,
        "steps": model.num_timesteps,
        "steps_per_s": model.num_timesteps / (ended - started),
        "steady_steps_per_s": (last_steps - half_steps) / (ended - half),
        "cpu_steps_per_s": model.num_timesteps / (cpu_ended - cpu_started),  # per CPU second of all its threads
        "first_step_s": first - launched,
        "learn_s": ended - started,
    }


def run_child(option: str, case: Case, steps: int, xla_threads: str) -> dict[str, Any]:
    """One speed measurement in a fresh process (its imports and JAX compilation included)."""
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    env["XLA_FLAGS"] = ONE_XLA_THREAD if xla_threads == "one" else ""  # set: rlzoo keeps a user's XLA_FLAGS
    spec = json.dumps({"option": option, "overrides": list(case.overrides), "steps": steps, "launched": time.time()})
    proc = subprocess.run(
        [sys.executable, __file__, "--child", spec], env=env, capture_output=True, text=True, check=False
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        sys.exit(f"{option} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").is_file() else "?"


def speed(cases: list[str], repeats: int, steps_scale: float, xla_threads: str) -> dict[str, Any]:
    """Alternate SB3 and SBX for every case; print and return the medians and ratios."""
    results: dict[str, Any] = {}
    for name in cases:
        case, runs = CASES[name], {"sb3": [], "sbx": []}  # type: ignore[var-annotated]
        steps = max(int(case.steps * steps_scale), 1)
        for repeat in range(repeats):
            for side, option in (("sb3", case.sb3), ("sbx", case.sbx)):
                run = run_child(option, case, steps, xla_threads) | {"load": load()}
                runs[side].append(run)
                print(
                    f"[{name} {repeat + 1}/{repeats}] {option:11s} {run['steps_per_s']:8.0f} steps/s "
                    f"(steady {run['steady_steps_per_s']:6.0f}, per CPU s {run['cpu_steps_per_s']:6.0f})  "
                    f"first step after {run['first_step_s']:5.1f} s  "
                    f"load {run['load']}",
                    flush=True,
                )
        keys = ("steps_per_s", "steady_steps_per_s", "cpu_steps_per_s", "first_step_s")
        med = {side: {k: statistics.median(r[k] for r in rs) for k in keys} for side, rs in runs.items()}
        results[name] = {"runs": runs, "medians": med, "ratio": med["sbx"]["steps_per_s"] / med["sb3"]["steps_per_s"]}
    print(f"\nsteps/s, medians of {repeats} (one thread each; load at the end {load()}):")
    print(f"{'case':11s} {'SB3':>8s} {'SBX':>8s} {'SBX/SB3':>8s} {'steady':>7s} {'per CPU s':>9s} {'goal':>6s}  "
          "first step SB3 / SBX")  # fmt: skip
    for name, result in results.items():
        med, case = result["medians"], CASES[name]
        steady = med["sbx"]["steady_steps_per_s"] / med["sb3"]["steady_steps_per_s"]
        cpu = med["sbx"]["cpu_steps_per_s"] / med["sb3"]["cpu_steps_per_s"]
        met = "met" if result["ratio"] >= case.goal else "NOT met"
        print(
            f"{name:11s} {med['sb3']['steps_per_s']:8.0f} {med['sbx']['steps_per_s']:8.0f} {result['ratio']:7.2f}x "
            f"{steady:6.2f}x {cpu:8.2f}x {case.goal:5.1f}x  {med['sb3']['first_step_s']:5.1f} s / "
            f"{med['sbx']['first_step_s']:5.1f} s  ({met})"
        )
    if "crossq" in results and "sac" in results:
        ratio = results["crossq"]["medians"]["sbx"]["steps_per_s"] / results["sac"]["medians"]["sb3"]["steps_per_s"]
        print(f"SBX CrossQ / SB3 SAC: {ratio:.2f}x (goal >= 1: {'met' if ratio >= 1 else 'NOT met'})")
    return results


def train_command(overrides: list[str]) -> dict[str, Any]:
    """Run ``python -m rlzoo.train <overrides>`` in a temporary run dir; :return: its mean test return and steps, the
    command's wall and CPU seconds (start-up and test episodes included) and the load average before it."""
    with tempfile.TemporaryDirectory(prefix="learner_train_") as folder:
        run_dir = Path(folder) / "run"
        command = [sys.executable, "-m", "rlzoo.train", *overrides, f"hydra.run.dir={run_dir}"]
        before, started = load(), time.perf_counter()
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        wall, cpu_after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode:
            sys.exit(f"{' '.join(command)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        metrics = json.loads((run_dir / "metrics.json").read_text())
    cpu = cpu_after.ru_utime + cpu_after.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime
    return {"mean_return": metrics["test/mean_return"], "steps": metrics["train/timesteps"], "wall_s": wall,
            "cpu_s": cpu, "load": before}  # fmt: skip


def returns(cases: list[str], seeds: list[int]) -> dict[str, Any]:
    """``python -m rlzoo.train`` at each case's budget for every seed, SB3 and SBX alternating."""
    results: dict[str, Any] = {}
    for name in cases:
        case = CASES[name]
        rows: dict[str, list[dict[str, Any]]] = {case.sb3: [], case.sbx: []}
        for seed in seeds:
            for option in (case.sb3, case.sbx):
                budget = [f"total_timesteps={case.budget}", f"seed={seed}", "verbose=0"]
                row = {"seed": seed, **train_command([f"algo={option}", *case.overrides, *budget])}
                rows[option].append(row)
                print(f"[{name}] {option:11s} seed {seed}: test return {row['mean_return']:7.2f} "
                      f"(100 episodes)  wall {row['wall_s']:6.1f} s  load {row['load']}", flush=True)  # fmt: skip
        results[name] = rows
    print(f"\nmean test return at the budget (env.random_target=true), seeds {seeds}:")
    for name, rows in results.items():
        for option, runs in rows.items():
            means = [r["mean_return"] for r in runs]
            walls = [r["wall_s"] for r in runs]
            print(f"{name:11s} {option:11s} {CASES[name].budget:>9d} steps  return {statistics.mean(means):7.2f} "
                  f"({' / '.join(f'{m:.1f}' for m in means)})  wall {statistics.median(walls):6.1f} s")  # fmt: skip
    return results


def start_up(repeats: int = 5) -> float:
    """Median wall seconds of ``python -m rlzoo.train algo=sac env=MobileRobot --cfg job`` (compose and print)."""
    command = [sys.executable, "-m", "rlzoo.train", "algo=sac", "env=MobileRobot", "--cfg", "job"]
    walls = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        walls.append(time.perf_counter() - started)
    print(f"start-up: {' '.join(command[1:])}: median {statistics.median(walls):.2f} s of {repeats}", flush=True)
    return statistics.median(walls)


def headline(options: list[str], seeds: list[int]) -> dict[str, Any]:
    """The README's headline command per option and seed, as typed (no overrides but the seed and run dir)."""
    rows: dict[str, list[dict[str, Any]]] = {option: [] for option in options}
    for seed in seeds:
        for option in options:
            row = {"seed": seed, **train_command([f"algo={option}", "env=MobileRobot", f"seed={seed}"])}
            rows[option].append(row)
            print(f"[headline] algo={option:8s} seed {seed}: test return {row['mean_return']:7.2f} (100 episodes)  "
                  f"wall {row['wall_s']:6.1f} s  cpu {row['cpu_s']:6.1f} s  load {row['load']}",
                  flush=True)  # fmt: skip
    for option, runs in rows.items():
        means = [r["mean_return"] for r in runs]
        print(f"headline algo={option:8s} return {statistics.mean(means):7.2f} "
              f"({' / '.join(f'{m:.1f}' for m in means)})  wall max {max(r['wall_s'] for r in runs):6.1f} s  "
              f"cpu max {max(r['cpu_s'] for r in runs):6.1f} s")  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), help="default: all (speed), sac ppo (returns)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of SB3, SBX per case (speed)")
    parser.add_argument("--steps-scale", type=float, default=1.0, help="multiply each case's speed steps")
    parser.add_argument(
        "--xla-threads",
        choices=("one", "default"),
        default="one",
        help="XLA CPU intra-op threads (one: rlzoo's default)",
    )
    parser.add_argument("--returns", action="store_true", help="test returns at each case's budget instead of speed")
    parser.add_argument("--headline", action="store_true", help="the README's headline command, SB3 and SBX")
    parser.add_argument("--options", nargs="+", default=["sac", "sbx_sac"], help="algo options of --headline")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("bench_out/learner_speed.json"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        print("RESULT " + json.dumps(child(spec["option"], spec["overrides"], spec["steps"], spec["launched"])))
        return
    print(f"load at the start: {load()}", flush=True)
    results: dict[str, Any] = {"start_up_s": start_up()}
    if args.headline:
        results |= headline(args.options, args.seeds)
    elif args.returns:
        results |= returns(args.cases or ["sac", "ppo"], args.seeds)
    else:
        results |= speed(args.cases or list(CASES), args.repeats, args.steps_scale, args.xla_threads)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"raw results: {args.out}")


if __name__ == "__main__":
    main()
