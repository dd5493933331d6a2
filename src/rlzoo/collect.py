"""``python -m rlzoo.collect``: collect a dataset of rendered frames for state representation learning.

The dataset format is :mod:`rlzoo.srl.dataset`'s; episodes are run by :mod:`rlzoo.srl.collection`.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import hydra
import numpy as np
from omegaconf import DictConfig, OmegaConf

from rlzoo.any_env.spec import EnvSpec, check_env_id
from rlzoo.cli import discard_output_dir_if_elsewhere, one_line_errors, run_checked
from rlzoo.config import CONFIG_DIR, instantiate
from rlzoo.errors import ConfigError
from rlzoo.files import atomic_write_text
from rlzoo.progress_lines import PhaseProgress, progress_mode
from rlzoo.schema import at_least, parse
from rlzoo.srl import collection
from rlzoo.srl.dataset import ARRAYS, METADATA, save_dataset


@dataclass(frozen=True)
class CollectSettings:
    """The run keys of ``conf/collect.yaml`` (see there)."""

    run_dir: str
    n_samples: int = field(default=20_000, metadata=at_least(1))
    n_episodes: int | None = field(default=None, metadata=at_least(1))
    episode_steps: int | None = field(default=None, metadata=at_least(1))
    image_size: int = field(default=64, metadata=at_least(8))
    seed: int = field(default=0, metadata=at_least(0))
    n_workers: int = field(default=0, metadata=at_least(0))
    progress_bar: bool = False


@dataclass
class AgentPolicy:
    """The actions of a trained agent (a ``python -m rlzoo.train`` run dir on ``srl_model=ground_truth``), which acts
    on the env's own observation with its frozen normalisation. Loaded once per episode in each worker.

    :param run: the run dir.
    :param checkpoint: ``final``, ``latest``, ``best`` or a checkpoint's steps (:meth:`rlzoo.rundir.RunDir.find_model`).
    :param deterministic: the agent's deterministic action instead of a sample.
    :param trusted: load the run with SB3's own load (it unpickles): see :func:`rlzoo.agents.load_agent`.
    """

    run: str
    checkpoint: str | int = "final"
    deterministic: bool = False
    trusted: bool = False
    _loaded: Any = field(default=None, init=False, repr=False, compare=False)

    def load(self) -> Any:
        """The run's test agent (checked: it acts on ground truth)."""
        if self._loaded is None:
            from rlzoo.agents import TestAgent
            from rlzoo.kinds import load_agent

            agent = load_agent(self.run, self.checkpoint, deterministic=self.deterministic, trusted=self.trusted)
            if not isinstance(agent, TestAgent):
                raise ConfigError(f"collect_policy.run={self.run} is not a single-agent run: collect with one agent's")
            if agent.representation.name != "ground_truth":
                raise ConfigError(
                    f"collect_policy.run={self.run} was trained on srl_model={agent.representation.name}; "
                    "collecting with an agent needs one trained on srl_model=ground_truth"
                )
            self._loaded = agent
        return self._loaded

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_loaded": None}  # workers load the run themselves

    def __call__(self, info: dict[str, Any], action_space: gym.Space, rng: np.random.Generator) -> Any:
        from rlzoo.agents import State

        return self.load().act(State(np.asarray(info[collection.STATE], dtype=np.float32)))


def collect(cfg: DictConfig) -> dict[str, Any]:
    """Collect the dataset ``cfg`` describes into ``cfg.run_dir``; return its metadata.

    Every input is checked (one episode start included) before the folder is written to.
    """
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    settings = parse(CollectSettings, values, ignore=("env", "collect_policy"))  # type: ignore[arg-type]
    n_samples, image_size, seed, n_workers = settings.n_samples, settings.image_size, settings.seed, settings.n_workers
    spec = _dataset_env(EnvSpec.from_values(values["env"]), image_size)
    values["env"] = spec.values()  # the dataset's config records the env as collected
    cfg = OmegaConf.create(values)
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

    episode_frames = min(n_samples, settings.episode_steps or n_samples)

    def task(index: int) -> collection.EpisodeTask:
        return collection.EpisodeTask(spec, image_size, policy, seed + index, episode_frames)

    mode = progress_mode("auto" if settings.progress_bar else False)
    with PhaseProgress("collect", n_samples, "frames", mode) as progress:
        frames, n_episodes = collection.collect_frames(
            task, n_samples, n_workers, progress.update, max_episodes=settings.n_episodes
        )
    arrays = frames.arrays()
    metadata = {
        "env_id": spec.id,
        "env_kwargs": spec.kwargs,
        "image_size": [image_size, image_size],
        "n_samples": len(frames),
        "n_episodes": n_episodes,
        "episode_steps": settings.episode_steps,
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


def _dataset_env(spec: EnvSpec, image_size: int) -> EnvSpec:
    """Discrete actions where the env lets the algorithm choose (none here); native rendering at ``image_size``."""
    check_env_id(spec.id)
    kwargs = dict(spec.kwargs)
    if "continuous" in kwargs and kwargs["continuous"] is None:
        kwargs["continuous"] = False
    if "render_size" in kwargs:
        kwargs["render_size"] = image_size
    return dataclasses.replace(spec, kwargs=kwargs)  # rlzoo's env keys (frame_skip ...) kept


def _check(spec: EnvSpec, image_size: int, policy: collection.Policy) -> dict[str, Any]:
    """Build the env, render one frame and ask the policy for one action: errors surface before any work.

    :return: the info of the reset.
    """
    try:
        env = collection.make_collection_env(spec, image_size)
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
    if collection.ROBOT in info and size in (2, 3):  # (x, y): MobileRobot; (x, y, z): the arm's gripper
        return [f"robot_{axis}" for axis in "xyz"[:size]]
    return [f"state_{i}" for i in range(size)]


@hydra.main(config_path=str(CONFIG_DIR), config_name="collect", version_base="1.3")
@one_line_errors("rlzoo.collect")
def main(cfg: DictConfig) -> None:
    """Hydra entrypoint."""
    discard_output_dir_if_elsewhere(cfg.run_dir)
    metadata = collect(cfg)
    print(
        f"rlzoo.collect: {cfg.run_dir}: {metadata['n_samples']} frames, {metadata['n_episodes']} episodes "
        f"of {metadata['env_id']}, {metadata['positive_rewards']} positive rewards"
    )


if __name__ == "__main__":
    run_checked(main, "rlzoo.collect", "collect")
