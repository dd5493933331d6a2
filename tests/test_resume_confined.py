"""A resumed run writes inside its run dir only: not in the working directory it is started from, not beside its run
dir, not in the home or temporary directory (the libraries' own caches and service logs aside)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rlzoo.rundir import RunDir
from test_exact_resume import RUNS, stop_after

# What libraries write outside any run: torch's compile cache folder (made at import) and W&B's service logs.
LIBRARY_FILES = ("tmp/torchinductor_", "home/.cache/wandb/logs/")


def files_under(*folders: Path) -> set[str]:
    """Every file and folder under ``folders``, relative to their common parent."""
    root = folders[0].parent
    return {str(path.relative_to(root)) + ("/" if path.is_dir() else "") for f in folders for path in f.rglob("*")}


def train_in(cwd: Path, env: dict[str, str], *overrides: str) -> None:
    done = subprocess.run([sys.executable, "-m", "rlzoo.train", *overrides], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_a_resumed_run_writes_only_inside_its_run_dir(tmp_path: Path) -> None:
    cwd, home, tmp, runs = (tmp_path / name for name in ("cwd", "home", "tmp", "runs"))
    for folder in (cwd, home, tmp, runs):
        folder.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "WANDB_MODE": "offline"}
    env = {k: v for k, v in env.items() if not k.startswith(("XDG_", "WANDB_DIR", "WANDB_CACHE", "WANDB_DATA"))}
    whole = runs / "whole"
    overrides = [*RUNS["sac_MobileRobot"], "verbose=0", "test_episodes=2", "logger=wandb", "seed=3"]
    train_in(cwd, env, *overrides, f"hydra.run.dir={whole}")
    stopped = stop_after(whole, runs / "stopped", int(RunDir(whole).checkpoints()[-2].name))
    before = files_under(cwd, home, tmp, runs)

    train_in(cwd, env, f"resume={stopped.path}")

    assert stopped.is_finished() and len(stopped.resumes()) == 1
    written = files_under(cwd, home, tmp, runs) - before
    outside = {path for path in written if not path.startswith(("runs/stopped/", *LIBRARY_FILES))}
    assert not outside, sorted(outside)
    assert any(path.startswith("runs/stopped/wandb/") for path in written)  # the resumed process logged to W&B
