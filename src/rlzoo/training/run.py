"""The one run skeleton: what ``python -m rlzoo.train`` (and ``rlzoo.train.train``) does with a composed config,
for every kind of run (:mod:`rlzoo.training.kind`).

plan (every input checked, nothing written) → refuse the run keys the kind does not honour → learners and envs →
run dir (fresh, or cut back to its resume point), loggers and W&B → learn (checkpoints, time budget) → save → test
episodes → metrics, ``metrics.json`` last.
"""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig
from stable_baselines3.common.utils import set_random_seed

from rlzoo.provenance import source_commit
from rlzoo.training.context import RunContext
from rlzoo.training.kind import RunKind, refuse_unhonoured
from rlzoo.training.single_agent import CallbackFactory, SingleAgent


def run(kind: RunKind, cfg: DictConfig, overrides: Sequence[str] = ()) -> dict[str, float]:
    """Train, save and test what ``cfg`` describes as a run of ``kind``; return its metrics (``test/mean_return``
    ...). Every input is checked before the run dir is written to; ``metrics.json`` is written last.

    :param overrides: the command line's overrides (checked against a saved config for ``resume=<run dir>``; the
        run keys they name count as set by the user).
    """
    plan = kind.plan(cfg, overrides)  # every input checked; nothing written, nothing heavy built
    refuse_unhonoured(kind, plan.config, cfg, overrides)
    with RunContext(plan) as context:
        set_random_seed(plan.seed)
        learning = kind.build(plan, context)
        context.claim(learning)  # the run dir exists from here on
        evaluated = learning.learn(context.clock)
        metrics = {"train/timesteps": float(learning.timesteps), "time/train_seconds": context.seconds(), **evaluated}
        learning.save()
        metrics |= learning.test()
        metrics["time/total_seconds"] = context.seconds()
        metrics["time/cpu_seconds"] = context.cpu_seconds()
        plan.run.write_provenance(source_commit())
        plan.run.write_metrics(metrics)
    return metrics


def train_run(
    cfg: DictConfig, overrides: Sequence[str] = (), extra_callbacks: CallbackFactory | None = None
) -> dict[str, float]:
    """A single-agent run (:func:`run` with :class:`SingleAgent`).

    :param extra_callbacks: makes callbacks that learn with the run's own (one returning False stops training).
    """
    return run(SingleAgent(extra_callbacks), cfg, overrides)
