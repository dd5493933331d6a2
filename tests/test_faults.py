"""Every bad input or fault ends in one clear line, a non-zero exit and nothing half-written.

- A command rejected before training leaves no run dir at all (Hydra's ``.hydra/`` and log included).
- A missing optional extra names the ``pip install`` that fixes it.
- A full disk during a save names the path and the checkpoint that survived.
- A sweep with a failed job ends with ``N jobs: a done, b failed (see <summary.md>)``, not a traceback.
- A resumed run's clock (monitor ``t``, ``time/time_elapsed``) goes on from where it stopped.
"""

from __future__ import annotations

import csv
import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import TINY_ALGO_RUNS, TINY_RUN, Compose
from rlzoo import model_files
from rlzoo.errors import RunFailure
from rlzoo.rundir import RunDir
from rlzoo.train import train
from rlzoo.training.budget import show_progress

PPO = ["algo=ppo", *TINY_ALGO_RUNS["ppo"], *TINY_RUN]


# Runs ``python -m rlzoo.train <args>`` for each case in one fresh interpreter (in-process Hydra, one folder per
# case) and prints {case: [exit code or null, stderr, files left behind]} as JSON.
CLI_BATCH = """
import contextlib, io, json, os, sys
from pathlib import Path
from hydra.core.global_hydra import GlobalHydra
from rlzoo.train import main
results = {}
for case, args in json.loads(sys.argv[1]).items():
    folder = Path(case).resolve()
    folder.mkdir()
    os.chdir(folder)
    sys.argv = ["rlzoo.train", *args]
    GlobalHydra.instance().clear()
    err = io.StringIO()
    code = None
    with contextlib.redirect_stderr(err):
        try:
            main()
        except SystemExit as exit_info:
            code = exit_info.code
    results[case] = [code, err.getvalue(), sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))]
print(json.dumps(results))
"""


def run_cli(cases: dict[str, list[str]], cwd: Path) -> dict[str, tuple[object, str, list[str]]]:
    """Each case's ``python -m rlzoo.train`` in ``cwd/<case>``: (exit code or None, stderr, files left behind)."""
    result = subprocess.run([sys.executable, "-c", CLI_BATCH, json.dumps(cases)], cwd=cwd, capture_output=True,
                            text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return {case: tuple(value) for case, value in json.loads(result.stdout.strip().splitlines()[-1]).items()}


def left_behind(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


BAD_INPUT = {
    "net-arch": (["+algo.policy_kwargs.net_arch=[64,x]"], "algo.policy_kwargs.net_arch=[64, 'x'] must be layer sizes"),
    "activation": (["+algo.policy_kwargs.activation_fn=rellu"], "allowed: relu, tanh"),
    "policy-keyword": (["+algo.policy_kwargs.n_hidden=3"], "the PPO model could not be built: TypeError"),
    "frame-skip": (["+env.frame_skip=0"], "env.frame_skip=0 must be ≥ 1"),
    "episodes": (["total_episodes=-1"], "total_episodes=-1 must be ≥ 1"),
    "two-budgets": (["total_episodes=5", "total_timesteps=100"], "are two budgets; give one"),
    "seconds": (["max_train_seconds=0.5"], "max_train_seconds=0.5 must be ≥ 1"),
    "taxi-v3": (["env=gym", "env.id=Taxi-v3"], "did you mean: Taxi-v4"),
    "rejected-algo": (["algo=sac"], "SAC cannot handle the action space Discrete"),
}


@pytest.fixture(scope="module")
def bad_input_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[object, str, list[str]]]:
    return run_cli({case: overrides for case, (overrides, _) in BAD_INPUT.items()}, tmp_path_factory.mktemp("cli"))


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_is_one_line_and_leaves_no_run_dir(
    case: str, bad_input_results: dict[str, tuple[object, str, list[str]]]
) -> None:
    code, err, files = bad_input_results[case]
    message = BAD_INPUT[case][1]
    assert isinstance(code, str) and code.startswith("rlzoo.train: error: ") and message in code
    assert "Traceback" not in err
    assert files == []  # no outputs/<date>/<time>_<algo>_<env>/.hydra, no train.log


def test_activation_names_are_accepted(compose: Compose, tmp_path: Path) -> None:
    train(compose([*PPO, "+algo.policy_kwargs.activation_fn=relu", "checkpoint_freq=0"]))
    assert "activation_fn: relu" in RunDir(tmp_path / "run").config.read_text()


def test_resume_writes_no_new_output_dir(tmp_path: Path) -> None:
    (first,) = run_cli({"work": [*PPO, "total_timesteps=128"]}, tmp_path).values()
    assert first[0] is None  # no exit
    (run,) = [p.parent for p in (tmp_path / "work").glob("outputs/*/*/config.yaml")]
    RunDir(run).metrics.unlink()  # stopped after training: the test phase runs again
    results = run_cli({"resume": [f"resume={run}"], "again": [f"resume={run}"]}, tmp_path)
    assert results["resume"][0] is None and RunDir(run).is_finished()
    assert results["resume"][2] == []  # nothing written where the command ran
    code, _, files = results["again"]  # finished: refused, and nothing written
    assert isinstance(code, str) and "holds a finished run" in code and files == []


NO_EXTRAS = "import sys\nfor name in ('Box2D', 'mujoco', 'ale_py'):\n    sys.modules[name] = None\n"
MISSING = {
    "box2d": (["env=gym", "env.id=LunarLander-v3"], 'need the [box2d] extra: pip install -e ".[box2d]"'),
    "atari": (["env=atari"], 'need the [atari] extra: pip install -e ".[atari]"'),
    "mujoco": (["algo=sac", "env=HalfCheetah"], 'need the [mujoco] extra: pip install -e ".[mujoco]"'),
}


@pytest.mark.parametrize("extra", sorted(MISSING))
def test_a_missing_extra_names_its_pip_install(extra: str, tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(NO_EXTRAS)  # as if the extras were not installed
    work = tmp_path / "work"
    work.mkdir()
    overrides, message = MISSING[extra]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "rlzoo.train", *overrides], cwd=work, env=env, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and message in result.stderr
    assert left_behind(work) == []


def _disk_fills_after(saves: int, monkeypatch: pytest.MonkeyPatch) -> None:
    real_save = model_files.save_model  # checkpoints save through model_files.save_models
    calls = {"n": 0}

    def save(folder: Path, *args: object) -> None:
        calls["n"] += 1
        if calls["n"] > saves:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(folder, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(model_files, "save_model", save)


def test_a_full_disk_during_a_checkpoint_is_one_line_naming_what_survived(
    compose: Compose, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _disk_fills_after(2, monkeypatch)
    with pytest.raises(RunFailure) as failure:
        train(compose([*PPO, "total_timesteps=512", "checkpoint_freq=64"]))
    run = RunDir(tmp_path / "run")
    message = str(failure.value)
    assert f"cannot write {run.checkpoints_dir / '192'}: No space left on device" in message
    assert f"keeps checkpoint 128 ({run.checkpoint(128)}); resume={run.path} continues from it" in message
    assert [p.name for p in run.checkpoints_dir.iterdir()] == ["64", "128"] or sorted(
        p.name for p in run.checkpoints_dir.iterdir()
    ) == ["128", "64"]  # no half-written staging folder
    assert not run.model.exists() and not run.is_finished()
    monkeypatch.undo()
    assert train(compose([*PPO, "total_timesteps=512", "checkpoint_freq=64"]))["train/timesteps"] == 512
    assert run.resumes() == [128]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="mounting a tmpfs needs root")
def test_a_real_full_disk(tmp_path: Path) -> None:
    """The issue's reproduction: a 3 MB tmpfs fills up while checkpoints are saved."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("tmpfs cannot be mounted here")
    try:
        command = [sys.executable, "-m", "rlzoo.train", *PPO, "total_timesteps=4096", "checkpoint_freq=256",
                   "algo.policy_kwargs.net_arch=[256,256]", f"run_dir={disk / 'run'}"]  # fmt: skip
        result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert result.returncode == 1, result.stderr[-2000:]
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("rlzoo.train: error: cannot write ") and "No space left on device" in line
        assert "continues from it" in line and "Traceback" not in result.stderr
        assert not [p for p in (disk / "run" / "checkpoints").iterdir() if p.name.startswith(".")]
        assert not (tmp_path / "outputs").exists()  # run_dir= elsewhere: Hydra's own folder is not left behind
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_a_sweep_with_a_failed_job_ends_with_the_counts(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    command = [sys.executable, "-m", "rlzoo.train", "-m", *PPO, "total_timesteps=64,-5", f"hydra.sweep.dir={sweep_dir}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last == f"rlzoo.train: 2 jobs: 1 done, 1 failed (see {sweep_dir / 'summary.md'})"
    assert "rlzoo.train: job 1 failed: rlzoo.errors.ConfigError: total_timesteps=-5 must be ≥ 1" in result.stderr
    table = (sweep_dir / "summary.md").read_text()
    assert "| failed: rlzoo.errors.ConfigError: total_timesteps=-5 must be ≥ 1 " in table  # the whole first line
    assert (sweep_dir / "1" / "error.txt").read_text().startswith("Traceback")


def _times(run: RunDir) -> tuple[list[float], list[float]]:
    t = []
    for path in run.monitor_files():
        with path.open() as stream:
            next(stream)
            t += [float(row["t"]) for row in csv.DictReader(stream)]
    elapsed = np.genfromtxt(run.progress, delimiter=",", names=True)["timetime_elapsed"]
    return sorted(t), list(elapsed)


def test_a_resumed_run_continues_its_clock(compose: Compose, tmp_path: Path) -> None:
    overrides = [*PPO, "n_envs=1", "total_timesteps=1024", "checkpoint_freq=256", "logger.formats=[csv]"]
    train(compose(overrides))
    run = RunDir(tmp_path / "run")
    for folder in run.checkpoints():
        if int(folder.name) > 512:
            shutil.rmtree(folder)
    run.model.unlink()
    run.metrics.unlink()
    elapsed = json.loads((run.checkpoint(512) / "state.json").read_text())["elapsed_seconds"]
    assert elapsed > 0
    train(compose(overrides))
    assert run.resumes() == [512]
    with run.monitor_files()[0].open() as stream:
        next(stream)
        t = [float(row["t"]) for row in csv.DictReader(stream)]
    assert t == sorted(t) and t[-1] >= elapsed  # the monitor's t goes on, never backwards
    progress_elapsed = np.genfromtxt(run.progress, delimiter=",", names=True)["timetime_elapsed"]
    assert np.all(np.diff(progress_elapsed) >= 0) and progress_elapsed[-1] >= int(elapsed)  # SB3 logs whole seconds


def test_a_time_budget_stops_training_before_the_step_budget(compose: Compose, tmp_path: Path) -> None:
    train(compose([*PPO, "total_timesteps=100000000", "max_train_seconds=4", "checkpoint_freq=0"]))
    metrics = json.loads(RunDir(tmp_path / "run").metrics.read_text())
    assert 0 < metrics["train/timesteps"] < 1_000_000  # stopped by the clock, far short of the step budget
    assert 4.0 <= metrics["time/train_seconds"] < 60.0  # the clock stopped it (under load too)
    assert metrics["test/episodes"] == 2  # the test episodes still run after a time budget


def test_progress_bar_on_a_terminal_only(
    compose: Compose, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert show_progress("auto") is False  # pytest's stderr is not a terminal
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert show_progress("auto") is True and show_progress(False) is False
    train(compose([*PPO, "progress_bar=true", "checkpoint_freq=0"]))
    err = capsys.readouterr().err
    assert "192/192" in err and "steps/s" in err
