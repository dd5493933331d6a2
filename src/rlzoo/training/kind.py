"""The kinds of run behind the one run skeleton (:func:`rlzoo.training.run.run`): what a kind plans and builds, and
the run keys it honours.

A kind (single-agent, multi-agent) is a :class:`RunKind`: it plans a run (:class:`KindPlan`), builds its learners
and envs (:class:`Learning`) and says which run keys of ``conf/train.yaml`` it honours. The skeleton does the rest
once for every kind: the run dir's claim and lock (fresh, or cut back to the resume point), the write-fault guard,
loggers and W&B, the run clock and the metrics file. A kind's learning uses the shared writers: the returns100 curve
and checkpoints with their resume state (:mod:`rlzoo.training.callbacks`). A run key a kind does not honour is refused
before anything is written (:func:`refuse_unhonoured`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from omegaconf import DictConfig

from rlzoo.config import resolved_values
from rlzoo.errors import ConfigError
from rlzoo.hardware import Hardware
from rlzoo.rundir import RunDir
from rlzoo.training.settings import RunSettings

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

    from rlzoo.training.budget import RunClock
    from rlzoo.training.plan import LogPlan
    from rlzoo.training.resume import ResumePoint

# Every run key of conf/train.yaml (RunSettings' fields).
RUN_KEYS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunSettings))


class KindPlan(Protocol):
    """What the skeleton reads of any kind's plan (every input checked once it exists)."""

    @property
    def config(self) -> DictConfig: ...  # the resolved config to record in config.yaml
    @property
    def settings(self) -> RunSettings: ...
    @property
    def hardware(self) -> Hardware: ...
    @property
    def logging(self) -> LogPlan: ...
    @property
    def resume_point(self) -> ResumePoint | None: ...
    @property
    def run(self) -> RunDir: ...
    @property
    def seed(self) -> int: ...


class Learning(Protocol):
    """A kind's learners on their envs, built (nothing written yet): the skeleton claims the run dir, then learns,
    saves and tests through this."""

    @property
    def models(self) -> Mapping[str, BaseAlgorithm]:
        """The models to log and save, by learner name ("": the run's one model, in the run dir itself)."""
        ...

    @property
    def timesteps(self) -> int:
        """Agent steps trained so far (a resumed run's included)."""
        ...

    def open_logs(self) -> None:
        """Open the kind's own log files in the claimed run dir (monitor files ...)."""

    def learn(self, clock: RunClock) -> dict[str, float]:
        """Train within the run's budget, checkpointing as the settings say; return extra metrics (``eval/``)."""
        ...

    def save(self) -> None:
        """Save the final model(s) into the run dir."""

    def test(self) -> dict[str, float]:
        """Play the test episodes (learning off), write their returns and return the ``test/`` metrics."""
        ...


class Resources(Protocol):
    """What a kind's build may use of the run's context (:class:`rlzoo.training.context.RunContext`)."""

    @property
    def clock(self) -> RunClock: ...

    def on_exit(self, callback: Callable[..., Any], *args: Any) -> None:
        """Call ``callback(*args)`` when the run ends (envs to close ...)."""


class RunKind(Protocol):
    """One kind of run: its name (in messages), the run keys it honours, its plan and its build."""

    name: str
    honoured: frozenset[str]
    fixed: Mapping[str, Any]  # run keys the kind decides itself, with the value it uses (accepted when set so)
    why: Mapping[str, str]  # why a key is not honoured, for the refusal's line

    def plan(self, cfg: DictConfig, overrides: Sequence[str]) -> KindPlan: ...

    def build(self, plan: Any, context: Resources) -> Learning: ...


def user_set_keys(values: dict[str, Any], typed: dict[str, Any]) -> dict[str, Any]:
    """The run keys the user set: those ``typed`` on the command line (with their typed values), and those of the
    run's ``values`` that differ from ``RunSettings``' defaults (the defaults of ``conf/train.yaml``)."""
    found = {}
    for f in dataclasses.fields(RunSettings):
        if f.name in typed:
            found[f.name] = typed[f.name]
        elif f.name in values and f.default is not dataclasses.MISSING and values[f.name] != f.default:
            found[f.name] = values[f.name]
    return found


def refuse_unhonoured(kind: RunKind, config: DictConfig, composed: DictConfig, overrides: Sequence[str]) -> None:
    """Refuse, in one line naming the key and the kind, a run key the user set that ``kind`` does not honour (a key
    the kind decides itself is accepted at the value it uses).

    :param config: the run's resolved config (its plan's: a resumed run's saved one).
    :param composed: the config composed from the command line, whose ``overrides`` give the typed values.
    """
    names = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    typed = {name: composed.get(name) for name in names if name in RUN_KEYS and name in composed}
    for key, value in user_set_keys(resolved_values(config), typed).items():
        if key in kind.honoured or (key in kind.fixed and kind.fixed[key] == value):
            continue
        allowed = f"allowed: {key}={kind.fixed[key]}" if key in kind.fixed else f"leave {key} at its default"
        reason = kind.why.get(key, f"{kind.name} runs do not use it")
        raise ConfigError(f"{key}={value!r} is not honoured by {kind.name} runs ({reason}); {allowed}")
