"""The SB3-facing shell shared by rlzoo's own algorithms.

An algorithm written on :class:`~rlzoo.approximation.approximations.Approximation` objects subclasses SB3's
``OffPolicyAlgorithm`` or ``OnPolicyAlgorithm`` (so VecEnvs, callbacks, logging, checkpoints, resume and rlzoo's
training agents work unchanged) together with :class:`ApproximationShell`, which

- builds approximations wired to the algorithm's learning-rate schedule, progress and logger,
- saves their optimizer state next to the policy in ``model.zip`` (``model.save`` / ``cls.load`` as in SB3),
- checks keywords with one :class:`~rlzoo.errors.ConfigError` message each (:meth:`ApproximationShell.check_keywords`).

Algorithms that do not learn by gradient steps on transitions (CMA-ES, the random agent) use
:class:`~rlzoo.algos.episodic.EpisodicAlgorithm` instead.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from torch import nn

from rlzoo.approximation.approximations import Approximation, TargetNetwork
from rlzoo.errors import ConfigError

A = TypeVar("A", bound=Approximation)


def require(condition: bool, message: str) -> None:
    """Raise :class:`ConfigError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(message)


class ApproximationShell:
    """Mixin (before the SB3 base class) for algorithms whose learned functions are :class:`Approximation` objects.

    Subclasses list the attribute names of their approximations in ``approximations`` and create them in
    ``_setup_model`` with :meth:`_approximate`.
    """

    approximations: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def check_keywords(cls, **kwargs: Any) -> None:
        """Check keyword values beyond their types (ranges, combinations); raise :class:`ConfigError` when bad.

        Called by the constructor; callable before any env exists (e.g. when a run is planned).
        """

    def _approximate(
        self,
        kind: type[A],
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        name: str,
        *,
        clip_grad: float = 0.0,
        target: nn.Module | None = None,
        tau: float = 1.0,
        target_every: int = 1,
        **kwargs: Any,
    ) -> A:
        """An approximation of ``kind`` following this algorithm's learning-rate schedule, progress and logger."""
        algo = self._algorithm
        return kind(
            model,
            optimizer,
            target=None if target is None else TargetNetwork(model, target, tau, target_every),
            clip_grad=clip_grad,
            lr_schedule=algo.lr_schedule,
            progress=lambda: algo._current_progress_remaining,
            name=name,
            log=lambda key, value: algo.logger.record_mean(key, value),
            **kwargs,
        )

    @property
    def _algorithm(self) -> BaseAlgorithm:
        assert isinstance(self, BaseAlgorithm), "ApproximationShell is mixed into a BaseAlgorithm subclass"
        return self

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), *self.approximations]  # type: ignore[misc]

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        return ["policy", *self.approximations], []
