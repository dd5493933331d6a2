"""The JAX backend: SBX's algorithms (Stable-Baselines3 in JAX, package ``sbx-rl``) as ``algo=sbx_<name>`` options.

SBX subclasses SB3's ``OffPolicyAlgorithm`` / ``OnPolicyAlgorithm`` and keeps their API (``learn`` with callbacks,
``save``/``load``, ``predict``, SB3's logger and buffers), so runs, checkpoints, resume, test episodes and replay
treat its models as any other; only the networks and their updates run in JAX. This module holds what is particular
to the backend: whether the optional extra is installed, and on which JAX device a run's networks go.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from typing import Any

from rlzoo.errors import ConfigError

EXTRA = "jax"
INSTALL = 'pip install -e ".[jax]"'
# The modules the extra brings (sbx-rl pulls jax, jaxlib, flax and optax).
MODULES = ("sbx", "jax", "jaxlib", "flax", "optax")
PACKAGE = "sbx"
# One XLA CPU thread per run, as one torch thread (hardware=cpu): small networks run as fast, and parallel sweep jobs
# do not oversubscribe the cores. Applies when XLA_FLAGS is unset, before JAX starts its CPU client.
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def is_jax_target(target: str) -> bool:
    """Whether an ``algo._target_`` names an SBX class (``sbx.SAC`` ...)."""
    return target.split(".", 1)[0] == PACKAGE


def is_jax_class(algo_class: type) -> bool:
    """Whether ``algo_class`` comes from SBX."""
    return algo_class.__module__.split(".", 1)[0] == PACKAGE


def missing_modules() -> list[str]:
    """The extra's modules that cannot be imported here."""
    return [name for name in MODULES if importlib.util.find_spec(name) is None]


def require_jax(target: str) -> None:
    """Fail with one line naming the extra when ``target`` is an SBX class and the extra is not installed.

    Also keeps JAX's start-up messages (``Unable to initialize backend 'tpu'``) out of the run's log, and sets
    :data:`XLA_ONE_THREAD` when ``XLA_FLAGS`` is unset.
    """
    if not is_jax_target(target):
        return
    missing = missing_modules()
    if missing:
        raise ConfigError(
            f"algo._target_={target} is an SBX (JAX) algorithm, but the [{EXTRA}] extra is not installed "
            f"({', '.join(missing)} missing): {INSTALL}"
        )
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)
    os.environ.setdefault("XLA_FLAGS", XLA_ONE_THREAD)


def _gpus() -> list[Any]:
    import jax

    return [device for device in jax.devices() if device.platform in ("gpu", "cuda", "rocm")]


def jax_device(device: str) -> Any:
    """The JAX device for ``hardware.device`` (``cpu``, ``cuda``, ``cuda:<n>``, ``auto``: a GPU if JAX sees one).

    :raise ConfigError: a GPU is asked for and JAX sees none (the [jax] extra installs the CPU jaxlib).
    """
    import jax

    kind, _, index = device.partition(":")
    if kind == "cpu" or (kind == "auto" and not _gpus()):
        return jax.devices("cpu")[0]
    gpus = _gpus()
    if not gpus:
        raise ConfigError(
            f"hardware.device={device} but JAX sees no GPU (its devices: "
            f"{', '.join(sorted({d.platform for d in jax.devices()}))}; the [{EXTRA}] extra installs the CPU jaxlib): "
            'pip install -U "jax[cuda12]" for NVIDIA GPUs, or use hardware=cpu'
        )
    number = int(index) if index.isdigit() else 0
    if number >= len(gpus):
        raise ConfigError(f"hardware.device={device} but JAX sees {len(gpus)} GPU(s)")
    return gpus[number]


def use_device(device: str) -> None:
    """Put the networks of the SBX models built from now on in this process on ``hardware.device`` (checked)."""
    import jax

    jax.config.update("jax_default_device", jax_device(device))
