"""The kinds of run behind the one run skeleton (:func:`rlzoo.training.run.run`): what a kind plans and builds, and
the run keys it honours.

A kind (single-agent, multi-agent) is a :class:`RunKind`: it plans a run (:class:`KindPlan`), builds its learners
and envs (:class:`Learning`), loads a trained run's agent and replays it (:class:`ReplayRequest`), and says which run
keys of ``conf/train.yaml`` it honours. A run's kind is resolved once, by :func:`resolve_kind` (from a config) or
:func:`kind_of_run` (from a run dir's saved config), through the registry :data:`KINDS`, which each kind's package
fills when it is imported (:func:`register_kind`; :mod:`rlzoo.kinds` imports every kind's package): adding a kind is
one class and one :class:`KindEntry`, in the kind's own package. The skeleton does the rest
once for every kind: the run dir's claim and lock (fresh, or cut back to the resume point), the write-fault guard,
loggers and W&B, the run clock and the metrics file. A kind's learning uses the shared writers: the returns100 curve
and checkpoints with their resume state (:mod:`rlzoo.training.callbacks`). A run key a kind does not honour is refused
before anything is written (:func:`refuse_unhonoured`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from omegaconf import DictConfig

from rlzoo.config import resolved_values
from rlzoo.errors import ConfigError
from rlzoo.hardware import Hardware
from rlzoo.rundir import FINAL, RunDir
from rlzoo.training.settings import RunSettings
from rlzoo.untrusted import check_links

if TYPE_CHECKING:
    import numpy as np
    from stable_baselines3.common.base_class import BaseAlgorithm

    from rlzoo.training.budget import RunClock
    from rlzoo.training.plan import LogPlan
    from rlzoo.training.requeue import RequeueSignal
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
    """What a kind's build may use of the run's context (:class:`rlzoo.training.context.RunContext`): the run clock,
    Slurm's warning (armed once the run dir is claimed, when the run keeps checkpoints: the learning saves one and
    hands it on) and the things to close."""

    @property
    def clock(self) -> RunClock: ...
    @property
    def requeue(self) -> RequeueSignal: ...

    def on_exit(self, callback: Callable[..., Any], *args: Any) -> None:
        """Call ``callback(*args)`` when the run ends (envs to close ...)."""


@dataclass(frozen=True)
class ReplayRequest:
    """What to replay of a trained run (``python -m rlzoo.enjoy``, the report's replays).

    :param checkpoint: the model (the checkpoint vocabulary of :meth:`rlzoo.rundir.RunDir.find_model`).
    :param episodes: episodes to play, episode ``i`` seeded ``seed + i``.
    :param frames: record an ``rgb_array`` frame per step.
    :param plots: the figures to write (``trajectory``, ``action_probabilities``) into ``out`` as
        ``<label><suffix>_<name>.png`` (label: ``final``, ``best``, ``checkpoint_<steps>``).
    :param trusted: load with SB3's own ``load`` (it unpickles) and any ``_target_``.
    :param allow: module names whose ``_target_`` entries the caller trusts.
    """

    checkpoint: int | str = FINAL
    episodes: int = 1
    deterministic: bool = True
    seed: int = 0
    frames: bool = False
    plots: tuple[str, ...] = ()
    out: Path | None = None
    suffix: str = ""
    trusted: bool = False
    allow: tuple[str, ...] = ()


@dataclass
class Replayed:
    """What a replay played: ``label`` (``final``, ``best``, ``checkpoint_<steps>``), the console line, the returns
    (a multi-agent run's: its trained agents') and lengths, the returns table (CSV), the frames of every episode in
    order and the figures written."""

    label: str
    summary: str
    returns: list[float]
    lengths: list[int]
    table: str
    frames: list[np.ndarray] = field(default_factory=list)
    fps: int = 30
    figures: list[Path] = field(default_factory=list)


class RunKind(Protocol):
    """One kind of run: its name (in messages), the run keys it honours, its plan and its build; and for a trained
    run of the kind, its agent (:meth:`load`) and its replay (:meth:`replay`)."""

    name: str
    honoured: frozenset[str]
    fixed: Mapping[str, Any]  # run keys the kind decides itself, with the value it uses (accepted when set so)
    why: Mapping[str, str]  # why a key is not honoured, for the refusal's line

    def plan(self, cfg: DictConfig, overrides: Sequence[str]) -> KindPlan: ...

    def build(self, plan: Any, context: Resources) -> Learning: ...

    def load(
        self, run: RunDir, checkpoint: int | str | None, *, deterministic: bool, trusted: bool, allow: Sequence[str]
    ) -> Any:
        """The test agent of a trained run of this kind (learning off, on the CPU)."""
        ...

    def check_replay(self, request: ReplayRequest) -> None:
        """Refuse, in one line, what this kind cannot replay (a checkpoint, a figure)."""

    def replay(self, run: RunDir, request: ReplayRequest) -> Replayed:
        """Play ``request.episodes`` episodes of a trained run of this kind (:meth:`check_replay` first), recording
        what is asked for."""
        ...


@dataclass(frozen=True)
class KindEntry:
    """A kind in the registry: its name, what makes it (a class or a function that imports the kind's modules only
    for a run of it) and the config keys that mark a run of it (a dotted key marks when present; no key: the kind of
    every other run)."""

    name: str
    make: Callable[[], RunKind]
    marks: tuple[str, ...] = ()

    def marks_config(self, config: DictConfig) -> bool:
        return any(_present(config, key) for key in self.marks)


def _present(config: DictConfig, dotted: str) -> bool:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, DictConfig) or node.get(part) is None:
            return False
        node = node.get(part)
    return True


# The kinds of run, latest registered first: the first whose marks a config has wins; the one without marks takes
# every other config. Filled by the kinds' packages as they are imported.
SINGLE_AGENT = "single-agent"
KINDS: list[KindEntry] = []


def register_kind(entry: KindEntry) -> None:
    """Add a kind ahead of those registered before (replacing one of the same name)."""
    KINDS[:] = [entry, *(known for known in KINDS if known.name != entry.name)]


def kind_entry(config: DictConfig) -> KindEntry:
    """The registry's entry for a run of ``config`` (a composed or a saved config)."""
    marked = next((entry for entry in KINDS if entry.marks and entry.marks_config(config)), None)
    found = marked or next((entry for entry in KINDS if not entry.marks), None)
    if found is None:
        raise ConfigError("no kind of run takes this config: import rlzoo.kinds, which registers every kind")
    return found


def resolve_kind(cfg: DictConfig) -> RunKind:
    """The kind of run ``cfg`` asks for; with ``resume=<run dir>``, the saved run's."""
    resume = cfg.get("resume")
    if resume and RunDir(Path(str(resume))).is_run():
        cfg = RunDir(Path(str(resume))).read_config()
    return kind_entry(cfg).make()


def kind_of_run(run_dir: str | Path) -> tuple[RunKind, RunDir]:
    """The kind of the trained run in ``run_dir`` (from its saved config), and the run dir (:func:`open_run`)."""
    run = open_run(run_dir)
    return kind_entry(run.read_config()).make(), run


def open_run(run_dir: str | Path) -> RunDir:
    """The run dir at ``run_dir``, or a ConfigError saying why it is not one (or that a link in it leads out)."""
    run = RunDir(Path(run_dir).expanduser())
    if not run.path.is_dir():
        raise ConfigError(f"run={run_dir}: no such folder; pass the folder a training run wrote (with config.yaml)")
    if not run.is_run():
        raise ConfigError(
            f"run={run_dir} is not a run dir (it has no config.yaml); pass the folder a training run wrote, "
            "e.g. outputs/<date>/<time>_<algo>_<env>"
        )
    check_links(run.path)  # trusted or not: what is read and written here (enjoy/) stays inside the run dir
    return run


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
