"""Every kind of run, registered: importing this module imports each kind's package, which registers its kind in
:data:`rlzoo.training.kind.KINDS` (:mod:`rlzoo.single_agent`, :mod:`rlzoo.multiagent`). The entrypoints and everything
that resolves a run's kind (:func:`load_agent`, the report's replays) import it; a new kind's package is imported
here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import rlzoo.multiagent
import rlzoo.single_agent
from rlzoo.confined import memory_budget_of
from rlzoo.training.kind import kind_of_run

__all__ = ["load_agent"]
KIND_PACKAGES = (rlzoo.single_agent, rlzoo.multiagent)


def load_agent(
    run_dir: str | Path,
    checkpoint: int | str | None = None,
    deterministic: bool = True,
    *,
    trusted: bool = False,
    allow: Sequence[str] = (),
    memory_budget_gb: float | None = None,
) -> Any:
    """The test agent of a run dir (a training run, a checkpoint or a saved preset), loaded on the CPU by the run's
    kind (:func:`rlzoo.training.kind.kind_of_run`): a :class:`~rlzoo.agents.loaded_agent.TestAgent` for a
    single-agent run, a :class:`~rlzoo.multiagent.agents.TestMultiagent` for a multi-agent run (its final models).

    :param run_dir: the run dir.
    :param checkpoint: ``"final"`` (or None), ``"latest"``, ``"best"`` or a checkpoint's steps: the checkpoint
        vocabulary of :meth:`rlzoo.rundir.RunDir.find_model`.
    :param deterministic: act deterministically (the default, as in the run's test episodes).
    :param trusted: the run comes from someone you trust: load it with SB3's own ``load`` (which unpickles) and any
        ``_target_``. By default nothing in the run dir is run (:mod:`rlzoo.training.safe_load`).
    :param allow: module names whose ``_target_`` entries you trust (your own algorithm module).
    :param memory_budget_gb: the most GiB one file of the run may hold (None: ``$RLZOO_MEMORY_BUDGET_GB``, else 16).
    :raise ConfigError: not a run dir, no such model, or code outside the allowlist in an untrusted run.
    """
    kind, run = kind_of_run(run_dir)
    with memory_budget_of(memory_budget_gb):
        return kind.load(run, checkpoint, deterministic=deterministic, trusted=trusted, allow=allow)
