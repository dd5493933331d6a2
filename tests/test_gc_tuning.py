"""The cyclic garbage collector in ``python -m rlzoo.train``: off while it starts up, on (start-up objects frozen)
while it trains, the previous run's objects unfrozen when a sweep's next job starts; untouched for library calls."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

import rlzoo.gc_tuning
from conftest import TINY_ALGO_RUNS, TINY_RUN, Compose
from rlzoo.train import train


@pytest.fixture
def as_the_command(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(rlzoo.gc_tuning, "_paused_by_command", False)
    rlzoo.gc_tuning.pause_for_start_up()  # what python -m rlzoo.train does first
    try:
        yield
    finally:
        gc.unfreeze()
        gc.enable()


def watch_learn(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, int]]:
    """(collector on, objects frozen) whenever an on-policy algorithm starts learning."""
    seen: list[tuple[bool, int]] = []
    learn = OnPolicyAlgorithm.learn

    def watched_learn(self: OnPolicyAlgorithm, *args: object, **kwargs: object) -> object:
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        return learn(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(OnPolicyAlgorithm, "learn", watched_learn)
    return seen


def tiny_run(compose: Compose, folder: Path) -> None:
    train(compose(["algo=a2c", *TINY_ALGO_RUNS["a2c"], *TINY_RUN], run_dir=folder))


def test_the_command_trains_with_start_up_frozen_and_a_next_job_releases_it(
    as_the_command: None, compose: Compose, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = watch_learn(monkeypatch)
    assert not gc.isenabled()
    tiny_run(compose, tmp_path / "first")
    ((enabled, frozen),) = seen
    assert enabled and frozen > 0
    assert gc.get_freeze_count() > frozen / 2  # left frozen (less what refcounting freed): the exit skips them

    tiny_run(compose, tmp_path / "second")  # a sweep's next job in the same process
    assert seen[1] == (True, 0)  # the first run's objects were unfrozen, and nothing new frozen
    assert gc.get_freeze_count() == 0


def test_a_library_call_leaves_the_collector_as_it_was(
    compose: Compose, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rlzoo.gc_tuning, "_paused_by_command", False)
    seen = watch_learn(monkeypatch)
    tiny_run(compose, tmp_path / "run")
    assert seen == [(True, 0)]
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_sweep_turns_the_collector_on_in_its_launching_process(tmp_path: Path) -> None:
    """The launching process of a sweep (joblib, Submitit: it runs no job itself) lives as long as the sweep."""
    import subprocess
    import sys

    script = (
        "import gc, sys, runpy\n"
        "from rlzoo.results.sweep import SweepSummary\n"
        "start = SweepSummary.on_multirun_start\n"
        "def check(self, config, **kwargs):\n"
        "    assert not gc.isenabled()\n"
        "    start(self, config, **kwargs)\n"
        "    print('collector on:', gc.isenabled(), flush=True)\n"
        "SweepSummary.on_multirun_start = check\n"
        "sys.argv = ['rlzoo.train', '-m', 'algo=a2c', 'env=CartPole', 'total_timesteps=8', 'algo.n_steps=8',\n"
        "            'test_episodes=0', 'checkpoint_freq=0', 'verbose=0', 'logger.formats=[csv]', 'seed=0,1',\n"
        f"            'hydra.sweep.dir={tmp_path / 'sweep'}']\n"
        "runpy.run_module('rlzoo.train', run_name='__main__')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "collector on: True" in done.stdout


FROZEN_EMULATOR = """
import atexit, sys
from rlzoo import gc_tuning
gc_tuning.pause_for_start_up()
from ale_py import ALEInterface
cycle = [ALEInterface()]
cycle.append(cycle)
del cycle
gc_tuning.collect_from_here()  # frozen with the start-up's objects, as a run's envs are
if sys.argv[1] == "without":
    atexit.unregister(gc_tuning.free_at_exit)
"""


def test_an_emulator_frozen_in_a_cycle_is_freed_before_nanobind_reports_it() -> None:
    """ale_py's nanobind bindings print ``nanobind: leaked ...`` for every emulator alive at exit; the command frees
    the frozen ones at exit (without that, the lines appear)."""
    import subprocess
    import sys

    from extras import require_extra

    require_extra("ale_py", "atari")
    stderr = {}
    for mode in ("with", "without"):
        done = subprocess.run([sys.executable, "-c", FROZEN_EMULATOR, mode], capture_output=True, text=True,
                              timeout=120, check=True)  # fmt: skip
        stderr[mode] = done.stderr
    assert "nanobind: leaked" in stderr["without"]
    assert "nanobind" not in stderr["with"]
