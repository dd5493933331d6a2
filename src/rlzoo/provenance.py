"""Where a result came from (ground floor: no rlzoo imports but :mod:`rlzoo.float_path`): the source commit of the
running rlzoo, the command that started it, the platform it computed on (CPU, the kernels torch dispatches, library
versions, threads) and the CPU seconds of this process, which a run records beside its metrics (``provenance.json``,
``time/cpu_seconds``). torch and the other libraries are imported only when the platform is asked for."""

from __future__ import annotations

import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from rlzoo.float_path import float_path_facts

SOURCE = Path(__file__).resolve().parent
UNKNOWN = "unknown"


@cache
def source_commit() -> str:
    """The git commit of the checkout rlzoo runs from (``<sha>-dirty`` when tracked files differ from it), or
    ``unknown`` for an installed copy that is not a git checkout."""
    try:
        head = subprocess.run(
            ["git", "-C", str(SOURCE), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(SOURCE), "diff", "--quiet", "HEAD", "--", "."], capture_output=True, timeout=30
        ).returncode
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    return f"{head}-dirty" if dirty else head


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (every thread; not its child processes)."""
    return time.process_time()


NOT_RECORDED = "not recorded"
# What must agree for two runs of one config to be promised equal to the last digit (docs/results.md).
SAME_PLATFORM_KEYS = ("cpu_vendor", "cpu_model", "cpu_family_model", "cpu_capability", "python", "torch", "numpy",
                      "stable_baselines3", "gymnasium", "blas", "onednn", "float_path", "mkl_cbwr",
                      "onednn_max_cpu_isa")  # fmt: skip


# What a platform recorded before a fact was kept had in force.
FACT_DEFAULTS = {
    "float_path": "native",
    "aten_cpu_capability": "unset",
    "mkl_cbwr": "unset",
    "onednn_max_cpu_isa": "unset",
}


def command_line() -> str:
    """The command that started this process, as typed (``python -m rlzoo.train algo=sac ...``), the interpreter by
    its base name."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if argv:
        argv[0] = Path(argv[0]).name
    return shlex.join(argv)


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of ``/proc/cpuinfo`` (empty where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as stream:
            for line in stream:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def _library_version(config: str, pattern: str) -> str:
    match = re.search(pattern, config)
    return match.group(1) if match else NOT_RECORDED


@cache
def platform_facts() -> dict[str, Any]:
    """The machine and software a run computes on: CPU vendor, model and the capability PyTorch dispatches, the
    library versions that decide its floats, BLAS and oneDNN as torch reports them, thread counts."""
    import gymnasium
    import numpy
    import stable_baselines3
    import torch

    cpu = _cpuinfo()
    config = torch.__config__.show()
    blas = _library_version(config, r"BLAS_INFO=(\w+)")
    mkl = _library_version(config, r"Math Kernel Library Version ([\w.\-]+)")
    return {
        "cpu_vendor": cpu.get("vendor_id", NOT_RECORDED),
        "cpu_model": cpu.get("model name", platform.processor() or NOT_RECORDED),
        "cpu_family_model": "/".join(cpu.get(k, "?") for k in ("cpu family", "model", "stepping")),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "stable_baselines3": stable_baselines3.__version__,
        "gymnasium": gymnasium.__version__,
        "blas": blas if mkl == NOT_RECORDED else f"{blas} {mkl}",
        "onednn": _library_version(config, r"MKL-DNN (v[\w.]+)"),
        **float_path_facts(os.environ),
    }


def threads() -> dict[str, int]:
    """torch's intra-op and inter-op thread counts in this process now."""
    import torch

    return {"torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads()}


def platform_difference(first: Mapping[str, Any] | None, second: Mapping[str, Any] | None) -> list[str]:
    """The facts of :data:`SAME_PLATFORM_KEYS` in which two platforms differ (``key a → b``); one entry saying
    which names no platform where either is missing."""
    if not first or not second:
        return ["the record names no platform" if not first else "the rerun names no platform"]

    def fact(facts: Mapping[str, Any], key: str) -> Any:
        return facts.get(key, FACT_DEFAULTS.get(key, NOT_RECORDED))

    return [
        f"{k} {fact(first, k)} → {fact(second, k)}" for k in SAME_PLATFORM_KEYS if fact(first, k) != fact(second, k)
    ]


def platform_label(facts: Mapping[str, Any] | None) -> str:
    """One short name of a platform for tables: CPU model, capability, torch version."""
    if not facts:
        return NOT_RECORDED
    return f"{facts.get('cpu_model', '?')} ({facts.get('cpu_capability', '?')}), torch {facts.get('torch', '?')}"
