"""One self-contained HTML page for a folder of runs: the results table, learning curves, the encoders' metrics, a
replay of each group's best seed and every run's config. Images are embedded (``data:`` URIs); no script, no
stylesheet or font from elsewhere, so the file opens anywhere, offline, and can be mailed as it is.
"""

from __future__ import annotations

import base64
import datetime
import html
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from rlzoo.files import atomic_write_text
from rlzoo.reporting.figures import file_name, plot_env
from rlzoo.reporting.media import EncoderInfo, Replay, best_replays, encoder_folders, read_encoder
from rlzoo.results import stats as results_stats
from rlzoo.results import verdicts
from rlzoo.results.comparison import AUTO, Comparison, compare, table_cells
from rlzoo.results.scores import SCORES

REPORT = "report.html"
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; } th { background: #f3f3f3; }
tr.baseline td { background: #eef6ff; } tr.failed td { color: #a00; }
.notes { color: #555; font-size: 0.9em; } figure { display: inline-block; margin: 0.5em; text-align: center; }
figcaption { font-size: 0.85em; color: #444; } pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; }
details { margin: 0.3em 0; } summary { cursor: pointer; }
"""
NUMERIC = {"budget (steps)", "seeds"}  # besides every score's columns and the probabilities


@dataclass(frozen=True)
class ReportPage:
    """What :func:`write_report` wrote."""

    path: Path
    comparison: Comparison
    figures: int
    replays: list[Replay]
    encoders: list[EncoderInfo]


def _img(data: bytes, mime: str, alt: str, width: int | None = None) -> str:
    size = f' width="{width}"' if width else ""
    encoded = base64.b64encode(data).decode()
    return f'<img src="data:{mime};base64,{encoded}" alt="{html.escape(alt)}"{size}>'


def is_numeric(title: str) -> bool:
    """Whether a column holds numbers (right-aligned): a count, a score's column or a probability."""
    scores = tuple(f"{score.title} " for score in SCORES.values())
    return title in NUMERIC or title.startswith(("p vs", "P(>", *scores))


def _table(header: Sequence[str], lines: Sequence[Sequence[str]], classes: Sequence[str] = ()) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for i, line in enumerate(lines):
        cells = "".join(
            f'<td class="num">{html.escape(c)}</td>' if is_numeric(h) else f"<td>{html.escape(c)}</td>"
            for h, c in zip(header, line, strict=True)
        )
        css = f' class="{classes[i]}"' if i < len(classes) and classes[i] else ""
        body.append(f"<tr{css}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _results(comparison: Comparison, verdict_of: str | None, verdict_ci: float) -> str:
    stats = results_stats.row_stats(comparison.rows, comparison.baseline, reference=verdict_of, confidence=verdict_ci)
    header, lines = table_cells(comparison.rows, comparison.baseline, stats, verdict_of)
    classes = ["baseline" if r.is_baseline else "failed" if not r.n else "" for r in comparison.rows]
    missing = [] if results_stats.rliable_installed() else [results_stats.MISSING_NOTE]
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in comparison.notes + missing)
    what = results_stats.CAPTION.format(last=100, reps=results_stats.REPS) + " p vs baseline: Welch t-test."
    profiles = []
    with tempfile.TemporaryDirectory() as scratch:
        for path in results_stats.plot_profiles(comparison.rows, Path(scratch)):
            profiles.append(f"<figure>{_img(path.read_bytes(), 'image/png', 'performance profile')}</figure>")
    table = _table(header, lines, classes)
    return f"<h2>Results</h2><p class='notes'>{html.escape(what)}</p>{table}<ul class='notes'>{notes}</ul>" + "".join(
        profiles
    )


def _curves(comparison: Comparison) -> tuple[str, int]:
    figures = []
    with tempfile.TemporaryDirectory() as scratch:
        for env in sorted({g.env for g in comparison.groups if g.scored_runs}):
            path = plot_env(
                env, [g for g in comparison.groups if g.env == env], Path(scratch) / f"{file_name(env)}.png"
            )
            figures.append(f"<figure>{_img(path.read_bytes(), 'image/png', f'learning curves on {env}')}</figure>")
    return "<h2>Learning curves</h2>" + "".join(figures), len(figures)


def _encoders(encoders: Sequence[EncoderInfo]) -> str:
    if not encoders:
        return ""
    names = sorted({k for e in encoders for k in e.metrics if k.startswith("srl/gtc/")})
    header = ["method", "env", "state dim", "KNN-MSE", "GTC mean", *(n.split("/")[-1] for n in names), "folder"]

    def number(info: EncoderInfo, key: str) -> str:
        value = info.metrics.get(key)
        return "—" if value is None else f"{value:.4g}"

    lines = [
        [e.method, str(e.metadata.get("env_id")), str(e.metadata.get("state_dim")), number(e, "srl/knn_mse"),
         number(e, "srl/gtc_mean"), *(number(e, n) for n in names), str(e.path)]
        for e in encoders
    ]  # fmt: skip
    states = "".join(
        f"<figure>{_img(e.states_png, 'image/png', f'{e.method} states', 480)}<figcaption>{html.escape(e.method)}"
        f"</figcaption></figure>"
        for e in encoders
        if e.states_png
    )
    explained = "KNN-MSE: lower is better; GTC: best absolute correlation of a state dimension with each ground truth"
    return f"<h2>Encoders</h2><p class='notes'>{explained}</p>{_table(header, lines)}{states}"


def _replays(replays: Sequence[Replay]) -> str:
    if not replays:
        return ""
    figures = "".join(
        f"<figure>{_img(r.gif, 'image/gif', f'replay of {r.run.path.name}')}<figcaption>{html.escape(_caption(r))}"
        "</figcaption></figure>"
        for r in replays
    )
    return f"<h2>Best seed of each group</h2><p class='notes'>one deterministic test episode</p>{figures}"


def _caption(replay: Replay) -> str:
    """``PPO / ground_truth, seed 1: score 480.2, this episode 500.0``: algorithm, representation and seed."""
    run = replay.run
    algo = run.algo.rsplit(".", 1)[-1]
    return (
        f"{algo} / {run.srl_model}, seed {run.seed}: score {replay.score:.1f}, this episode {replay.episode_return:.1f}"
    )


def _runs(comparison: Comparison) -> str:
    items = []
    for result in comparison.results:
        config = html.escape(OmegaConf.to_yaml(result.config))
        what = f"{result.algo.rsplit('.', 1)[-1]} / {result.srl_model}, seed {result.seed}"
        title = f"{result.path} — {what}, {result.status}"
        items.append(f"<details><summary>{html.escape(title)}</summary><pre>{config}</pre></details>")
    return f"<h2>Runs ({len(items)})</h2>{''.join(items)}"


def write_report(
    folder: str | Path,
    out: Path | None = None,
    *,
    budgets: Sequence[int] | None = None,
    baseline: str | None = AUTO,
    videos: bool = True,
    verdict_of: str | None = None,
    verdict_ci: float = 0.95,
    trusted: bool = False,
    log: Callable[[str], None] = print,
) -> ReportPage:
    """Compare the runs under ``folder`` and write the page (``<folder>/report.html`` unless ``out``).

    :raise ConfigError: no runs under ``folder`` (see :func:`rlzoo.results.comparison.compare`).
    """
    folder = Path(folder)
    comparison = compare(folder, budgets, baseline)
    verdicts.check_reference(verdict_of, [g.srl_model for g in comparison.groups])
    replays = best_replays(comparison.rows, trusted=trusted) if videos else []  # first: a refused run stops it
    curves, n_figures = _curves(comparison)
    encoders = [read_encoder(p) for p in encoder_folders(comparison.results, folder)]
    stamp = datetime.datetime.now().isoformat(timespec="seconds")
    title = f"rlzoo report: {folder.resolve()}"
    results = _results(comparison, verdict_of, verdict_ci)
    body = "".join([results, curves, _encoders(encoders), _replays(replays), _runs(comparison)])
    page = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        f"<p class='notes'>{len(comparison.results)} runs in {len(comparison.groups)} groups; written {stamp} by "
        f"python -m rlzoo.report</p>{body}</body></html>\n"
    )
    path = out or folder / REPORT
    atomic_write_text(path, page)
    log(f"rlzoo.report: wrote {path} ({len(page) / 1e6:.1f} MB): {len(comparison.rows)} table rows, {n_figures} "
        f"figure(s), {len(encoders)} encoder(s), {len(replays)} replay(s)")  # fmt: skip
    return ReportPage(path, comparison, n_figures, replays, encoders)
