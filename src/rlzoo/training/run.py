"""The one run skeleton: what ``python -m rlzoo.train`` (and ``rlzoo.train.train``) does with a composed config,
for every kind of run (:mod:`rlzoo.training.kind`).

plan (every input checked, nothing written) → refuse the run keys the kind does not honour → learners and envs →
run dir (fresh, or cut back to its resume point), loggers and W&B → learn (checkpoints, time budget) → save → test
episodes → metrics, ``metrics.json`` last.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import Any

from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.utils import set_random_seed

from rlzoo.precision import resolve_precision
from rlzoo.provenance import command_line, platform_facts, source_commit, threads
from rlzoo.training.context import RunContext
from rlzoo.training.kind import RunKind, refuse_unhonoured


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
        context.requeue.learning_ended()  # Slurm's warning: back to the handler that was there
        metrics = {"train/timesteps": float(learning.timesteps), "time/train_seconds": context.seconds(), **evaluated}
        learning.save()
        metrics |= learning.test()
        metrics["time/total_seconds"] = context.seconds()
        metrics["time/cpu_seconds"] = context.cpu_seconds()
        plan.run.write_provenance(provenance(plan))
        plan.run.write_metrics(metrics)
    return metrics


def provenance(plan: Any) -> dict[str, Any]:
    """What ``provenance.json`` records: the source commit, the command, the platform, the thread counts, the
    hardware profile and the precision every network ran in (what ``auto`` resolved to on this machine)."""
    device = "cuda" if str(plan.hardware.device).startswith("cuda") else "cpu"
    return {
        "commit": source_commit(),
        "command": command_line(),
        "platform": platform_facts(),
        "threads": threads(),
        "hardware": asdict(plan.hardware),
        "precision": {key: resolve_precision(value, device, key) for key, value in _precision_keys(plan.config)},
    }


def _precision_keys(config: DictConfig) -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every ``precision`` key of the run's resolved config."""
    values = OmegaConf.to_container(config, resolve=True)

    def walk(node: Any, prefix: str) -> Iterator[tuple[str, Any]]:
        if isinstance(node, dict):
            for key, item in node.items():
                name = f"{prefix}{key}"
                if key == "precision" and isinstance(item, str):
                    yield name, item
                else:
                    yield from walk(item, name + ".")

    yield from walk(values, "")
