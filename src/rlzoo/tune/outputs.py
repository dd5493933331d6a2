"""What a study writes into its folder: ``trials.csv``, the best trial as a tuned pair, and Optuna's plots.

Every worker rewrites ``trials.csv`` and the tuned pair after each trial (under a lock, from the journal, so the files
always show the whole study), and the plots when it ends.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.trial import FrozenTrial, TrialState

from rlzoo.config import user_config_dir
from rlzoo.files import atomic_write_text, locked
from rlzoo.tune.settings import TuneSettings
from rlzoo.tune.space import SearchSpace, lookup, with_values
from rlzoo.tune.study import DUPLICATE, LOST
from rlzoo.tune.trial import CONFIG, ERROR, RUN_DIR, STEPS

TRIALS_CSV = "trials.csv"
PLOTS = "plots"
# The run keys a tuned pair always sets (with the algorithm's keywords): they decide what the hyperparameters mean.
PAIR_RUN_KEYS = ("total_timesteps", "n_envs", "vec_env")


def tuned_pair_path(root: Path, name: str) -> Path:
    """``<root>/algo_env/tuned/<name>.yaml``: the file ``algo_env=tuned/<name>`` picks from the config dir ``root``."""
    return root / "algo_env" / "tuned" / f"{name}.yaml"


def pair_usage(settings: TuneSettings, train_command: str) -> str:
    """``train_command`` using the study's tuned pair (exported: from the user config folder, which is on Hydra's
    search path; else from the study folder)."""
    search_path = "" if settings.export else f" 'hydra.searchpath=[file://{settings.study_dir / 'conf'}]'"
    return f"{train_command}{search_path} algo_env=tuned/{settings.name}"


@dataclass(frozen=True)
class StudyFiles:
    """The files a study wrote, its best trial (None before any trial completed), how to use its tuned pair."""

    trials_csv: Path
    best: FrozenTrial | None
    pairs: tuple[Path, ...]
    usage: str
    plots: tuple[Path, ...] = ()
    skipped_plots: tuple[str, ...] = ()


def write_outputs(
    study: optuna.Study,
    settings: TuneSettings,
    space: SearchSpace,
    base: Mapping[str, Any],
    usage: str,
    plots: bool = False,
) -> StudyFiles:
    """Rewrite ``trials.csv`` and the tuned pair (and the plots when ``plots``) from the study as it is now."""
    with locked(settings.study_dir / ".outputs.lock"):  # the workers rewrite the study's files in turn
        trials = study.get_trials(deepcopy=False)
        csv_path = settings.study_dir / TRIALS_CSV
        atomic_write_text(csv_path, trials_table(trials, space))
        best = best_trial(trials)
        pairs: list[Path] = []
        if best is not None:
            text = tuned_pair(best, trials, settings, base, usage)
            pairs.append(tuned_pair_path(settings.study_dir / "conf", settings.name))
            if settings.export:  # the user config folder, on Hydra's search path (never rlzoo's own conf/)
                pairs.append(tuned_pair_path(user_config_dir(), settings.name))
            for path in pairs:
                atomic_write_text(path, text)
        written, skipped = write_plots(study, settings.study_dir / PLOTS) if plots else ([], [])
    return StudyFiles(csv_path, best, tuple(pairs), usage, tuple(written), tuple(skipped))


def best_trial(trials: Sequence[FrozenTrial]) -> FrozenTrial | None:
    """The complete trial with the highest value."""
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    return max(complete, key=lambda t: float(t.value or 0.0)) if complete else None


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return "" if value is None else value
    return json.dumps(value, separators=(",", ":"))


def trials_table(trials: Sequence[FrozenTrial], space: SearchSpace) -> str:
    """One row per trial: number, state, value, last intermediate value, steps, seconds, every entry's value (a named
    choice by its name), run dir, error."""
    named = {p.path for p in space.params if p.named}
    paths = [p.path for p in space.params]
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(["number", "state", "value", "last_eval", "steps", "seconds", *paths, "run_dir", "error"])
    for t in trials:
        config = t.user_attrs.get(CONFIG, {})
        last = t.intermediate_values[max(t.intermediate_values)] if t.intermediate_values else None
        seconds = round(t.duration.total_seconds(), 1) if t.duration is not None else None
        values = [t.params.get(p) if p in named else config.get(p) for p in paths]
        state = "LOST" if LOST in t.user_attrs else "DUPLICATE" if DUPLICATE in t.user_attrs else t.state.name
        twin = t.user_attrs.get(DUPLICATE)
        error = (
            t.user_attrs.get(ERROR) or t.user_attrs.get(LOST) or (f"repeats trial {twin}" if twin is not None else "")
        )
        row = [t.number, state, t.value, last, t.user_attrs.get(STEPS), seconds, *values, t.user_attrs.get(RUN_DIR)]
        writer.writerow([_cell(v) for v in row] + [error])
    return stream.getvalue()


def _yaml_value(value: Any) -> str:
    """``value`` as one line of YAML (flow style)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def tuned_pair(
    best: FrozenTrial,
    trials: Sequence[FrozenTrial],
    settings: TuneSettings,
    base: Mapping[str, Any],
    usage: str,
) -> str:
    """The best trial as a tuned (algo, env) pair (``# @package _global_``): the algorithm's keywords and the run
    keys that give them their meaning, each sampled value marked ``# searched``."""
    sampled: dict[str, Any] = best.user_attrs.get(CONFIG, {})
    config = with_values(base, sampled)
    states = [t.state for t in trials if LOST not in t.user_attrs]
    counts = ", ".join(f"{n} {state.name.lower()}" for state in _STATES if (n := sum(s == state for s in states)))
    env = dict(config.get("env", {}))
    lines = [
        "# @package _global_",
        f"# {settings.name}: tuned by rlzoo.tune in {settings.dir} ({len(states)} trials: {counts}).",
        f"# Best: trial {best.number}, mean return {best.value:.4g} over {settings.eval_episodes} deterministic "
        f"episodes after {best.user_attrs.get(STEPS, settings.budget)} agent steps ({best.user_attrs.get(RUN_DIR)}).",
        f"# Tuned on {env.pop('id', None)} {_yaml_value(env)} with srl_model {lookup(config, 'srl_model.name')}.",
        f"# Use: {usage}",
    ]
    keys = list(PAIR_RUN_KEYS)
    if "normalize" in sampled or config.get("normalize") != lookup(config, "srl_model.normalize"):
        keys.append("normalize")
    lines += [f"{key}: {_yaml_value(config.get(key))}{_mark(key, sampled)}" for key in keys]
    lines.append("algo:")
    for key, value in config.get("algo", {}).items():
        if key not in ("_target_", "_partial_"):
            lines.append(f"  {key}: {_yaml_value(value)}{_mark(f'algo.{key}', sampled)}")
    others = {p: v for p, v in sampled.items() if not p.startswith("algo.") and p not in keys}
    if others:  # entries outside the algorithm's keywords and the run keys (env.*, srl_model.* ...)
        lines.append("# searched:")
        lines.append(yaml.safe_dump(with_values({}, others), sort_keys=False).rstrip())
    return "\n".join(lines) + "\n"


_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL, TrialState.RUNNING)


def _mark(path: str, sampled: Mapping[str, Any]) -> str:
    return "  # searched" if any(p == path or p.startswith(f"{path}.") for p in sampled) else ""


class _OnceEvaluator(optuna.importance.FanovaImportanceEvaluator):
    """fANOVA importances (seeded), computed once for both the HTML and the PNG plot."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self._cache: dict[Any, dict[str, float]] = {}

    def evaluate(self, study: optuna.Study, params: Any = None, *, target: Any = None) -> dict[str, float]:
        key = (tuple(params) if params is not None else None, target)
        if key not in self._cache:
            self._cache[key] = super().evaluate(study, params, target=target)
        return self._cache[key]


def _plot_functions() -> dict[str, tuple[Callable[..., Any], Callable[..., Any]]]:
    from optuna import visualization as html
    from optuna.visualization import matplotlib as png

    evaluator = _OnceEvaluator()
    return {
        "optimization_history": (html.plot_optimization_history, png.plot_optimization_history),
        "param_importances": (
            functools.partial(html.plot_param_importances, evaluator=evaluator),
            functools.partial(png.plot_param_importances, evaluator=evaluator),
        ),
        "parallel_coordinate": (html.plot_parallel_coordinate, png.plot_parallel_coordinate),
    }


def write_plots(study: optuna.Study, folder: Path) -> tuple[list[Path], list[str]]:
    """Optuna's optimisation history, parameter importances and parallel coordinates as HTML (plotly, its script
    beside them: no network needed) and PNG (matplotlib); a plot the study cannot make yet is skipped, with why."""
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    skipped: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna's matplotlib plots are marked experimental
        for name, (html_plot, png_plot) in _plot_functions().items():
            try:
                html_plot(study).write_html(folder / f"{name}.html", include_plotlyjs="directory")
                axes = png_plot(study)
                figure = (axes.flat[0] if hasattr(axes, "flat") else axes).figure
                figure.savefig(folder / f"{name}.png", dpi=100, bbox_inches="tight")
                plt.close(figure)
            except (ValueError, RuntimeError, ZeroDivisionError) as error:
                skipped.append(f"{name}: {error}".splitlines()[0])
                continue
            written += [folder / f"{name}.html", folder / f"{name}.png"]
    return written, skipped
