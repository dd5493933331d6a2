"""A sweep without ``-m`` and a key the config lacks given without ``+``: one line before Hydra starts."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from rlzoo.errors import ConfigError
from rlzoo.overrides import check_overrides, hydra_overrides


@pytest.mark.parametrize("override", ["seed=1,2", "seed=range(3)", "env=CartPole,Pendulum"])
def test_a_sweep_without_multirun_is_one_line(override: str) -> None:
    with pytest.raises(ConfigError, match=r"is a sweep .*add -m / --multirun") as caught:
        check_overrides("train", [override])
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("arguments", "meant"),
    [
        (["algo.gama=0.9"], "did you mean algo.gamma?"),
        (["algo=sac", "algo.tua=0.1"], "did you mean algo.tau?"),
        (["total_timestep=5"], "did you mean total_timesteps?"),
        (["-m", "algo.gama=0.9,0.99"], "algo.gama=0.9,0.99: algo has no key gama; did you mean algo.gamma?"),
    ],
)
def test_a_missing_key_without_plus_names_the_key_meant(arguments: list[str], meant: str) -> None:
    with pytest.raises(ConfigError, match=r"to add a key, write \+") as caught:
        check_overrides("train", arguments)
    assert meant in str(caught.value) and "\n" not in str(caught.value)


def test_keys_that_exist_pass() -> None:
    check_overrides("train", ["algo=sac", "algo.tau=0.1", "seed=3", "env=Pendulum", "+algo.policy_kwargs.x=1"])
    check_overrides("train", ["-m", "seed=range(3)", "algo.gamma=0.9,0.99", "hydra.job.chdir=false"])
    check_overrides("collect", ["n_samples=10"])


def test_flags_and_their_values_are_not_overrides() -> None:
    assert hydra_overrides(["--cfg", "job", "-cn", "train", "seed=1", "-m"]) == ["seed=1"]
    assert hydra_overrides(["--help", "algo.gama=1"]) is None


# Every Hydra entrypoint, a key its config lacks, and the key meant.
TYPOS = [
    ("rlzoo.train", "algo.gama=0.9", "did you mean algo.gamma?"),
    ("rlzoo.collect", "n_sample=10", "did you mean n_samples?"),
    ("rlzoo.srl.train", "max_sample=10", "did you mean max_samples?"),
    ("rlzoo.tune", "n_trial=3", "did you mean n_trials?"),
    ("rlzoo.enjoy", "n_episode=3", "did you mean n_episodes?"),
    ("rlzoo.plot", "smoth=3", "did you mean smooth?"),
    ("rlzoo.report", "video=false", "did you mean videos?"),
    ("rlzoo.records", "stor=x", "did you mean store?"),
    ("rlzoo.pipeline", "algo.gama=0.9", "did you mean algo.gamma?"),
]


def _run_command(module: str, arguments: list[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """Run ``python -m <module> <arguments>`` in this process (the module's own ``__main__`` code); its exit line."""
    monkeypatch.setattr(sys, "argv", [module, *arguments])
    monkeypatch.setattr("rlzoo.gc_tuning.pause_for_start_up", lambda: None)  # rlzoo.train's, for the command only
    with pytest.raises(SystemExit) as exited:
        runpy.run_module(module, run_name="__main__", alter_sys=False)
    return str(exited.value.code)


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")
@pytest.mark.parametrize(("module", "typo", "meant"), TYPOS)
def test_every_entrypoint_refuses_a_key_typo_in_one_line(
    module: str, typo: str, meant: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    required = {"rlzoo.enjoy": ["run=x"], "rlzoo.plot": ["dir=x"], "rlzoo.report": ["dir=x"],
                "rlzoo.records": ["action=table"], "rlzoo.pipeline": ["experiment=srl_benchmark_small"]}  # fmt: skip
    line = _run_command(module, [*required.get(module, []), typo], monkeypatch)
    assert line.startswith(f"{module}: error: {typo}: ") and meant in line and "\n" not in line
    assert capsys.readouterr().err == "" and not any(tmp_path.iterdir())


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")
@pytest.mark.parametrize(
    ("module", "arguments", "told"),
    [
        ("rlzoo.plot", ["dir=a,b"], "add -m / --multirun"),
        ("rlzoo.pipeline", ["experiment=srl_benchmark_small", "seed=range(3)"], "write pipeline.sweep.seed=[0,1,2]"),
        ("rlzoo.pipeline", ["experiment=srl_benchmark_small", "algo.gamma=0.9,0.99"],
         "write +pipeline.sweep.algo.gamma=[0.9,0.99]"),
    ],
)  # fmt: skip
def test_a_sweep_without_multirun_says_how_the_entrypoint_sweeps(
    module: str, arguments: list[str], told: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    line = _run_command(module, arguments, monkeypatch)
    assert "is a sweep (one job per value): " in line and told in line and "\n" not in line
    assert not any(tmp_path.iterdir())


def test_the_pipeline_command_answers_a_typo_with_one_stderr_line(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[1] / "src"
    this_checkout = os.pathsep.join([str(source), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "rlzoo.pipeline", "experiment=srl_benchmark_small", "pipeline.dri=x"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": this_checkout}, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "rlzoo.pipeline: error: pipeline.dri=x: pipeline has no key dri; did you mean pipeline.dir? (to add a key, "
        "write +pipeline.dri=x)"
    ]
    assert not any(tmp_path.iterdir())
