"""``python -m rlzoo.records action=<merge|table|rerun>``: result records kept as data.

- ``merge``: the finished RL runs (and records) under ``sources`` join ``store`` as records (no weights), with their
  encoders; records that cannot form one table with the store's are refused in one line, and nothing is written.
- ``table``: the store's table (IQM with 95 % CIs, the verdicts, the paper's figures), printed or written into the
  marked section of ``docs``, with its performance profile beside it.
- ``rerun``: one stored run trained again from a fresh pipeline dir (its encoder taken from the store), and its
  scores compared with the record: equal to the last digit (exit 0); different on the platform that made the record
  (exit 1: a broken reproduction); different on another platform (exit 0 where its scores lie within the stored
  seeds' range, else 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from rlzoo.cli import one_line_errors, run_checked
from rlzoo.config import CONFIG_DIR
from rlzoo.errors import ConfigError
from rlzoo.pipeline.rerun import rerun_record
from rlzoo.pipeline.spec import pipeline_spec
from rlzoo.reporting.store_table import read_store_info, replace_section, store_table
from rlzoo.results.store_merge import merge_into_store
from rlzoo.schema import parse

ACTIONS = ("merge", "table", "rerun")


@dataclass(frozen=True)
class RecordsSettings:
    """The keys of ``conf/records.yaml`` (see there), checked."""

    action: str
    store: str
    sources: list[str]
    docs: str | None = None
    representation: str | None = None
    seed: int | None = None
    dir: str | None = None


def experiment_axes(experiment: str) -> tuple[list[str], list[int]]:
    """The representations and seeds of ``experiment``'s sweep, in its order."""
    axes = pipeline_spec([f"experiment={experiment}"]).axes
    return [str(m) for m in axes["srl_model"]], [int(s) for s in axes["seed"]]


def write_table(store: Path, docs: Path | None) -> str:
    """The store's table; with ``docs``, written into its marked section (the profile beside it)."""
    info = read_store_info(store)
    representations, seeds = experiment_axes(info.experiment)
    section = store_table(store, representations, seeds, None if docs is None else docs.parent)
    if docs is not None:
        docs.write_text(replace_section(docs.read_text(), section, str(docs)))
    return section


def run(settings: RecordsSettings) -> None:
    store = Path(settings.store)
    if settings.action == "merge":
        if not settings.sources:
            raise ConfigError("sources=[] is empty; give the folders to merge, e.g. sources=[<pipeline dir>]")
        merge_into_store([Path(s) for s in settings.sources], store)
    elif settings.action == "table":
        section = write_table(store, None if settings.docs is None else Path(settings.docs))
        print(section if settings.docs is None else f"rlzoo.records: the table of {store} is in {settings.docs}")
    else:
        if settings.representation is None or settings.seed is None:
            raise ConfigError("action=rerun needs representation=<srl_model> and seed=<n> of a stored record")
        name = f"{settings.representation}_seed{settings.seed}"
        folder = Path(settings.dir) if settings.dir else Path("multirun") / "rerun" / name
        outcome = rerun_record(store, settings.representation, settings.seed, folder)
        print(outcome.line)
        if outcome.failed:
            raise SystemExit(1)


@hydra.main(config_path=str(CONFIG_DIR), config_name="records", version_base="1.3")
@one_line_errors("rlzoo.records")
def main(cfg: DictConfig) -> None:
    """Hydra entrypoint (``key=value`` arguments only)."""
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    settings = parse(RecordsSettings, {str(k): v for k, v in values.items()})
    if settings.action not in ACTIONS:
        raise ConfigError(f"action={settings.action!r}; allowed: {', '.join(ACTIONS)}")
    run(settings)


if __name__ == "__main__":
    run_checked(main, "rlzoo.records", "records")
