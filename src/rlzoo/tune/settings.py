"""The keys of ``conf/tune.yaml`` (``n_trials`` and the ``tune`` node) as a typed schema, checked before any work."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rlzoo.config import CONFIG_DIR, PACKAGE_DIR, USER_CONFIG_ENV, inside_package, user_config_dir
from rlzoo.errors import ConfigError
from rlzoo.schema import at_least, check_value, parse

# What a tune config holds beside the train config's keys.
TUNE_KEYS = ("n_trials", "tune", "search_space")
STORAGE_SUFFIX = ".journal"


@dataclass(frozen=True)
class TuneKeys:
    """The ``tune.*`` keys (see ``conf/tune.yaml``)."""

    name: str
    dir: str
    storage: str
    budget: int = field(default=100_000, metadata=at_least(1))
    eval_freq: int | None = field(default=None, metadata=at_least(1))
    eval_episodes: int = field(default=5, metadata=at_least(1))
    sampler: Literal["tpe", "random"] = "tpe"
    n_startup_trials: int = field(default=5, metadata=at_least(0))
    seed: int = field(default=0, metadata=at_least(0))
    pruner: Literal["median", "halving", "hyperband", "none"] = "median"
    warmup_steps: int | None = field(default=None, metadata=at_least(0))
    resume: bool = False
    export: bool = True
    plots: bool = True
    workers: int = field(default=1, metadata=at_least(1))
    worker: int = field(default=0, metadata=at_least(0))


@dataclass(frozen=True)
class TuneSettings(TuneKeys):
    """``n_trials`` and the ``tune.*`` keys, checked, with ``dir`` and ``storage`` made absolute."""

    n_trials: int = 30

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> TuneSettings:
        """The settings of a resolved tune config (``values``: the whole config as plain containers)."""
        tune = dict(values.get("tune") or {})
        for key in ("name", "dir", "storage"):
            if tune.get(key) in (None, ""):
                raise ConfigError(f"tune.{key} is missing; see conf/tune.yaml")
        keys = parse(TuneKeys, tune, prefix="tune.", what="tune key")
        n_trials = check_value("n_trials", values.get("n_trials"), int, 1)
        absolute = {k: str(Path(getattr(keys, k)).expanduser().resolve()) for k in ("dir", "storage")}
        settings = cls(**{**keys.__dict__, **absolute, "n_trials": n_trials})
        settings.check()
        return settings

    @property
    def study_dir(self) -> Path:
        """The study folder: trial run dirs, ``trials.csv``, the tuned pair, the plots."""
        return Path(self.dir)

    @property
    def journal(self) -> Path:
        """The Optuna journal file every worker shares."""
        return Path(self.storage)

    @property
    def evaluation_interval(self) -> int:
        """Agent steps between two intermediate evaluations (``eval_freq``; null: a tenth of the budget)."""
        return self.eval_freq or max(1, self.budget // 10)

    @property
    def warmup(self) -> int:
        """Agent steps before a trial may be pruned (``warmup_steps``; null: a third of the budget)."""
        return self.budget // 3 if self.warmup_steps is None else self.warmup_steps

    @property
    def trials_dir(self) -> Path:
        """Where every trial writes its run dir (``<dir>/trials/<number>``)."""
        return self.study_dir / "trials"

    def check(self) -> None:
        """What the schema cannot say: how keys relate."""
        if self.pruner != "none" and self.evaluation_interval >= self.budget:
            raise ConfigError(
                f"tune.eval_freq={self.eval_freq} ≥ tune.budget={self.budget}: no intermediate evaluation would feed "
                "the pruner; allowed: eval_freq < budget, or tune.pruner=none"
            )
        if self.worker >= self.workers:
            raise ConfigError(f"tune.worker={self.worker}; allowed: 0 to tune.workers-1={self.workers - 1}")
        if self.journal.suffix != STORAGE_SUFFIX:
            raise ConfigError(
                f"tune.storage={self.storage} must end in {STORAGE_SUFFIX}: an Optuna journal file (it works on a "
                "shared filesystem without a server)"
            )
        self._check_outside_package()
        if self.journal.parent != self.study_dir and not self.journal.parent.is_dir():
            raise ConfigError(
                f"tune.storage={self.storage}: its folder {self.journal.parent} does not exist; create it first (a "
                "folder every worker can reach), or leave tune.storage out to keep the journal in tune.dir"
            )

    def _check_outside_package(self) -> None:
        """rlzoo never writes into its installed package: not the study, not the exported pair."""
        for key, path in (("tune.dir", self.study_dir), ("tune.storage", self.journal)):
            if inside_package(path):
                raise ConfigError(
                    f"{key}={path} lies inside rlzoo's package ({PACKAGE_DIR} or {CONFIG_DIR}); rlzoo never writes "
                    "there: choose a folder outside it"
                )
        if self.export and inside_package(user_config_dir()):
            raise ConfigError(
                f"tune.export=true would write the tuned pair into {user_config_dir()}, inside rlzoo's package; set "
                f"{USER_CONFIG_ENV} to a folder of your own (or tune.export=false: the pair stays in tune.dir)"
            )
