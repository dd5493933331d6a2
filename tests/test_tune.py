"""``rlzoo.tune``: a tiny study end to end, pruning that stops training, two workers on one journal, resume.

Trials are tiny (PPO on CartPole, 2 envs, 32-step rollouts, a 16-unit net, a few hundred steps). Without the [tune]
extra these tests skip with the pip command that installs it; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import csv
import json
import multiprocessing
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from extras import require_extra
from rlzoo.config import compose_config
from rlzoo.errors import ConfigError
from rlzoo.rundir import RunDir
from rlzoo.train import train

optuna = require_extra("optuna", "tune")

from rlzoo.tune import pruning, study  # noqa: E402  (after the extra check)
from rlzoo.tune.outputs import TRIALS_CSV, tuned_pair_path  # noqa: E402
from rlzoo.tune.settings import TuneSettings  # noqa: E402
from rlzoo.tune.worker import tune  # noqa: E402
from test_slurm import _job_ids, slurm_cluster  # noqa: E402, F401  (the fixture: a running cluster, or a skip)

BUDGET = 256
TINY_STUDY = [
    "algo=ppo",
    "env=CartPole",
    "n_envs=2",
    "+algo.policy_kwargs.net_arch=[16]",
    "~search_space.algo.policy_kwargs",
    "search_space.algo.n_steps.choices=[32]",
    "search_space.algo.n_epochs.choices=[1,2]",
    f"tune.budget={BUDGET}",
    "tune.eval_freq=64",
    "tune.eval_episodes=2",
    "tune.export=false",
    "tune.plots=false",
    "checkpoint_freq=0",
    "verbose=0",
    "logger.formats=[csv]",
]


def compose_tune(tmp_path: Path, *overrides: str) -> DictConfig:
    """The tune config of ``python -m rlzoo.tune <TINY_STUDY> <overrides>`` with the study in ``tmp_path/study``."""
    return compose_config(
        [*TINY_STUDY, f"tune.dir={tmp_path / 'study'}", *overrides], run_dir=tmp_path / "hydra", config_name="tune"
    )


def tune_study(tmp_path: Path, *overrides: str) -> Any:
    """Run one worker of the tiny study quietly; return its :class:`~rlzoo.tune.worker.TuneResult`."""
    return tune(compose_tune(tmp_path, *overrides), log=lambda _: None)


def read_trials(study_dir: Path) -> list[dict[str, str]]:
    with (study_dir / TRIALS_CSV).open() as stream:
        return list(csv.DictReader(stream))


def test_tiny_study_end_to_end(tmp_path: Path) -> None:
    result = tune(compose_tune(tmp_path, "n_trials=3", "tune.pruner=none", "tune.plots=true"), log=lambda _: None)
    study_dir = tmp_path / "study"

    rows = read_trials(study_dir)
    assert [row["number"] for row in rows] == ["0", "1", "2"]
    assert {row["state"] for row in rows} == {"COMPLETE"}
    for row in rows:
        run = RunDir(Path(row["run_dir"]))
        assert run.path == study_dir / "trials" / row["number"]
        assert run.is_finished() and run.model.is_file() and run.returns100.is_file()  # a normal run dir
        metrics = run.read_metrics()
        assert metrics["train/timesteps"] >= BUDGET and float(row["value"]) == metrics["test/mean_return"]
        assert run.read_config().algo.n_epochs == int(row["algo.n_epochs"])  # the sampled value trained
        trial = json.loads((run.path / "trial.json").read_text())
        assert trial["state"] == "COMPLETE" and sorted(map(int, trial["intermediate"])) == [64, 128, 192]
    assert result.files.best is not None
    best = max(rows, key=lambda row: float(row["value"]))
    assert result.files.best.number == int(best["number"])

    # The best trial as a tuned pair that rlzoo.train composes and trains with.
    (pair,) = result.files.pairs
    assert pair == tuned_pair_path(study_dir / "conf", "ppo_CartPole")
    cfg = compose_config(
        [
            "algo=ppo",
            "env=CartPole",
            f"hydra.searchpath=[file://{study_dir / 'conf'}]",
            "algo_env=tuned/ppo_CartPole",
            "test_episodes=1",
            "verbose=0",
            "logger.formats=[csv]",
        ],
        run_dir=tmp_path / "retrain",
    )
    assert cfg.algo.n_epochs == int(best["algo.n_epochs"])
    assert cfg.algo.learning_rate == float(best["algo.learning_rate"])
    assert (cfg.total_timesteps, cfg.n_envs, cfg.algo.policy_kwargs.net_arch) == (BUDGET, 2, [16])
    assert train(cfg)["train/timesteps"] >= BUDGET
    assert result.files.usage.endswith(f"'hydra.searchpath=[file://{study_dir / 'conf'}]' algo_env=tuned/ppo_CartPole")

    names = {path.name for path in result.files.plots}
    assert {"optimization_history.png", "optimization_history.html", "parallel_coordinate.png"} <= names
    assert all(path.stat().st_size > 1000 for path in result.files.plots)
    assert (study_dir / "plots" / "plotly.min.js").is_file()  # the HTML plots work offline


def test_pruned_trial_stops_training_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Scripted evaluations: trial 0 scores 100 at every step, later trials 1; the real median pruner (after one
    # complete trial, no warm-up) then prunes trial 1 at its first intermediate evaluation.
    def scripted(self: pruning.EvaluateAndPrune) -> float:
        return 100.0 if self.trial.number == 0 else 1.0  # type: ignore[attr-defined]

    monkeypatch.setattr(pruning.EvaluateAndPrune, "evaluate", scripted)
    cfg = compose_tune(tmp_path, "n_trials=2", "tune.pruner=median", "tune.n_startup_trials=1", "tune.warmup_steps=0")
    result = tune(cfg, log=lambda _: None)

    complete, pruned = result.outcomes
    assert complete.state.name == "COMPLETE" and complete.steps >= BUDGET
    assert pruned.state.name == "PRUNED" and pruned.steps == 64  # stopped at the first evaluation, not at the budget
    rows = read_trials(tmp_path / "study")
    assert (rows[1]["state"], rows[1]["steps"], rows[1]["last_eval"]) == ("PRUNED", "64", "1.0")
    run = RunDir(tmp_path / "study" / "trials" / "1")
    assert run.read_metrics()["train/timesteps"] == 64  # its run dir is finished, at the steps it reached
    assert json.loads((run.path / "trial.json").read_text())["intermediate"] == {"64": 1.0}


def test_failed_trial_is_recorded_and_the_study_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def diverging(self: pruning.EvaluateAndPrune) -> float:
        return float("nan") if self.trial.number == 0 else 5.0  # type: ignore[attr-defined]

    monkeypatch.setattr(pruning.EvaluateAndPrune, "evaluate", diverging)
    result = tune(compose_tune(tmp_path, "n_trials=2"), log=lambda _: None)

    failed, complete = result.outcomes
    assert failed.state.name == "FAIL" and "FloatingPointError" in failed.error
    assert complete.state.name == "COMPLETE"
    rows = read_trials(tmp_path / "study")
    assert rows[0]["state"] == "FAIL" and "returned nan" in rows[0]["error"]
    assert "FloatingPointError" in RunDir(tmp_path / "study" / "trials" / "0").error.read_text()


def _worker(overrides: list[str], tmp: str, launch: str, barrier: Any) -> None:
    import torch

    torch.set_num_threads(1)
    cfg = compose_tune(Path(tmp), *overrides)
    barrier.wait(timeout=120)  # both workers open the study and ask for trials at the same moment
    tune(cfg, launch=launch, log=lambda _: None)


def test_two_concurrent_workers_share_one_journal(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    overrides = ["n_trials=4", "tune.workers=2", "tune.pruner=none"]
    workers = [
        context.Process(target=_worker, args=([*overrides, f"tune.worker={w}"], str(tmp_path), "launch-1", barrier))
        for w in range(2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert [worker.exitcode for worker in workers] == [0, 0]

    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "study" / "study.journal"))
    )
    trials = optuna.load_study(study_name="ppo_CartPole", storage=storage).get_trials()
    assert [t.number for t in trials] == [0, 1, 2, 3]  # n_trials in all, none lost, none twice
    assert {t.state.name for t in trials} == {"COMPLETE"}
    assert len({t.user_attrs["worker"]["pid"] for t in trials}) == 2  # both workers wrote to the journal
    assert [row["number"] for row in read_trials(tmp_path / "study")] == ["0", "1", "2", "3"]
    assert all(RunDir(tmp_path / "study" / "trials" / str(n)).is_finished() for n in range(4))


def test_resume_continues_numbering_and_replaces_lost_trials(tmp_path: Path) -> None:
    tune(compose_tune(tmp_path, "n_trials=2", "tune.pruner=none"), log=lambda _: None)

    # A worker killed mid-trial leaves a running trial behind.
    storage = study._storage(tmp_path / "study" / "study.journal")
    stale = optuna.load_study(study_name="ppo_CartPole", storage=storage)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    trial = stale.ask()
    trial.set_user_attr(study.WORKER, {"host": socket.gethostname(), "pid": int(dead.stdout)})
    trial.set_user_attr(study.HEARTBEAT, 0.0)

    messages: list[str] = []
    result = tune(compose_tune(tmp_path, "n_trials=3", "tune.resume=true", "tune.pruner=none"), log=messages.append)
    assert any("trials 2 were lost" in m for m in messages), messages
    assert [o.number for o in result.outcomes] == [3]  # numbering goes on; the lost trial is replaced
    rows = read_trials(tmp_path / "study")
    assert [(row["number"], row["state"]) for row in rows] == [
        ("0", "COMPLETE"),
        ("1", "COMPLETE"),
        ("2", "LOST"),
        ("3", "COMPLETE"),
    ]
    # A study that holds n_trials runs nothing more.
    again = tune(compose_tune(tmp_path, "n_trials=3", "tune.resume=true", "tune.pruner=none"), log=lambda _: None)
    assert again.outcomes == []


def _params(trials: list[Any]) -> list[tuple[Any, ...]]:
    return [tuple(sorted(t.params.items())) for t in trials]


def test_a_killed_two_worker_study_resumes_without_repeats(tmp_path: Path) -> None:
    """Two workers are killed (SIGKILL) while trials run; the resumed study finishes n_trials without training any
    parameter set twice (before: resumed workers drew the seeded start-up samples again), numbered right."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    overrides = ["n_trials=6", "tune.workers=2", "tune.pruner=none", "tune.sampler=tpe"]
    workers = [
        context.Process(target=_worker, args=([*overrides, f"tune.worker={w}"], str(tmp_path), "launch-1", barrier))
        for w in range(2)
    ]
    for worker in workers:
        worker.start()
    journal = tmp_path / "study" / "study.journal"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # kill once 2 trials are done and another one is training
        time.sleep(0.2)
        if not journal.is_file():
            continue
        trials = optuna.load_study(study_name="ppo_CartPole", storage=study._storage(journal)).get_trials()
        states = [t.state.name for t in trials]
        if states.count("COMPLETE") >= 2 and "RUNNING" in states:
            break
    for worker in workers:
        worker.kill()
        worker.join(timeout=30)
    killed = optuna.load_study(study_name="ppo_CartPole", storage=study._storage(journal)).get_trials()
    assert any(t.state.name == "RUNNING" for t in killed), "the workers were not killed mid-trial"

    messages: list[str] = []
    result = tune(compose_tune(tmp_path, "n_trials=6", "tune.resume=true", "tune.pruner=none"), log=messages.append)
    trials = optuna.load_study(study_name="ppo_CartPole", storage=study._storage(journal)).get_trials()
    finished = [t for t in trials if t.state.name == "COMPLETE"]
    assert len(finished) == 6 and study.counted(result.study) == 6
    assert len(set(_params(finished))) == 6, "two finished trials share their parameters"
    positions = [m.split(": ")[-1] for m in messages if " of 6 (number " in m]
    assert positions and all(int(p.split()[1]) <= 6 for p in positions), messages  # never "trial 7 of 6"
    assert positions[-1].startswith("trial 6 of 6")
    rows = read_trials(tmp_path / "study")
    assert {row["state"] for row in rows} <= {"COMPLETE", "LOST", "DUPLICATE"}
    assert sum(row["state"] == "COMPLETE" for row in rows) == 6


def test_duplicates_are_skipped_and_recorded_until_the_space_is_used_up(tmp_path: Path) -> None:
    """A space of two parameter sets (n_epochs 1 or 2): the third trial cannot be drawn without a repeat."""
    dropped = ("batch_size", "gamma", "gae_lambda", "learning_rate", "ent_coef", "clip_range", "max_grad_norm")
    small = [f"~search_space.algo.{key}" for key in dropped]
    tune(compose_tune(tmp_path, "n_trials=2", "tune.pruner=none", *small), log=lambda _: None)
    with pytest.raises(ConfigError, match=r"samples in a row repeated them: the search space has fewer parameter sets"):
        tune(compose_tune(tmp_path, "n_trials=3", "tune.resume=true", "tune.pruner=none", *small), log=lambda _: None)
    rows = read_trials(tmp_path / "study")
    complete = [row for row in rows if row["state"] == "COMPLETE"]
    assert sorted(row["algo.n_epochs"] for row in complete) == ["1", "2"]
    duplicates = [row for row in rows if row["state"] == "DUPLICATE"]
    assert duplicates and all(row["error"] in ("repeats trial 0", "repeats trial 1") for row in duplicates)
    assert not any((tmp_path / "study" / "trials" / row["number"]).exists() for row in duplicates)  # not trained


def test_fail_lost_trials_keeps_live_workers_trials(tmp_path: Path) -> None:
    cfg = compose_tune(tmp_path, "n_trials=1", f"tune.storage={tmp_path / 'x.journal'}")
    settings = TuneSettings.from_values(OmegaConf.to_container(cfg, resolve=True))  # type: ignore[arg-type]
    shared = optuna.create_study(storage=study._storage(tmp_path / "x.journal"), study_name="s")
    drawn = study.next_trial(shared, settings, lambda trial: {"x": trial.suggest_float("x", 0.0, 1.0)})
    assert drawn is not None
    live, _ = drawn
    assert study.fail_lost_trials(shared) == []  # this process is alive and its heartbeat is fresh
    assert study.fail_lost_trials(shared, now=study.time.time() + study.STALE_AFTER_S + 1) == [live.number]
    assert study.counted(shared) == 0


def test_a_trial_asked_but_not_yet_marked_is_not_lost(tmp_path: Path) -> None:
    # Another worker's trial between study.ask() and its worker/heartbeat attributes (the race CI once hit).
    shared = optuna.create_study(storage=study._storage(tmp_path / "x.journal"), study_name="s")
    fresh = shared.ask()
    assert study.fail_lost_trials(shared) == []
    assert study.fail_lost_trials(shared, now=study.time.time() + study.STALE_AFTER_S + 1) == [fresh.number]


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("n_trials=0", "rlzoo.tune: error: n_trials=0 must be ≥ 1"),
        ("tune.workers=2", "rlzoo.tune: error: tune.workers=2 runs one job per worker: add -m (with"),
    ],
)
def test_cli_bad_input_is_one_line(argument: str, message: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rlzoo.tune", "algo=ppo", "env=CartPole", argument, f"tune.dir={tmp_path / 's'}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(message), done.stderr[-2000:]
    assert not (tmp_path / "s").exists()


@pytest.mark.usefixtures("slurm_cluster")
def test_two_slurm_workers_share_one_study(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    command = [
        sys.executable,
        "-m",
        "rlzoo.tune",
        "-m",
        "hardware=slurm_cpu",
        "tune.workers=2",
        *TINY_STUDY,
        "n_trials=6",
        "tune.budget=2048",
        "tune.eval_freq=512",
        "tune.pruner=none",
        f"tune.dir={tmp_path / 'study'}",
        f"hydra.sweep.dir={sweep}",
        "hydra.launcher.timeout_min=5",
    ]
    try:
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    finally:
        ids = _job_ids(sweep)
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, check=False, timeout=30)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(ids) == 2 and len({job_id.split("_")[0] for job_id in ids}) == 1, ids  # one array of two jobs

    storage = study._storage(tmp_path / "study" / "study.journal")
    trials = optuna.load_study(study_name="ppo_CartPole", storage=storage).get_trials()
    assert [t.number for t in trials] == list(range(6)) and {t.state.name for t in trials} == {"COMPLETE"}
    assert len({t.user_attrs["worker"]["pid"] for t in trials}) == 2  # both Slurm jobs wrote to the journal
    assert [row["state"] for row in read_trials(tmp_path / "study")] == ["COMPLETE"] * 6
