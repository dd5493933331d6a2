"""``--help`` of every entrypoint prints its help and exits 0.

Each runs as the command a user types, in a process of its own: Hydra configures logging for ``--help``, which closes
every logging handler made before it, and a handler that an earlier test made (JAX's absl, W&B, Selenium) on pytest's
captured stderr would take that stream down with it in-process.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

ENTRYPOINTS = ["rlzoo.train", "rlzoo.collect", "rlzoo.srl.train", "rlzoo.srl.evaluate", "rlzoo.enjoy", "rlzoo.plot",
               "rlzoo.report", "rlzoo.tune", "rlzoo.pipeline", "rlzoo.records"]  # fmt: skip
TRAIN_GROUPS = {"algo", "env", "srl_model", "hardware", "logger", "algo_env", "experiment", "multiagent"}
# The config groups each entrypoint takes: its --help lists these and no other (the pipeline names train's in words).
OWN_GROUPS = {"rlzoo.train": TRAIN_GROUPS, "rlzoo.tune": TRAIN_GROUPS | {"search_space"},
              "rlzoo.collect": {"env", "collect_policy"}, "rlzoo.srl.train": {"srl_model"}}  # fmt: skip


def _help(module: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *arguments, "--help"], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("module", ENTRYPOINTS)
def test_help_exits_0_with_help(module: str) -> None:
    done = _help(module)
    assert done.returncode == 0, done.stderr
    assert "== Config ==" in done.stdout or "python -m rlzoo.pipeline experiment=<name>" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert done.stdout.startswith(f"python -m {module} "), done.stdout.splitlines()[0]  # its own command
    _, _, groups = done.stdout.partition("== Configuration groups (group=option) ==\n")
    listed = {line.split(":", 1)[0] for line in groups.split("\n\n", 1)[0].splitlines()}
    assert listed == OWN_GROUPS.get(module, set())


def test_pipeline_help_names_the_experiments() -> None:
    done = _help("rlzoo.pipeline")
    assert "experiments: srl_benchmark, srl_benchmark_small" in done.stdout
    with_experiment = _help("rlzoo.pipeline", "experiment=srl_benchmark_small")
    assert with_experiment.returncode == 0 and "Traceback" not in with_experiment.stdout + with_experiment.stderr
