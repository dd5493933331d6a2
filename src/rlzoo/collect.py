"""``python -m rlzoo.collect``: collect a dataset of rendered frames for state representation learning.

The dataset format is :mod:`rlzoo.srl.dataset`'s; episodes are run by :mod:`rlzoo.srl.collection`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from rlzoo.config import CONFIG_DIR, instantiate
from rlzoo.errors import ConfigError
from rlzoo.experiment import environment as envs
from rlzoo.experiment.rundir import atomic_write_text
from rlzoo.experiment.settings import _flag, _integer
from rlzoo.srl import collection
from rlzoo.srl.dataset import ARRAYS, METADATA, save_dataset

KEYS = {"env", "collect_policy", "n_samples", "image_size", "seed", "n_workers", "progress_bar", "run_dir"}


def collect(cfg: DictConfig) -> dict[str, Any]:
    """Collect the dataset ``cfg`` describes into ``cfg.run_dir``; return its metadata.

    Every input is checked (one episode start included) before the folder is written to.
    """
    OmegaConf.resolve(cfg)
    unknown = sorted(str(k) for k in cfg if k not in KEYS)
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(KEYS))}")
    n_samples = _integer("n_samples", cfg.n_samples, 1)
    image_size = _integer("image_size", cfg.image_size, 8)
    seed = _integer("seed", cfg.seed, 0)
    n_workers = _integer("n_workers", cfg.n_workers, 0)
    progress_bar = _flag("progress_bar", cfg.progress_bar)
    spec = _dataset_env(envs.EnvSpec.from_config(cfg.env), image_size)
    cfg.env = {"id": spec.id, **spec.kwargs}  # the dataset's config records the env as collected
    try:
        policy = instantiate(cfg.collect_policy)
    except Exception as error:  # Hydra wraps the constructor's TypeError / ConfigError
        raise ConfigError(f"collect_policy: {error.__cause__ or error}") from None
    info = _check(spec, image_size, policy)

    folder = Path(cfg.run_dir)
    if (folder / METADATA).exists() or (folder / ARRAYS).exists():
        raise ConfigError(f"run_dir {folder} already holds a dataset; rlzoo never overwrites one")
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "config.yaml", OmegaConf.to_yaml(cfg))
    started = time.perf_counter()

    def task(index: int) -> collection.EpisodeTask:
        return collection.EpisodeTask(spec.id, spec.kwargs, image_size, policy, seed + index, n_samples)

    with tqdm(total=n_samples, unit="frame", disable=not progress_bar, desc="collect") as bar:
        frames, n_episodes = collection.collect_frames(task, n_samples, n_workers, lambda n: bar.update(n - bar.n))
    arrays = frames.arrays()
    metadata = {
        "env_id": spec.id,
        "env_kwargs": spec.kwargs,
        "image_size": [image_size, image_size],
        "n_samples": len(frames),
        "n_episodes": n_episodes,
        "n_pairs": int(np.count_nonzero(~arrays["episode_starts"][1:])),
        "seed": seed,
        "episode_seeds": [seed, seed + n_episodes - 1],
        "n_workers": n_workers,
        "policy": OmegaConf.to_container(cfg.collect_policy),
        "ground_truth_names": _ground_truth_names(info, arrays["ground_truth"].shape[1]),
        "actions": "discrete" if arrays["actions"].ndim == 1 else "continuous",
        "positive_rewards": int(np.count_nonzero(arrays["rewards"] > 0)),
        "collect_seconds": round(time.perf_counter() - started, 2),
    }
    save_dataset(folder, arrays, metadata)
    return metadata


def _dataset_env(spec: envs.EnvSpec, image_size: int) -> envs.EnvSpec:
    """Discrete actions where the env lets the algorithm choose (none here); native rendering at ``image_size``."""
    envs.check_env_id(spec.id)
    kwargs = dict(spec.kwargs)
    if "continuous" in kwargs and kwargs["continuous"] is None:
        kwargs["continuous"] = False
    if "render_size" in kwargs:
        kwargs["render_size"] = image_size
    return envs.EnvSpec(spec.id, kwargs)


def _check(spec: envs.EnvSpec, image_size: int, policy: collection.Policy) -> dict[str, Any]:
    """Build the env, render one frame and ask the policy for one action: errors surface before any work.

    :return: the info of the reset.
    """
    try:
        env = collection.make_collection_env(spec.id, spec.kwargs, image_size)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"env {spec.id} cannot render frames with {spec.kwargs}: {error}") from None
    try:
        _, info = env.reset(seed=0)
        policy(info, env.action_space, np.random.default_rng(0))
        return info
    except KeyError as error:
        raise ConfigError(
            f"collect_policy {type(policy).__name__} needs info[{error}], which {spec.id} does not report"
        ) from None
    except ValueError as error:
        raise ConfigError(f"collect_policy {type(policy).__name__} cannot act on {spec.id}: {error}") from None
    finally:
        env.close()


def _ground_truth_names(info: dict[str, Any], size: int) -> list[str]:
    if collection.ROBOT in info and size == 2:
        return ["robot_x", "robot_y"]
    return [f"state_{i}" for i in range(size)]


@hydra.main(config_path=str(CONFIG_DIR), config_name="collect", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Hydra entrypoint."""
    try:
        metadata = collect(cfg)
    except ConfigError as error:
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            raise
        sys.exit(f"rlzoo.collect: error: {error}")
    print(
        f"rlzoo.collect: {cfg.run_dir}: {metadata['n_samples']} frames, {metadata['n_episodes']} episodes "
        f"of {metadata['env_id']}, {metadata['positive_rewards']} positive rewards"
    )


if __name__ == "__main__":
    main()
