"""The files a multi-agent run keeps in its run dir beside the core's (:mod:`rlzoo.rundir`)::

    returns100/<agent>.csv    the returns100 curve of each agent key (``returns100.csv``: the learners' return)
    test_returns_agents.csv   the test episodes' returns per agent key: episode,<agent>,... (``test_returns.csv``:
                              the learners')

The learners' models (``models/<learner>/``, ``models.json``) are the model files' (:mod:`rlzoo.model_files`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rlzoo.files import atomic_write_text
from rlzoo.rundir import RunDir

AGENT_RETURNS100 = "returns100"
AGENT_TEST_RETURNS = "test_returns_agents.csv"
# The logs a multi-agent run appends to beside the core's, which a resume cuts back (RunDir.kind_logs).
AGENT_LOGS = (f"{AGENT_RETURNS100}/*.csv",)


def multiagent_run(path: Path) -> RunDir:
    """The run dir of a multi-agent run at ``path``, with its own logs declared."""
    return RunDir(path, kind_logs=AGENT_LOGS)


def agent_returns100(run: RunDir, agent: str) -> Path:
    """The returns100 curve of agent key ``agent``."""
    return run.path / AGENT_RETURNS100 / f"{agent}.csv"


def agent_returns100_files(run: RunDir) -> dict[str, Path]:
    """Every agent key's returns100 file (empty for a single-agent run)."""
    folder = run.path / AGENT_RETURNS100
    return {p.stem: p for p in sorted(folder.glob("*.csv"))} if folder.is_dir() else {}


def write_agent_test_returns(run: RunDir, returns: dict[str, Sequence[float]]) -> None:
    """Write one row per test episode of a multi-agent run: ``episode,<agent>,...``."""
    keys = list(returns)
    rows = [",".join(["episode", *keys])] + [
        ",".join([str(i)] + [f"{returns[k][i]:.6g}" for k in keys]) for i in range(len(returns[keys[0]]) if keys else 0)
    ]
    atomic_write_text(run.path / AGENT_TEST_RETURNS, "\n".join(rows) + "\n")
