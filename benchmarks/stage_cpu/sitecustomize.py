"""CPU seconds per stage of an rlzoo process, for ``benchmarks/srl_slice.py`` (on ``PYTHONPATH`` of the processes it
starts; inert unless ``RLZOO_STAGE_LOG`` names a file).

Each stage function, wrapped once its module is imported, appends one JSON line: the stage, its CPU seconds (user +
system of this process and of the children it waited for) and its wall seconds. The names cover the stages of a
pipeline run: dataset collection, encoder training, an RL run and its test episodes.
"""

from __future__ import annotations

import atexit
import functools
import importlib.abc
import importlib.machinery
import json
import os
import resource
import sys
import time
from typing import Any

LOG = os.environ.get("RLZOO_STAGE_LOG")
# module -> (function, stage): each that exists is wrapped.
STAGES: dict[str, list[tuple[str, str]]] = {
    "rlzoo.collect": [("collect", "dataset")],
    "rlzoo.srl.train": [("train_encoder", "encoder")],
    "rlzoo.training.run": [("run", "rl_run")],
    "rlzoo.single_agent.learning": [("play_test", "test_episodes")],
}


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def write(record: dict[str, Any]) -> None:
    assert LOG is not None
    with open(LOG, "a") as file:
        file.write(json.dumps(record) + "\n")


def label(args: tuple[Any, ...]) -> str:
    """The srl_model (and seed) of a config argument, where there is one."""
    for arg in args:
        srl = getattr(arg, "srl_model", None)
        name = getattr(srl, "name", None) if srl is not None else None
        method = getattr(srl, "method", None) if srl is not None else None
        if name or method:
            return f"{name or method}"
    return ""


def timed(function: Any, stage: str) -> Any:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        cpu, wall = cpu_seconds(), time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            write(
                {
                    "stage": stage,
                    "label": label(args),
                    "cpu_s": cpu_seconds() - cpu,
                    "wall_s": time.perf_counter() - wall,
                    "pid": os.getpid(),
                }
            )

    return wrapper


class WrapOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in STAGES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original = loader.exec_module  # type: ignore[attr-defined]

        def exec_module(module: Any) -> None:
            original(module)
            for function, stage in STAGES[name]:
                if hasattr(module, function):
                    setattr(module, function, timed(getattr(module, function), stage))

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if LOG:
    sys.meta_path.insert(0, WrapOnImport())
    started = time.perf_counter()
    atexit.register(
        lambda: write(
            {
                "stage": "process",
                "label": " ".join(sys.argv[1:3])[:80],
                "cpu_s": cpu_seconds(),
                "wall_s": time.perf_counter() - started,
                "pid": os.getpid(),
            }
        )
    )
