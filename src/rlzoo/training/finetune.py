"""Fine-tuning: a new run that starts from another run's saved weights and normalisation (``init_from=<run dir>``).

``init_from=<run dir>[:<checkpoint>]`` (``final`` by default, ``latest``, ``best`` (the best evaluated model of a
run trained with ``eval_freq > 0``), or the steps of a checkpoint) makes a new run
in its own run dir, with its own config: the model is built from that config (learning rate, schedules, env variant,
random target ... all new), then takes the saved policy's weights (every network the policy holds: actor, critics,
target networks) and the saved observation statistics, which go on updating. The step counter starts from 0:
``total_timesteps`` counts the fine-tuning steps. The optimiser's state, SAC's entropy coefficient and replay buffers
start afresh. ``config.yaml`` records ``init_from`` pinned to the model used (``<run dir>:<final|steps>``).

What must stay the saved run's: the algorithm, the network (``algo.policy_kwargs``), whether observations are
normalised, and the observation and action spaces (checked once the training envs exist, before anything is written).
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import OmegaConf

from rlzoo.errors import ConfigError
from rlzoo.model_files import ModelFolder
from rlzoo.rundir import BEST, FINAL, LATEST, RunDir
from rlzoo.training.safe_load import describe_saved_space, saved_data, weights_error
from rlzoo.training.shared_config import shared_config

if TYPE_CHECKING:
    from gymnasium import spaces
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecEnv, VecNormalize


@dataclass(frozen=True)
class InitPoint:
    """The saved model a fine-tuning run starts from.

    :param run: the run dir it belongs to.
    :param checkpoint: the steps of its checkpoint, None for the final (or the best) model.
    :param best: the best evaluated model (``best/``).
    """

    run: Path
    checkpoint: int | None
    best: bool = False

    @property
    def models(self) -> ModelFolder:
        """The folder of the saved model and its statistics."""
        run = RunDir(self.run)
        return ModelFolder(run.best_dir) if self.best else run.models(self.checkpoint)

    @property
    def pinned(self) -> str:
        """``<run dir>:<final|best|steps>``: what the new run's config records."""
        if self.best:
            return f"{self.run}:{BEST}"
        return f"{self.run}:{FINAL if self.checkpoint is None else self.checkpoint}"


def _split(value: str) -> tuple[str, str]:
    """``<run dir>[:<checkpoint>]`` -> (run dir, checkpoint)."""
    path, _, tail = value.rpartition(":")
    if path and (tail in (FINAL, LATEST, BEST) or tail.isdigit()):
        return path, tail
    return value, FINAL


def _choose(run: RunDir, checkpoint: str, value: str) -> int | None:
    """The checkpoint's steps (None: the final model), checked to hold a model (:meth:`RunDir.find_model`)."""
    try:
        return run.find_model(checkpoint, choose=f"init_from={run.path}:")[1]
    except ConfigError as error:
        message = str(error)
        raise ConfigError(message if message.startswith("init_from=") else f"init_from={value}: {message}") from None


def find_init_point(value: str, values: dict[str, Any], algo_class: type) -> InitPoint:
    """Resolve ``init_from`` and check the saved run against the new one's resolved config ``values``.

    :raise ConfigError: not a run dir, no such model, another algorithm, network or normalisation.
    """
    path, checkpoint = _split(value)
    run = RunDir(Path(path).expanduser().resolve())
    if not run.is_run():
        raise ConfigError(f"init_from={value}: {run.path} is not a run dir (no config.yaml); give a run dir")
    if checkpoint == BEST:
        run.best_model_folder()  # one line when the run kept no best model
        point = InitPoint(run.path, None, best=True)
    else:
        point = InitPoint(run.path, _choose(run, checkpoint, value))
    config = run.read_config()
    if not values.get("trusted"):  # its config is only compared, but a shared run is checked as every load checks it
        config = shared_config(config, run.config)
    saved = OmegaConf.to_container(config, resolve=True)
    assert isinstance(saved, dict)
    saved_algo = str(saved["algo"]["_target_"])
    if saved_algo.rsplit(".", 1)[-1] != algo_class.__name__:
        raise ConfigError(
            f"init_from={value}: the saved model is {saved_algo.rsplit('.', 1)[-1]}, this run trains "
            f"{algo_class.__name__}; fine-tuning keeps the algorithm (choose algo= as the saved run's)"
        )
    new_kwargs, saved_kwargs = values["algo"].get("policy_kwargs"), saved["algo"].get("policy_kwargs")
    if new_kwargs != saved_kwargs:
        raise ConfigError(
            f"init_from={value}: algo.policy_kwargs={new_kwargs!r} differs from the saved model's {saved_kwargs!r}; "
            "fine-tuning keeps the network"
        )
    if bool(values.get("normalize")) != bool(saved.get("normalize")):
        raise ConfigError(
            f"init_from={value}: normalize={values.get('normalize')} but the saved run had "
            f"normalize={saved.get('normalize')}; its weights expect observations as it saw them"
        )
    return point


def _saved_spaces(model: Path) -> tuple[str, str]:
    """The observation and action spaces stored in an SB3 ``model.zip``, described from the plain JSON of its
    ``data`` entry (its pickles are not read)."""
    data = saved_data(model)
    return describe_saved_space(data["observation_space"]), describe_saved_space(data["action_space"])


def _describe(space: spaces.Space) -> str:
    n = getattr(space, "n", None)
    return f"{type(space).__name__}({n if n is not None else space.shape})"


def check_spaces(point: InitPoint, venv: VecEnv) -> None:
    """Refuse training envs whose observation or action space is not the saved model's."""
    try:
        observation_space, action_space = _saved_spaces(point.models.model)
    except (OSError, KeyError, ValueError, json.JSONDecodeError, zipfile.BadZipFile) as error:
        raise ConfigError(f"init_from={point.pinned}: {point.models.model} is not an SB3 model ({error})") from None
    for what, saved, new in (
        ("observation", observation_space, venv.observation_space),
        ("action", action_space, venv.action_space),
    ):
        if saved != _describe(new):
            raise ConfigError(
                f"init_from={point.pinned}: the saved model's {what} space is {saved}, this run's is "
                f"{_describe(new)}; fine-tuning needs the same {what}s (env variant and srl_model as shaped)"
            )


def init_model(model: BaseAlgorithm, point: InitPoint, normalizer: VecNormalize | None) -> BaseAlgorithm:
    """Load the saved policy's weights into ``model`` (built from the new config) and the saved observation
    statistics into ``normalizer``; return ``model``."""
    from stable_baselines3.common.save_util import load_from_zip_file

    try:  # the weights only (torch.load with weights_only): the data entry's pickles are not read
        _, params, _ = load_from_zip_file(point.models.model, device=model.device, load_data=False)
    except Exception as error:  # a truncated zip, a .pth holding a pickled object ...
        raise ConfigError(
            f"init_from={point.pinned}: {weights_error(point.models.model, 'an SB3 model', error, hint=False)}"
        ) from None
    if params is None or "policy" not in params:
        raise ConfigError(f"init_from={point.pinned}: {point.models.model} holds no policy weights")
    try:
        model.policy.load_state_dict(params["policy"])  # type: ignore[arg-type]  # a state dict, typed loosely by SB3
    except RuntimeError as error:  # shapes or names that differ
        raise ConfigError(f"init_from={point.pinned}: its weights do not fit this run's network: {error}") from None
    point.models.restore_obs_norm(normalizer)
    return model
