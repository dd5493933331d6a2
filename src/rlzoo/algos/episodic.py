"""The shell of algorithms that act in the envs and learn from whole episodes, or not at all (CMA-ES, random agent).

:class:`EpisodicAlgorithm` steps the VecEnv itself, so callbacks see every step with its ``infos`` (returns100,
checkpoints and keep-best evaluation work as for SB3's algorithms) and training stops exactly at the requested
budget (a multiple of ``n_envs``), where ARS overshoots by up to a whole iteration.
"""

from typing import Any, TypeVar

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.type_aliases import MaybeCallback
from stable_baselines3.common.utils import safe_mean

SelfEpisodic = TypeVar("SelfEpisodic", bound="EpisodicAlgorithm")


class EpisodicAlgorithm(BaseAlgorithm):
    """A ``BaseAlgorithm`` whose ``learn`` is a plain env loop: act for every env, step, then :meth:`_observe`.

    Subclasses implement :meth:`_act` (the actions for the current observations) and :meth:`_observe` (learning
    from the step); ``predict`` is the policy's, as in SB3.
    """

    def _setup_learn(self, total_timesteps: int, *args: Any, **kwargs: Any) -> tuple[int, BaseCallback]:
        out = super()._setup_learn(total_timesteps, *args, **kwargs)
        self._episode_returns = np.zeros(self.n_envs)
        return out

    def learn(
        self: SelfEpisodic,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 10,
        tb_log_name: str = "run",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfEpisodic:
        """Act and learn for ``total_timesteps`` agent steps (summed over envs); log every ``log_interval`` episodes."""
        total, callback = self._setup_learn(total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar)
        assert self.env is not None
        callback.on_training_start(locals(), globals())
        callback.on_rollout_start()
        episodes = 0
        while self.num_timesteps < total:
            actions = self._act(self._last_obs)  # type: ignore[arg-type]
            new_obs, rewards, dones, infos = self.env.step(actions)
            self.num_timesteps += self.env.num_envs
            self._update_info_buffer(infos, dones)
            self._update_current_progress_remaining(self.num_timesteps, total)
            callback.update_locals(locals())
            if not callback.on_step():
                break
            self._episode_returns += rewards
            self._observe(rewards, dones)
            self._episode_returns[dones] = 0.0
            self._last_obs = new_obs  # type: ignore[assignment]
            episodes += int(dones.sum())
            if log_interval and dones.any() and episodes // log_interval > (episodes - dones.sum()) // log_interval:
                self.dump_logs()
        callback.on_rollout_end()
        callback.on_training_end()
        return self

    def _act(self, observations: np.ndarray) -> np.ndarray:
        """The actions of every env for ``observations`` (one row per env)."""
        raise NotImplementedError

    def _observe(self, rewards: np.ndarray, dones: np.ndarray) -> None:
        """Learn from a step; ``self._episode_returns`` holds each env's running episode return (this step included),
        reset to 0 after this call where ``dones``."""

    def dump_logs(self) -> None:
        """Write the rollout statistics of the last episodes and the step counters."""
        if self.ep_info_buffer:
            self.logger.record("rollout/ep_rew_mean", safe_mean([info["r"] for info in self.ep_info_buffer]))
            self.logger.record("rollout/ep_len_mean", safe_mean([info["l"] for info in self.ep_info_buffer]))
        self.logger.record("time/total_timesteps", self.num_timesteps, exclude="tensorboard")
        self.logger.dump(step=self.num_timesteps)
