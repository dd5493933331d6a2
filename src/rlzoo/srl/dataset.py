"""The on-disk dataset format of ``python -m rlzoo.collect`` and how SRL training reads it.

A dataset folder holds::

    dataset.npz    compressed arrays, one row per frame (N frames):
                     images            (N, H, W, 3) uint8   the observation before the action
                     actions           (N,) int64 or (N, A) float32
                     rewards           (N,) float32         the reward obtained after the action
                     episode_starts    (N,) bool            the frame opens an episode
                     ground_truth      (N, G) float32       the robot position (info ``robot_position``) or else the
                                                            env's own observation vector
                     target_positions  (N, 2) float32       the current target (info ``target_position``), when the env
                                                            reports one
    dataset.json   metadata: env id and kwargs, image size, counts, seeds, policy, names of the ground-truth
                   dimensions; written last, so a folder with it is complete

The final observation of an episode is not a frame; training samples are pairs (frame t, frame t + 1) of one episode.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlzoo.confined import load_npz, read_json
from rlzoo.errors import ConfigError, Refused
from rlzoo.files import atomic_write_text

ARRAYS = "dataset.npz"
METADATA = "dataset.json"
FORMAT_VERSION = 1
LATEST = "latest"
# Where `latest` looks, relative to the current directory: the default output folders of the entrypoints.
SEARCH_DIRS = ("outputs", "multirun")
REQUIRED = ("images", "actions", "rewards", "episode_starts", "ground_truth")


@dataclass(frozen=True)
class Dataset:
    """A loaded dataset: its arrays and its metadata."""

    path: Path
    images: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    episode_starts: np.ndarray
    ground_truth: np.ndarray
    target_positions: np.ndarray | None
    metadata: dict[str, Any]

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def env_id(self) -> str:
        return str(self.metadata["env_id"])

    @property
    def discrete_actions(self) -> bool:
        return self.actions.ndim == 1

    @property
    def n_episodes(self) -> int:
        return int(self.episode_starts.sum())

    def episode_ids(self) -> np.ndarray:
        """Each frame's episode, numbered from 0 (in ``0 .. n_episodes - 1``)."""
        return np.cumsum(self.episode_starts) - 1

    def pair_indices(self) -> np.ndarray:
        """Frames t whose frame t + 1 belongs to the same episode (the training pairs)."""
        return np.flatnonzero(~self.episode_starts[1:])

    def metric_ground_truth(self) -> tuple[np.ndarray, list[str]]:
        """The ground truth the metrics use, per frame: robot (and target, where known) positions, and names."""
        names = list(self.metadata["ground_truth_names"])
        if self.target_positions is None:
            return self.ground_truth, names
        width = self.target_positions.shape[1]  # (x, y), or (x, y, z) for the arm envs
        target = [f"target_{axis}" for axis in "xyz"[:width]] if width <= 3 else [f"target_{i}" for i in range(width)]
        return np.concatenate([self.ground_truth, self.target_positions], axis=1), [*names, *target]


def save_dataset(folder: Path, arrays: dict[str, np.ndarray], metadata: dict[str, Any]) -> None:
    """Write ``dataset.npz`` then ``dataset.json`` (the marker of a complete dataset) into ``folder``."""
    missing = [name for name in REQUIRED if name not in arrays]
    assert not missing, f"dataset arrays missing: {missing}"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{ARRAYS}.partial"
    with tmp.open("wb") as stream:
        np.savez_compressed(stream, **arrays)  # type: ignore[arg-type]
    tmp.replace(folder / ARRAYS)
    metadata = {"format_version": FORMAT_VERSION, "created": time.time(), **metadata}
    atomic_write_text(folder / METADATA, json.dumps(metadata, indent=2) + "\n")


def load_dataset(path: str | Path) -> Dataset:
    """Load a dataset from its folder (or its ``dataset.npz`` / ``dataset.json``), as data: both files read through
    the confined layer (plain files, no links; each array's header checked before it is built, within the memory
    budget), the arrays it needs checked present."""
    folder = dataset_folder(path)
    if not (folder / ARRAYS).is_file():
        raise ConfigError(f"dataset={path}: {ARRAYS} is missing beside {METADATA}")
    metadata = read_json(folder, METADATA)
    values = load_npz(folder, ARRAYS)
    missing = [name for name in REQUIRED if name not in values]
    if not isinstance(metadata, dict) or missing:
        raise Refused(f"dataset={path}: not a dataset as rlzoo.collect writes it (missing: {missing or METADATA})")
    return Dataset(
        path=folder,
        images=values["images"],
        actions=values["actions"],
        rewards=values["rewards"],
        episode_starts=values["episode_starts"].astype(bool),
        ground_truth=values["ground_truth"],
        target_positions=values.get("target_positions"),
        metadata=metadata,
    )


def newest(
    marker: str, accept: Callable[[dict[str, Any]], bool], search_dirs: Iterable[str | Path] = SEARCH_DIRS
) -> Path | None:
    """The folder whose JSON ``marker`` file is newest (by its ``created`` time) among those ``accept`` takes.

    :param marker: the file that marks a complete folder (``dataset.json``, ``encoder.json``).
    :param accept: a test on the marker's content.
    :param search_dirs: folders searched recursively (default: ``./outputs`` and ``./multirun``).
    """
    best: tuple[float, Path] | None = None
    for path in _markers(marker, search_dirs):
        try:
            content = read_json(path.parent, path.name)
        except (OSError, ValueError):  # unreadable, not JSON, or refused (a link, a FIFO): not a complete folder
            continue
        if isinstance(content, dict) and accept(content):
            created = float(content.get("created", path.stat().st_mtime))
            if best is None or created > best[0]:
                best = (created, path.parent)
    return None if best is None else best[1].resolve()


def _markers(marker: str, search_dirs: Iterable[str | Path]) -> Iterator[Path]:
    for root in search_dirs:
        if Path(root).is_dir():
            yield from Path(root).rglob(marker)


def find_dataset(dataset: str | Path, search_dirs: Iterable[str | Path] = SEARCH_DIRS) -> Path:
    """Resolve ``dataset``: a folder (or file in it), or ``latest``: the newest complete dataset in ``search_dirs``."""
    if str(dataset) != LATEST:
        return dataset_folder(dataset)
    found = newest(METADATA, lambda content: "env_id" in content, search_dirs)
    if found is None:
        where = " and ".join(f"./{d}" for d in map(str, search_dirs))
        raise ConfigError(
            f"dataset={LATEST}: no dataset under {where}; collect one with python -m rlzoo.collect env=<env>"
        )
    return found


def dataset_folder(dataset: str | Path) -> Path:
    """The folder of a dataset path, checked to hold a complete dataset."""
    folder = Path(dataset).expanduser()
    if folder.name in (ARRAYS, METADATA):
        folder = folder.parent
    if not (folder / METADATA).is_file():
        raise ConfigError(
            f"dataset={dataset}: not a dataset folder (no {METADATA}); pass a folder written by "
            f"python -m rlzoo.collect, or dataset={LATEST}"
        )
    return folder.resolve()
