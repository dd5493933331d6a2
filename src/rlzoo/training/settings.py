"""The run keys of ``conf/train.yaml`` as a typed schema: every bad value fails here, before any work starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rlzoo.errors import ConfigError
from rlzoo.schema import at_least, parse

GROUPS = ("algo", "env", "srl_model", "hardware", "logger", "multiagent")


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
    eval_freq: int = field(default=0, metadata=at_least(0))
    eval_episodes: int = field(default=5, metadata=at_least(1))
    test_checkpoint: Literal["final", "best"] = "final"
    test_episodes: int = field(default=100, metadata=at_least(0))
    test_envs: int = field(default=10, metadata=at_least(1))
    deterministic_test: bool = True
    sampled_test: bool = False
    max_test_steps: int = field(default=10_000, metadata=at_least(1))
    progress_bar: bool | Literal["auto"] = "auto"
    verbose: Literal[0, 1, 2] = 1
    resume: str | None = None
    init_from: str | None = None
    trusted: bool = False

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
