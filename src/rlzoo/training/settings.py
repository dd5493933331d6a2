"""The run keys of ``conf/train.yaml`` as a typed schema: every bad value fails here, before any work starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rlzoo.errors import ConfigError
from rlzoo.schema import at_least, parse

GROUPS = ("algo", "env", "srl_model", "hardware", "logger", "multiagent")
# test_steps=auto: the test phase's budget is this many agent steps per training step (total_timesteps). A test step
# (no gradients) costs about a fifth of a training step of a tiny Atari PPO run, so its test takes about its training's
# time.
TEST_STEPS_PER_TRAINING_STEP = 5
# The budget never cuts a test episode before this many steps (an env whose time limit is at most this many steps has
# its episodes never cut, and a replay plays the test episodes again).
TEST_EPISODE_FLOOR = 1_000


@dataclass(frozen=True)
class RunSettings:
    """The run keys of ``train.yaml`` (see the comments there)."""

    run_dir: str
    seed: int = field(default=0, metadata=at_least(0))
    total_timesteps: int = field(default=100_000, metadata=at_least(1))
    total_episodes: int | None = field(default=None, metadata=at_least(1))
    max_train_seconds: float | None = field(default=None, metadata=at_least(1))
    n_envs: int = field(default=1, metadata=at_least(1))
    vec_env: Literal["dummy", "subproc", "batched"] = "dummy"
    normalize: bool = True
    checkpoint_freq: int = field(default=25_000, metadata=at_least(0))
    checkpoint_buffer: bool = True
    eval_freq: int = field(default=0, metadata=at_least(0))
    eval_episodes: int = field(default=5, metadata=at_least(1))
    test_checkpoint: Literal["final", "best"] = "final"
    test_episodes: int = field(default=100, metadata=at_least(0))
    test_envs: int = field(default=10, metadata=at_least(1))
    deterministic_test: bool = True
    sampled_test: bool = False
    max_test_steps: int = field(default=10_000, metadata=at_least(1))
    test_steps: int | Literal["auto"] | None = field(default="auto", metadata=at_least(1))
    progress_bar: bool | Literal["auto"] = "auto"
    verbose: Literal[0, 1, 2] = 1
    resume: str | None = None
    init_from: str | None = None
    trusted: bool = False
    memory_budget_gb: float | None = field(default=None, metadata=at_least(0))  # the caller's; a run records null

    @property
    def test_step_budget(self) -> int | None:
        """The most agent steps the test phase plays (``test_steps``; auto: a multiple of ``total_timesteps``)."""
        if self.test_steps == "auto":
            return TEST_STEPS_PER_TRAINING_STEP * self.total_timesteps
        return self.test_steps

    @property
    def test_episode_cap(self) -> int | None:
        """The steps after which a test episode is cut: its equal share of the test-step budget, at least
        :data:`TEST_EPISODE_FLOOR` (None: no budget)."""
        budget = self.test_step_budget
        return (
            None if budget is None or not self.test_episodes else max(TEST_EPISODE_FLOOR, budget // self.test_episodes)
        )

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> RunSettings:
        """The run keys of a resolved train config (its groups are read elsewhere)."""
        settings = parse(cls, values, ignore=GROUPS, what="run key")
        if settings.test_checkpoint == "best" and not settings.eval_freq:
            raise ConfigError(
                "test_checkpoint=best: this run keeps no best model (eval_freq=0); allowed: test_checkpoint=final, "
                "or test_checkpoint=best with keep-best evaluation (eval_freq > 0)"
            )
        if settings.sampled_test and not settings.deterministic_test:
            raise ConfigError(
                "sampled_test=true plays the test episodes again with sampled actions after the greedy ones; "
                "deterministic_test=false already samples them: allowed: sampled_test=false, or sampled_test=true "
                "with deterministic_test=true"
            )
        return settings
