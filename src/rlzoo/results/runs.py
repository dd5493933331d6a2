"""Read training results from run dirs and compare groups of runs: the data behind ``rlzoo.plot``.

Runs are found by their ``config.yaml`` and grouped by their resolved config, never by folder names: the env id, the
algorithm class, the srl_model, and any other config value that differs between the runs of that (env, algo) pair
(``algo.learning_rate`` in a sweep, say). Seeds, paths (an encoder's folder), devices, budgets and keys that do not
change learning are ignored, and so are keys that follow the representation (``env.render_size`` follows
``srl_model.height``, ``normalize`` follows ``srl_model.normalize``): a key whose value is the same for every run of
one representation does not split that representation's runs from the others'.
"""

from __future__ import annotations

import csv
import math
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from rlzoo.any_env.options import observation_label
from rlzoo.confined import JSON_CAP, read_text, stream_lines
from rlzoo.errors import ConfigError
from rlzoo.rundir import ERROR, RunDir
from rlzoo.untrusted import refuse_interpolations

# Config keys that do not make runs different experiments (prefixes end with a dot).
IGNORED_KEYS = (
    "seed", "run_dir", "total_timesteps", "total_episodes", "verbose", "progress_bar", "checkpoint_freq",
    "test_episodes", "test_envs", "max_test_steps", "test_steps", "deterministic_test", "sampled_test", "vec_env",
    "resume",
    "hardware.", "logger.",
    "srl_model.checkpoint",
    "srl_model.vec_wrapper.checkpoint",
)  # fmt: skip
IGNORED_SUFFIXES = (".device",)  # where a network runs (srl_model.vec_wrapper.device follows hardware.device)
DONE, FAILED, UNFINISHED = "done", "failed", "unfinished"


@dataclass
class RunResult:
    """The training episodes of one run dir.

    :param ends: agent steps (summed over envs) at the end of each episode, ascending.
    :param returns: the episode returns in the same order.
    :param per_episode: False when only ``returns100.csv`` was there (one point per 100-episode window).
    :param success_rate: ``test/success_rate`` of its test episodes (envs that report ``is_success``; else NaN).
    """

    path: Path
    config: DictConfig
    ends: np.ndarray
    returns: np.ndarray
    finished: bool
    per_episode: bool = True
    failed: bool = False
    success_rate: float = math.nan

    @property
    def status(self) -> str:
        """``done`` (``metrics.json``), ``failed`` (``error.txt``, no metrics) or ``unfinished`` (training, stopped)."""
        return DONE if self.finished else FAILED if self.failed else UNFINISHED

    @property
    def scored(self) -> bool:
        """Whether it counts in scores and curves: it did not fail and has a complete training episode."""
        return not self.failed and len(self.returns) > 0

    @property
    def env(self) -> str:
        return str(self.config.env.id)

    @property
    def algo(self) -> str:
        return str(self.config.algo._target_)

    @property
    def srl_model(self) -> str:
        return str(self.config.srl_model.name)

    @property
    def seed(self) -> int:
        return int(self.config.seed)

    @property
    def budget(self) -> int:
        """The agent steps this run was asked to train for."""
        return int(self.config.total_timesteps)

    @property
    def reached(self) -> int:
        """The agent steps its results cover: the last episode's end, and at least the budget once finished."""
        last = int(self.ends[-1]) if len(self.ends) else 0
        return max(last, self.budget) if self.finished else last

    def score(self, budget: int, last: int = 100) -> float:
        """Mean return of the last ``last`` episodes ending within ``budget`` agent steps (all episodes at or past
        the run's own budget, as training may overshoot it by part of a rollout); NaN if none."""
        count = len(self.ends) if budget >= self.budget else int(np.searchsorted(self.ends, budget, side="right"))
        if not self.per_episode:  # a returns100 row is already the mean of a window of 100 episodes
            return float(self.returns[count - 1]) if count else math.nan
        return float(self.returns[max(0, count - last) : count].mean()) if count else math.nan


@dataclass
class Group:
    """Runs of one experiment (same env, algorithm, srl_model and other learning-relevant config), over seeds.

    :param variant: ``key=value`` of config values that set this group apart from others of its (env, algo) pair.
    """

    env: str
    algo: str
    srl_model: str
    variant: tuple[str, ...] = ()
    srl_variant: tuple[str, ...] = ()
    runs: list[RunResult] = field(default_factory=list)
    implied: tuple[str, ...] = ()  # key=value of the keys that follow its representation (not compared apart)

    @property
    def algo_name(self) -> str:
        return self.algo.rsplit(".", 1)[-1]

    @property
    def observations(self) -> str:
        """The srl_model as tables name it: ``images`` for the env's own image observations (Atari ...)."""
        modes = {OmegaConf.select(run.config, "env.observation") for run in self.runs}
        return observation_label(self.srl_model, modes.pop() if len(modes) == 1 else None)

    @property
    def label(self) -> str:
        extra = ", ".join(self.variant + self.srl_variant)
        return f"{self.algo_name} / {self.observations}" + (f" ({extra})" if extra else "")

    @property
    def scored_runs(self) -> list[RunResult]:
        """The runs that count in its scores and curves (see :attr:`RunResult.scored`)."""
        return [run for run in self.runs if run.scored]

    @property
    def common_budget(self) -> int:
        """The agent steps that all its scored runs reached (their budget, or less for runs still training); 0 when
        none has a training episode."""
        return min((run.budget if run.finished else run.reached for run in self.scored_runs), default=0)

    @property
    def success_rate(self) -> float:
        """Mean ``test/success_rate`` over its finished runs that report one (NaN when none does)."""
        rates = [run.success_rate for run in self.runs if not math.isnan(run.success_rate)]
        return float(np.mean(rates)) if rates else math.nan

    def status_counts(self) -> dict[str, int]:
        """Runs per status (done, failed, unfinished), statuses without runs left out."""
        counts = Counter(run.status for run in self.runs)
        return {status: counts[status] for status in (DONE, UNFINISHED, FAILED) if counts[status]}


def find_runs(folder: str | Path) -> list[RunDir]:
    """Every run dir (a folder with ``config.yaml``) under ``folder``, itself included; hidden folders (Hydra's
    ``.hydra/``) are skipped, and a run dir's sub-folders are not searched."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise ConfigError(f"dir={folder}: no such folder")
    found: list[RunDir] = []
    pending = [root]
    while pending:
        current = pending.pop()
        if RunDir(current).is_run():
            found.append(RunDir(current))
            continue
        pending.extend(p for p in sorted(current.iterdir(), reverse=True) if p.is_dir() and not p.name.startswith("."))
    return sorted(found, key=lambda run: str(run.path))


def read_monitor(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Returns and lengths of the complete rows of an SB3 Monitor CSV, plain or gzipped (``.gz``: a result record's);
    a row being written is skipped."""
    returns, lengths = [], []
    lines = stream_lines(path.parent, path.name)
    for row in csv.reader(line for line in lines if not line.startswith("#")):
        try:
            ret, length = float(row[0]), int(row[1])
        except (ValueError, IndexError):
            continue  # the "r,l,t" header, or a half-written last line
        returns.append(ret)
        lengths.append(length)
    return np.asarray(returns, dtype=float), np.asarray(lengths, dtype=np.int64)


def monitor_episodes(files: Sequence[Path], n_envs: int) -> tuple[np.ndarray, np.ndarray]:
    """Merge the Monitor files of a vectorised env into (episode end in agent steps, return), in time order.

    The envs step in lockstep, so env ``k``'s episode ends at ``n_envs`` times (the steps env ``k`` has taken).
    """
    ends, returns = [], []
    for path in files:
        env_returns, env_lengths = read_monitor(path)
        ends.append(np.cumsum(env_lengths) * n_envs)
        returns.append(env_returns)
    all_ends, all_returns = np.concatenate(ends), np.concatenate(returns)
    order = np.argsort(all_ends, kind="stable")
    return all_ends[order], all_returns[order]


def returns100_points(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(frame, mean) of every complete row of ``returns100.csv``."""
    lines = stream_lines(path.parent, path.name)
    rows = [row for row in csv.DictReader(lines) if row.get("mean") not in (None, "")]
    return np.array([int(r["frame"]) for r in rows], dtype=np.int64), np.array([float(r["mean"]) for r in rows])


def read_run(run: RunDir) -> RunResult:
    """The training episodes of ``run``: from its Monitor files, else from ``returns100.csv``; a config holding an
    interpolation is refused (tables show values as written, never resolved: ``oc.env`` ...)."""
    config = run.read_config()
    refuse_interpolations(config, run.config)
    files = run.episode_logs()
    finished = os.path.lexists(run.metrics)  # whatever is there is read through the confined layer
    failed = os.path.lexists(run.error) and not finished
    success = float(run.read_metrics().get("test/success_rate", math.nan)) if finished else math.nan
    if files:
        ends, returns = monitor_episodes(files, int(config.get("n_envs", len(files))))
        return RunResult(run.path, config, ends, returns, finished, failed=failed, success_rate=success)
    if os.path.lexists(run.returns100):
        ends, returns = returns100_points(run.returns100)
        return RunResult(
            run.path, config, ends, returns, finished, per_episode=False, failed=failed, success_rate=success
        )
    return RunResult(
        run.path, config, np.zeros(0, np.int64), np.zeros(0), finished, failed=failed, success_rate=success
    )


def failure(run: RunResult) -> str:
    """The last line of a failed run's ``error.txt`` (empty for a run that did not fail)."""
    if not run.failed:
        return ""
    lines = read_text(Path(run.path), ERROR, JSON_CAP).strip().splitlines()
    return lines[-1] if lines else "?"


def leaves(config: DictConfig, resolve: bool = True) -> dict[str, Any]:
    """``{"algo.gamma": 0.99, ...}`` for every leaf of the config (lists as strings)."""
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
        else:
            flat[prefix[:-1]] = repr(node) if isinstance(node, list) else node

    walk(OmegaConf.to_container(config, resolve=resolve), "")
    return flat


def _flat(config: DictConfig) -> dict[str, Any]:
    """:func:`leaves` of the config, the keys that do not make runs different experiments left out."""
    return {k: v for k, v in leaves(config).items() if not _ignored(k)}


def _ignored(key: str) -> bool:
    return key.endswith(IGNORED_SUFFIXES) or any(key == i or key.startswith(i) for i in IGNORED_KEYS if i)


def _differing(configs: Iterable[dict[str, Any]], keep: Any) -> list[str]:
    configs = list(configs)
    keys = sorted({k for c in configs for k in c if keep(k)})
    return [k for k in keys if len({repr(c.get(k)) for c in configs}) > 1]


def _representation(flat: dict[str, Any]) -> str:
    """What identifies a run's representation: its srl_model values."""
    return repr(sorted((k, repr(v)) for k, v in flat.items() if k.startswith("srl_model.")))


def implied_keys(flat: Sequence[dict[str, Any]], keys: Iterable[str]) -> list[str]:
    """The ``keys`` that follow the representation: runs of two or more representations, and within each one
    representation a single value of the key (``env.render_size`` following ``srl_model.height``)."""
    by_representation: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for values in flat:
        by_representation[_representation(values)].append(values)
    if len(by_representation) < 2:
        return []
    return [
        key
        for key in keys
        if all(len({repr(values.get(key)) for values in runs}) == 1 for runs in by_representation.values())
    ]


def group_runs(results: Sequence[RunResult]) -> list[Group]:
    """Group runs by env, algorithm class, srl_model and the other config values that differ between them (keys that
    follow the representation apart: :func:`implied_keys`)."""
    flat = [_flat(r.config) for r in results]
    by_pair: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, result in enumerate(results):
        by_pair[(result.env, result.algo)].append(i)
    groups: dict[tuple[Any, ...], Group] = {}
    for (env, algo), members in by_pair.items():
        algo_keys = _differing((flat[i] for i in members), lambda k: not k.startswith("srl_model."))
        implied = implied_keys([flat[i] for i in members], algo_keys)
        algo_keys = [k for k in algo_keys if k not in implied]
        by_srl: dict[str, list[int]] = defaultdict(list)
        for i in members:
            by_srl[results[i].srl_model].append(i)
        for srl, srl_members in by_srl.items():
            srl_keys = _differing((flat[i] for i in srl_members), lambda k: k.startswith("srl_model."))
            for i in srl_members:
                variant = tuple(f"{k}={flat[i].get(k)}" for k in algo_keys)
                srl_variant = tuple(f"{k}={flat[i].get(k)}" for k in srl_keys)
                key = (env, algo, srl, variant, srl_variant)
                group = groups.setdefault(key, Group(env, algo, srl, variant, srl_variant))
                group.implied = tuple(f"{k}={flat[i].get(k)}" for k in implied)
                group.runs.append(results[i])
    for group in groups.values():
        group.runs.sort(key=lambda r: (r.seed, str(r.path)))
    return sorted(groups.values(), key=lambda g: (g.env, g.algo_name, g.srl_model, g.variant, g.srl_variant))


@dataclass(frozen=True)
class Curve:
    """A group's learning curve on a common x grid: mean and standard error over the seeds present at each x."""

    x: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    n: np.ndarray


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last ``window`` values at each position (of all values so far for the first ones)."""
    sums = np.concatenate([[0.0], np.cumsum(values)])
    index = np.arange(1, len(values) + 1)
    start = np.maximum(index - window, 0)
    return (sums[index] - sums[start]) / (index - start)


def learning_curve(group: Group, x: str = "timesteps", smooth: int = 100, points: int = 200) -> Curve:
    """Mean ± SE over seeds of each run's moving-average return (over ``smooth`` episodes).

    A finished run counts up to its budget (its last rollout may overshoot it); a run still training up to its last
    episode. With ``x="episodes"``, the grid stops at the fewest episodes of a finished run, so that the mean does
    not jump where seeds with shorter episodes run out.

    :param x: ``timesteps`` (agent steps summed over envs) or ``episodes``; the grid has ``points`` values.
    """
    runs = group.scored_runs
    columns = []
    for run in runs:
        if x == "episodes":  # a returns100 row stands for 100 episodes
            at = np.arange(1, len(run.returns) + 1) * (1 if run.per_episode else 100)
            columns.append((at, int(at[-1])))
        else:
            columns.append((run.ends, run.budget if run.finished else run.reached))
    finished = [reach for run, (_, reach) in zip(runs, columns, strict=True) if run.finished]
    end = min(finished) if x == "episodes" and finished else max(reach for _, reach in columns)
    grid = np.linspace(0, end, points + 1)[1:]
    table = np.full((len(runs), len(grid)), np.nan)
    for i, (run, (at, reach)) in enumerate(zip(runs, columns, strict=True)):
        values = moving_average(run.returns, smooth) if run.per_episode else run.returns
        index = np.searchsorted(at, grid, side="right") - 1
        valid = (index >= 0) & (grid <= reach)
        table[i, valid] = values[index[valid]]
    present = ~np.isnan(table)
    n = present.sum(axis=0)
    filled = np.where(present, table, 0.0)
    mean = np.divide(filled.sum(axis=0), n, out=np.full(len(grid), np.nan), where=n > 0)
    squares = np.where(present, (table - mean) ** 2, 0.0).sum(axis=0)
    se = np.sqrt(np.divide(squares, n * (n - 1), out=np.full(len(grid), np.nan), where=n > 1))
    return Curve(grid, mean, se, n)
