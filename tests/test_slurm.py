"""Sweeps on a real Slurm cluster (``scripts/slurm_local.sh start``): a 3-job array, and a requeue that resumes.

Without a running cluster these tests skip with the reason; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from rlzoo.config import CONFIG_DIR, compose_config
from rlzoo.loggers.wandb_state import state_file
from rlzoo.multiagent.run_files import agent_returns100_files
from rlzoo.rundir import RunDir
from rlzoo.train import train
from test_exact_resume import episodes, figures, weights_hash
from test_wandb_resume import synced

TINY_SWEEP = [
    "algo=ppo",
    "env=CartPole",
    "total_timesteps=256",
    "n_envs=1",
    "algo.n_steps=32",
    "algo.batch_size=32",
    "+algo.policy_kwargs.net_arch=[16]",
    "test_episodes=2",
    "logger.formats=[csv]",
    "verbose=0",
]
USABLE_NODE_STATES = {"idle", "mix"}


def _cluster_problem() -> str | None:
    """Why no Slurm job could start now, or None when ``sinfo`` shows a node with free CPUs."""
    if shutil.which("sinfo") is None:
        return "sinfo is not installed (scripts/slurm_local.sh install)"
    try:
        done = subprocess.run(
            ["sinfo", "--noheader", "--format=%t"], capture_output=True, text=True, timeout=30, check=False
        )
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 30 s"
    if done.returncode != 0:
        return f"sinfo failed: {done.stderr.strip() or done.stdout.strip()}"
    states = set(done.stdout.split())
    if not states & USABLE_NODE_STATES:
        return f"no idle node (sinfo node states: {sorted(states) or 'none'})"
    return None


def _wait_for_a_free_node(seconds: float = 90.0) -> str | None:
    """``_cluster_problem()`` after waiting up to ``seconds`` for a node to come free (a node still completing the
    jobs of the previous test reads ``comp``)."""
    deadline = time.monotonic() + seconds
    problem = _cluster_problem()
    while problem is not None and problem.startswith("no idle node") and time.monotonic() < deadline:
        time.sleep(2.0)
        problem = _cluster_problem()
    return problem


@pytest.fixture(scope="module")
def slurm_cluster() -> None:
    problem = _wait_for_a_free_node()
    if problem is None:
        return
    message = f"no usable Slurm cluster: {problem}; start one with scripts/slurm_local.sh start"
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _job_ids(sweep_dir: Path) -> list[str]:
    """Slurm ids of the jobs this sweep submitted, from Submitit's folders: ``<array id>_<index>`` for an array,
    ``<job id>`` for a sweep of one job (an array also has a ``<array id>`` folder, holding its sbatch script)."""
    folder = sweep_dir / ".submitit"
    names = [p.name for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
    in_array = sorted(name for name in names if re.fullmatch(r"\d+_\d+", name))
    return in_array or sorted(name for name in names if name.isdigit())


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Iterator[Path]:
    """A sweep dir whose jobs are cancelled at the end, so that a failing test leaves nothing in the queue."""
    path = tmp_path / "sweep"
    yield path
    ids = _job_ids(path)
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, check=False, timeout=30)


def _sweep_command(sweep_dir: Path, *overrides: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rlzoo.train",
        "-m",
        "hardware=slurm_cpu",
        *overrides,
        f"hydra.sweep.dir={sweep_dir}",
        "hydra.launcher.timeout_min=5",
    ]


def _num_timesteps(model_zip: Path) -> int:
    """``num_timesteps`` as SB3 saved it in the model's ``data`` JSON."""
    with zipfile.ZipFile(model_zip) as archive:
        return int(json.loads(archive.read("data"))["num_timesteps"])


def _launcher_and_hardware(overrides: list[str]) -> tuple[DictConfig, DictConfig]:
    """The ``hydra.launcher`` and ``hardware`` nodes a sweep job sees, resolved (``${hydra:...}`` as in a job)."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides, return_hydra_config=True)
    previous = HydraConfig.instance().cfg
    HydraConfig.instance().set_config(cfg)
    try:
        nodes = [OmegaConf.to_container(node, resolve=True) for node in (cfg.hydra.launcher, cfg.hardware)]
    finally:
        HydraConfig.instance().cfg = previous
    launcher, hardware = (DictConfig(node) for node in nodes)
    return launcher, hardware


def test_slurm_profiles_read_site_values_from_env_and_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLZOO_SLURM_PARTITION", "cpu-long")
    monkeypatch.setenv("RLZOO_SLURM_CPUS_PER_TASK", "3")
    monkeypatch.setenv("RLZOO_SLURM_MEM_GB", "12")
    launcher, hardware = _launcher_and_hardware(["hardware=slurm_cpu", "hydra.launcher.timeout_min=7"])
    assert launcher._target_.endswith("SlurmLauncher")
    assert (launcher.partition, launcher.cpus_per_task, launcher.mem_gb) == ("cpu-long", 3, 12)
    assert launcher.timeout_min == 7  # the command line wins
    assert (launcher.max_num_timeout, launcher.signal_delay_s) == (3, 30)  # requeue on time-out, warn 30 s ahead
    assert hardware.device == "cpu" and hardware.torch_threads == 3  # threads follow the CPUs per task

    monkeypatch.delenv("RLZOO_SLURM_PARTITION")
    launcher, hardware = _launcher_and_hardware(["hardware=slurm_gpu", "hydra.launcher.cpus_per_task=2"])
    assert launcher.partition is None  # the cluster's default partition
    assert (launcher.gpus_per_node, hardware.device, hardware.torch_threads) == (1, "cuda", 2)


def test_sweep_of_three_jobs_runs_as_a_slurm_array(slurm_cluster: None, sweep_dir: Path, tmp_path: Path) -> None:
    started = time.perf_counter()
    done = subprocess.run(
        _sweep_command(sweep_dir, *TINY_SWEEP, "seed=0,1,2"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seeds = []
    for job in range(3):
        run = RunDir(sweep_dir / str(job))
        assert run.is_finished() and run.model.is_file(), f"job {job}: {sorted(p.name for p in run.path.iterdir())}"
        config = run.read_config()
        assert config.seed == job and config.hardware.torch_threads == 1
        assert json.loads(run.metrics.read_text())["train/timesteps"] >= 256
        seeds.append(config.seed)
    assert seeds == [0, 1, 2]
    # Every job ran under Slurm, as one array submitted with the profile's settings.
    ids = _job_ids(sweep_dir)
    assert len(ids) == 3 and len({job_id.split("_")[0] for job_id in ids}) == 1, ids
    (script,) = (sweep_dir / ".submitit").glob("*/*_submission.sh")
    assert {"#SBATCH --signal=USR2@30", "#SBATCH --cpus-per-task=1", "#SBATCH --time=5"} <= set(
        script.read_text().splitlines()
    )
    print(f"3-job Slurm sweep: {time.perf_counter() - started:.1f} s")


def _wait_for(condition: str, check: Callable[[], bool], process: subprocess.Popen[bytes], log: Path) -> None:
    timeout_s = 120
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        if process.poll() is not None:
            pytest.fail(f"the sweep ended (rc {process.returncode}) before {condition}:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout_s} s waiting for {condition}")


def _submitit_log(sweep_dir: Path, job_id: str) -> str:
    return "".join(path.read_text() for path in sorted((sweep_dir / ".submitit" / job_id).glob("*_log.*")))


def _signal_and_requeue(sweep_dir: Path, tmp_path: Path, total: int, overrides: list[str]) -> RunDir:
    """Launch a one-job sweep of ``overrides``, send its job USR2 once the run has a checkpoint and wait for the
    requeued job to finish; return the run (resumed once, from the checkpoint saved on the signal or a later one)."""
    run = RunDir(sweep_dir / "0")
    log = tmp_path / "sweep.log"  # a file, not a pipe: nothing reads the launcher's output until it ends
    with log.open("wb") as out:  # the child keeps its own copy of the file
        command = _sweep_command(sweep_dir, *overrides, f"total_timesteps={total}", "checkpoint_freq=2000")
        process = subprocess.Popen(command, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for("the first checkpoint", lambda: bool(run.checkpoints()), process, log)
        (job_id,) = _job_ids(sweep_dir)
        assert not run.is_finished(), f"the job finished before it could be signalled; raise total_timesteps={total}"
        signalled_at = int(run.checkpoints()[-1].name)
        subprocess.run(["scancel", "--signal=USR2", job_id], check=True, timeout=30)
        process.wait(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, log.read_text()[-3000:]
    job_log = _submitit_log(sweep_dir, job_id)
    assert "Caught signal SIGUSR2" in job_log and "Requeued job" in job_log, job_log[-3000:]
    assert run.is_finished()
    resumed_from = run.resumes()
    assert len(resumed_from) == 1 and resumed_from[0] >= signalled_at, resumed_from
    return run


def _curve_frames(path: Path) -> list[int]:
    with path.open() as stream:
        frames = [int(row["frame"]) for row in csv.DictReader(stream)]
    assert frames == sorted(frames) and len(set(frames)) == len(frames), frames  # one curve, continued
    return frames


def test_signalled_job_is_requeued_and_resumes_its_curve(slurm_cluster: None, sweep_dir: Path, tmp_path: Path) -> None:
    total = 40_000
    overrides = [
        "algo=ppo", "env=CartPole", "seed=0",  # rl-zoo3's tuned pair: 8 envs, 256 steps per rollout
        "+algo.policy_kwargs.net_arch=[16]", "test_episodes=2", "logger.formats=[csv]",
        "logger=wandb",  # offline: the requeued job must continue the same W&B run
        "verbose=0",
    ]  # fmt: skip
    run = _signal_and_requeue(sweep_dir, tmp_path, total, overrides)
    assert _num_timesteps(run.model) >= total
    frames = _curve_frames(run.returns100)
    assert frames[-1] > run.resumes()[0], frames  # episodes after the resume joined the curve
    config = run.read_config()
    assert config.seed == 0 and config.total_timesteps == total
    ids, points = synced(run)  # what `wandb sync <run dir>/wandb` sends
    assert ids == {json.loads(state_file(run).read_text())["id"]}  # the requeued job continues the same W&B run
    assert [point["_step"] for point in points] == list(range(len(points)))
    steps = [point["global_step"] for point in points]
    assert steps == sorted(steps) and len(set(steps)) == len(steps), steps  # one W&B curve, continued
    assert len(list((run.path / "wandb" / "superseded").glob("offline-run-*"))) == 1  # the signalled job's, kept


def test_a_requeued_job_ends_where_the_uninterrupted_run_ends(
    slurm_cluster: None, sweep_dir: Path, tmp_path: Path
) -> None:
    """PPO on MobileRobot (8 batched envs) signalled after its first checkpoint, requeued and resumed, ends with the
    weights, metrics (times aside), returns100.csv and monitored episodes of the same run trained here without a
    stop (``hardware=cpu``: one torch thread on the CPU, as a ``slurm_cpu`` job of one CPU)."""
    total = 12_000
    overrides = ["algo=ppo", "env=MobileRobot", "algo.n_steps=32", "algo.batch_size=64", "algo.n_epochs=2",
                 "+algo.policy_kwargs.net_arch=[16]", "test_episodes=3", "logger.formats=[csv]", "verbose=0",
                 "seed=3"]  # fmt: skip
    requeued = _signal_and_requeue(sweep_dir, tmp_path, total, overrides)
    assert requeued.resumes()[0] < total  # resumed in the middle of learning, not from the final model
    whole = RunDir(tmp_path / "whole")
    train(compose_config([*overrides, f"total_timesteps={total}", "checkpoint_freq=2000"], run_dir=whole.path))
    assert weights_hash(requeued.model) == weights_hash(whole.model)
    assert figures(requeued) == figures(whole)
    assert episodes(requeued) == episodes(whole)
    assert requeued.returns100.read_text() == whole.returns100.read_text()


def test_signalled_multiagent_job_is_requeued_and_resumes_every_learner(
    slurm_cluster: None, sweep_dir: Path, tmp_path: Path
) -> None:
    """A multi-agent run (one learner taking both seats of tic-tac-toe in turn) requeued on Slurm's warning resumes
    in the same run dir: its learner from the checkpoint saved on the signal, the seat rotation where it was, every
    curve continued."""
    pytest.importorskip("pettingzoo", reason="the [multiagent] extra: pip install -e '.[multiagent]'")
    total = 40_000
    overrides = [
        "algo=dqn", "env=pettingzoo", "env.id=pettingzoo.classic.tictactoe_v3", "multiagent=fixed_opponent", "seed=0",
        "algo.learning_starts=200", "algo.buffer_size=5000", "+algo.policy_kwargs.net_arch=[16]",
        "test_episodes=2", "logger.formats=[csv]", "verbose=0",
    ]  # fmt: skip
    run = _signal_and_requeue(sweep_dir, tmp_path, total, overrides)
    resumed_from = run.resumes()[0]
    state = json.loads((run.checkpoint(resumed_from) / "state.json").read_text())["kind"]
    assert state["seat_episode"] > 0 and "player_1" in state["key_steps"]
    assert json.loads(run.metrics.read_text())["train/timesteps"] == total
    assert _num_timesteps(run.models().learner("player_1").model) > state["key_steps"]["player_1"]  # went on from there
    for path in [run.returns100, *agent_returns100_files(run).values()]:
        frames = _curve_frames(path)
        assert total - 9 <= frames[-1] <= total and frames[-1] > resumed_from, frames  # the last finished game
