"""ARS that stops at the requested budget.

sb3-contrib's ARS checks its budget only between iterations, and an iteration evaluates ``2 · n_delta`` candidates
for ``n_eval_episodes`` episodes each, so a run overshoots by up to a whole iteration (MobileRobot: 4,000 steps run
for 2,000 asked). Here the run ends at the step the budget is reached (rounded up to a multiple of ``n_envs``, as
every algorithm counts steps); the iteration it cuts short makes no update, since some of its candidates have no
score. Everything else is sb3-contrib's class: saved models load with plain ``sb3_contrib.ARS``.
"""

from typing import Any

import torch
from sb3_contrib import ARS as ContribARS
from sb3_contrib.common.vec_env.async_eval import AsyncEval
from stable_baselines3.common.callbacks import BaseCallback


class _BudgetSpent(Exception):
    """Raised from inside an evaluation when the step budget is reached."""


class ARS(ContribARS):
    """Augmented Random Search (Mania et al., 2018, "Simple random search provides a competitive approach to
    reinforcement learning"), sb3-contrib's, ending exactly at ``total_timesteps``; keywords as ``sb3_contrib.ARS``."""

    def _trigger_callback(
        self, _locals: dict[str, Any], _globals: dict[str, Any], callback: BaseCallback, n_envs: int
    ) -> None:
        super()._trigger_callback(_locals, _globals, callback, n_envs)
        if self.num_timesteps >= self._total_timesteps:
            raise _BudgetSpent

    def _do_one_update(self, callback: BaseCallback, async_eval: AsyncEval | None) -> None:
        if async_eval is not None:
            raise ValueError("rlzoo's ARS evaluates candidates in-process only (async_eval=None)")
        assert isinstance(self.weights, torch.Tensor), "the model is set up"
        weights = self.weights.clone()
        try:
            super()._do_one_update(callback, async_eval)
        except _BudgetSpent:
            self.weights = weights  # the cut-short iteration is dropped: the policy keeps the last update's weights
            self.policy.load_from_vector(weights.cpu())
            callback.on_rollout_end()
