"""Where the networks run and how many torch threads a run may use (ground floor).

torch is imported only when a profile is checked or applied, so that launching processes stay light.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rlzoo.errors import ConfigError
from rlzoo.schema import at_least, parse


@dataclass(frozen=True)
class Hardware:
    """The ``hardware`` group's keys that a run reads (the launcher keys are Hydra's).

    :param device: ``cpu``, ``cuda``, ``cuda:<n>`` or ``auto``.
    :param torch_threads: torch's intra-op threads (None: torch's default).
    :param precision: image networks' precision in RL (encoders, CNN policies): ``fp32``, ``bf16``, ``auto``
        (:mod:`rlzoo.precision`).
    """

    device: str = "cpu"
    torch_threads: int | None = field(default=None, metadata=at_least(1))
    precision: Literal["fp32", "bf16", "auto"] = "fp32"

    @classmethod
    def from_config(cls, values: Any) -> Hardware:
        """The profile of a ``hardware`` node (a mapping); other keys are the launcher's."""
        known = {k: values[k] for k in ("device", "torch_threads", "precision") if k in values}
        hardware = parse(cls, known, prefix="hardware.")
        hardware.check()
        return hardware

    def check(self) -> None:
        """Fail when the device is not a torch device or is a GPU that is not there."""
        import torch

        try:
            kind = torch.device(self.device).type if self.device != "auto" else "auto"
        except RuntimeError:
            raise ConfigError(f"hardware.device={self.device!r}; allowed: cpu, cuda, cuda:<n>, auto") from None
        if kind == "cuda" and not torch.cuda.is_available():
            raise ConfigError(f"hardware.device={self.device!r} but no CUDA GPU is visible; use hardware=cpu")

    def apply(self) -> None:
        """Set torch's thread count."""
        import torch

        if self.torch_threads is not None:
            torch.set_num_threads(self.torch_threads)
