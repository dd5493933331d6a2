"""Keep-best evaluation: evaluate the agent every so many steps and keep the best model it has been.

A learning curve can swing (SB3's DQN on CartPole-v1 reaches 500 and collapses to ~20 by the end of its tuned
budget); rl-baselines3-zoo reports the best evaluated model. :class:`KeepBest` does the same: every ``every_steps``
agent steps (and once at the end of training) it runs ``episodes`` deterministic episodes on an evaluation env of
its own, and when their mean return beats every earlier one it saves the model and its normalisation statistics
into the best-model folder. Every evaluation is a row of the evaluations CSV and is logged as ``eval/``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv, VecNormalize, sync_envs_normalization

from rlzoo.confined import open_plain, stream_lines
from rlzoo.errors import ConfigError
from rlzoo.rundir import RunDir, load_obs_norm, save_model
from rlzoo.training.build import load_model
from rlzoo.training.normalization import FrozenNormalization, FrozenNormalize
from rlzoo.training.safe_load import restore_weights

EVALUATIONS_HEADER = "steps,mean_return,std_return,min_return,max_return,best"


class KeepBest(BaseCallback):
    """Evaluate every ``every_steps`` agent steps (summed over envs) and save the best model so far.

    :param eval_env: the evaluation envs (the training env's representation; when the training env is normalised,
        wrapped in a :class:`FrozenNormalize` (a run's: ``RunBuilder.test_env``) or a ``VecNormalize``, whose
        statistics are a fresh copy of the training env's before each evaluation and never updated by it).
    :param best_folder: where the best model (``model.zip``) and its normalisation statistics are written.
    :param evaluations: the CSV of every evaluation (appended to: a resumed run continues its log and its best).
    :param every_steps: evaluation interval in agent steps.
    :param episodes: episodes per evaluation (spread over the envs of ``eval_env``).
    :param normalizer: the training env's observation normaliser, if any (saved beside the best model).
    :param deterministic: evaluate the deterministic policy (as the test episodes do by default).
    :param episode_seed: re-seed ``eval_env`` with this before every evaluation, so that each one plays the same
        episodes (a paired comparison of the models; None: each evaluation plays on where the last one stopped).
    """

    def __init__(
        self,
        eval_env: VecEnv,
        best_folder: Path,
        evaluations: Path,
        every_steps: int,
        episodes: int,
        normalizer: VecNormalize | None = None,
        deterministic: bool = True,
        episode_seed: int | None = None,
    ) -> None:
        super().__init__()
        if every_steps < 1 or episodes < 1:
            raise ConfigError(f"eval_freq={every_steps} and eval_episodes={episodes} must both be ≥ 1")
        if (normalizer is None) != (not isinstance(eval_env, VecNormalize | FrozenNormalize)):
            raise ValueError(
                "eval_env must be a VecNormalize or FrozenNormalize exactly when the training env is normalised"
            )
        if isinstance(eval_env, VecNormalize):  # statistics come from training, rewards stay raw
            eval_env.training, eval_env.norm_reward = False, False
        self.eval_env = eval_env
        self.best_folder = best_folder
        self.evaluations = evaluations
        self.every_steps = every_steps
        self.episodes = episodes
        self.normalizer = normalizer
        self.deterministic = deterministic
        self.episode_seed = episode_seed
        self.best_return = -np.inf
        self.best_steps: int | None = None
        self.last_evaluated = -1
        self._next = every_steps
        self._stream: TextIO | None = None

    def _on_training_start(self) -> None:
        best, steps = previous_best_row(self.evaluations)
        if best > self.best_return:  # a resumed run: the best of its evaluations before the checkpoint
            self.best_return, self.best_steps = best, steps
        new = not self.evaluations.is_file() or self.evaluations.stat().st_size == 0
        self.evaluations.parent.mkdir(parents=True, exist_ok=True)
        self._stream = open_plain(self.evaluations, "a")
        if new:
            self._stream.write(EVALUATIONS_HEADER + "\n")
            self._stream.flush()
        self._next = (self.num_timesteps // self.every_steps + 1) * self.every_steps

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next:
            self.evaluate()
            self._next = (self.num_timesteps // self.every_steps + 1) * self.every_steps
        return True

    def _on_training_end(self) -> None:
        if self.last_evaluated != self.num_timesteps:  # the final model competes too
            self.evaluate()
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def evaluate(self) -> float:
        """Run the evaluation episodes now; save the model when it is the best so far. Return the mean return."""
        if isinstance(self.eval_env, FrozenNormalize) and self.normalizer is not None:
            self.eval_env.normalization = FrozenNormalization.snapshot(self.normalizer)
        elif self.normalizer is not None:
            sync_envs_normalization(self.normalizer, self.eval_env)
        if self.episode_seed is not None:
            self.eval_env.seed(self.episode_seed)  # applied by evaluate_policy's reset
        returns, _ = evaluate_policy(
            self.model, self.eval_env, n_eval_episodes=self.episodes, deterministic=self.deterministic,
            return_episode_rewards=True, warn=False,
        )  # fmt: skip
        values = np.asarray(returns, dtype=float)
        mean = float(values.mean())
        best = mean > self.best_return
        if best:
            self.best_return, self.best_steps = mean, self.num_timesteps
            save_model(self.best_folder, self.model, self.normalizer)
        self.last_evaluated = self.num_timesteps
        self.logger.record("eval/mean_return", mean)
        self.logger.record("eval/std_return", float(values.std()))
        self.logger.record("eval/best_return", self.best_return)
        if self._stream is not None:
            row = (self.num_timesteps, mean, values.std(), values.min(), values.max(), int(best))
            self._stream.write("{},{:.6g},{:.6g},{:.6g},{:.6g},{}\n".format(*row))
            self._stream.flush()
        return mean


def previous_best(evaluations: Path) -> float:
    """The best mean return in an evaluations CSV (-inf when there is none)."""
    return previous_best_row(evaluations)[0]


def previous_best_row(evaluations: Path) -> tuple[float, int | None]:
    """The best mean return in an evaluations CSV and the steps of its first evaluation (-inf, None: none)."""
    if not os.path.lexists(evaluations):
        return -np.inf, None
    lines = stream_lines(evaluations.parent, evaluations.name)  # a resumed run dir's log: plain, capped
    rows = [line.rstrip("\n").split(",") for line in lines[1:] if line.count(",") == 5]
    best, steps = -np.inf, None
    for row in rows:
        try:
            value, at = float(row[1]), int(float(row[0]))
        except ValueError:
            raise ConfigError(
                f"{evaluations}: {','.join(row)[:80]!r} is not an evaluation row as rlzoo writes them"
            ) from None
        if value > best:
            best, steps = value, at
    return best, steps


def require_best_model(run: RunDir) -> Path:
    """The best model of a run, or one :class:`ConfigError` saying that the run kept none (``checkpoint=best``)."""
    return run.best_model_folder().model


def load_best(
    run: RunDir, algo_class: type[BaseAlgorithm], normalizer: VecNormalize | None, into: BaseAlgorithm | None = None
) -> BaseAlgorithm:
    """The best model of a run that has just trained (``test_checkpoint=best``); ``normalizer`` takes its statistics
    (training is over: the final model and statistics are saved).

    :param into: the trained model, which takes the best weights without unpickling anything (a resumed run dir may
        come from elsewhere: :mod:`rlzoo.training.safe_load`); None (``trusted=true``): SB3's own load.
    """
    folder = run.best_model_folder()
    if into is not None:
        restore_weights(into, folder.model)
    model = into if into is not None else load_model(algo_class, folder.model)
    if normalizer is not None:
        FrozenNormalization(*load_obs_norm(folder.obs_norm)).restore(normalizer)
    return model
