"""The numeric precision of image networks: fp32, or bfloat16 autocast where the hardware computes it fast.

``bf16`` runs the convolutions of image networks (SRL encoders' conv trunks, their decoders, CNN policies' conv
layers) under ``torch.autocast`` with bfloat16; every state, head, loss and optimiser step stays fp32. ``auto`` is
``bf16`` on a CPU with native bfloat16 (Intel AMX or AVX-512 BF16) or a GPU that supports it, else ``fp32``: on other
CPUs bfloat16 is emulated and slower than fp32.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import torch

from rlzoo.errors import ConfigError

PRECISIONS = ("fp32", "bf16", "auto")


def check_precision(value: Any, key: str) -> str:
    """``value`` if it is one of :data:`PRECISIONS`, else one :class:`ConfigError` naming ``key``."""
    if value not in PRECISIONS:
        raise ConfigError(f"{key}={value!r} is not a precision; allowed: {', '.join(PRECISIONS)}")
    return str(value)


@functools.cache
def fast_bf16(device_type: str) -> bool:
    """Whether ``device_type`` (``cpu``, ``cuda``) computes bfloat16 natively."""
    if device_type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    cpu = getattr(torch, "cpu", None)
    checks = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    return any(bool(getattr(cpu, name, lambda: False)()) for name in checks)


def resolve_precision(value: Any, device_type: str, key: str = "precision") -> str:
    """``fp32`` or ``bf16``: ``auto`` decided by :func:`fast_bf16` on ``device_type``."""
    precision = check_precision(value, key)
    if precision == "auto":
        return "bf16" if fast_bf16(device_type) else "fp32"
    return precision


@contextlib.contextmanager
def autocast(precision: str, device_type: str) -> Iterator[None]:
    """bfloat16 autocast on ``device_type`` when ``precision`` is ``bf16``; nothing otherwise."""
    with torch.autocast(device_type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        yield


def set_precision(modules: Any, precision: str) -> None:
    """Set ``precision`` on every submodule of ``modules`` (an ``nn.Module``) that has the attribute."""
    for module in modules.modules():
        if hasattr(module, "precision"):
            module.precision = precision
