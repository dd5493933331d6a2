"""Presets: an algorithm with its settings, bound to an env later (the autonomous-learning-library's
``dqn.env(env).build()``), composed by Hydra from the same config groups as ``python -m rlzoo.train``.

``preset("ppo", n_envs=4).env("CartPole")`` is ``python -m rlzoo.train algo=ppo env=CartPole n_envs=4``: the same
overrides, the same composition (tuned pairs included), the same checks; nothing is defaulted here.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
from omegaconf import DictConfig, OmegaConf

from rlzoo.agents.learner import Learner
from rlzoo.agents.loaded_agent import TestAgent
from rlzoo.agents.training_agent import TrainingAgent, training_agent
from rlzoo.config import CONFIG_DIR, compose_config
from rlzoo.rundir import RunDir, save_model
from rlzoo.training.build import snapshot
from rlzoo.training.normalization import FrozenNormalization
from rlzoo.training.settings import RunSettings


def hydra_value(value: Any) -> str:
    """``value`` in Hydra's override grammar: strings quoted, lists as ``[a,b]``, objects as ``{_target_:...}``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"{value!r} ({type(value).__name__}) has no Hydra override form")


def keyword_overrides(keys: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """``key=value`` overrides; a dict value sets keys inside the node (``algo={"gamma": 0.98}``: ``algo.gamma=0.98``)
    unless it names a ``_target_`` (an object such as a schedule, which replaces the value)."""
    for key, value in keys.items():
        if isinstance(value, Mapping) and "_target_" not in value:
            yield from keyword_overrides(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}={hydra_value(value)}"


def env_overrides(name: str) -> list[str]:
    """``env=<option>`` for an option of the env group, else ``env=gym env.id=<name>`` for a Gymnasium id."""
    if (CONFIG_DIR / "env" / f"{name}.yaml").is_file() or name not in gym.registry:
        return [f"env={name}"]  # an unknown name fails as on the command line, listing the options
    return ["env=gym", f"env.id={hydra_value(name)}"]


@dataclass(frozen=True)
class Preset:
    """An algorithm (the ``algo`` group option) and overrides, not yet bound to an env.

    :param algo: the ``algo`` option, e.g. ``"ppo"``.
    :param overrides: Hydra overrides, as on the command line.
    """

    algo: str
    overrides: tuple[str, ...] = ()

    def env(self, name: str) -> BoundPreset:
        """Bind to an env: an ``env`` group option (``"CartPole"``) or any Gymnasium id (``"LunarLander-v3"``).

        :raise hydra.errors.HydraException: an unknown override or option (Hydra's message, as on the command line).
        :raise ConfigError: a bad run key.
        """
        return BoundPreset(self, name)


def preset(algo: str, /, *overrides: str, **keys: Any) -> Preset:
    """A preset for ``algo``: ``preset("dqn", "+algo.policy_kwargs.net_arch=[64]", seed=3, algo={"gamma": 0.98})``.

    :param algo: the ``algo`` group option (``ppo``, ``dqn``, ``sac`` ... or your own).
    :param overrides: Hydra overrides as typed on the command line (``+key=value`` adds a key absent from the YAML).
    :param keys: run keys and group options (``n_envs=4``, ``srl_model="raw_pixels"``); dicts set keys inside a node.
    """
    return Preset(algo, (*overrides, *keyword_overrides(keys)))


class BoundPreset:
    """A preset bound to an env: the config, and the agents built from it.

    The preset owns one model, built when first needed: :meth:`agent` trains it, :meth:`test_agent` acts with it
    (learning off), :meth:`save` writes it as a run dir that :func:`~rlzoo.agents.load_agent` reads back.

    :param preset: the env-agnostic preset.
    :param env: the env group option or Gymnasium id.
    """

    def __init__(self, preset: Preset, env: str) -> None:
        self.algo = preset.algo
        self.env_name = env
        self.overrides: tuple[str, ...] = (f"algo={preset.algo}", *env_overrides(env), *preset.overrides)
        # Composed at once, so that a bad override fails here; run_dir is a placeholder until save() picks one.
        self.config = self.compose(Path("outputs") / self.name)
        RunSettings.from_values(OmegaConf.to_container(self.config))  # type: ignore[arg-type]
        self._learner: Learner | None = None
        self._agent: TrainingAgent | None = None

    @property
    def name(self) -> str:
        """``<algo>_<env>`` (with ``/`` of a namespaced id replaced)."""
        return f"{self.algo}_{self.env_name.replace('/', '-')}"

    def command(self) -> str:
        """The command line composing the same config."""
        return " ".join(["python -m rlzoo.train", *map(shlex.quote, self.overrides)])

    def __repr__(self) -> str:
        return f"<BoundPreset: {self.command()}>"

    def compose(self, run_dir: str | Path, *overrides: str) -> DictConfig:
        """The config of a run of this preset writing to ``run_dir`` (extra ``overrides`` last)."""
        return compose_config([*self.overrides, *overrides], run_dir=run_dir)

    @property
    def learner(self) -> Learner:
        """The model and its held envs, built on first use (checks the config as ``train(cfg)`` does)."""
        if self._learner is None:
            self._learner = Learner.build(self.config)
        return self._learner

    def agent(self, train_steps: int | None = None) -> TrainingAgent:
        """The training agent: ``act(state)`` acts and learns (one :class:`State`, or a :class:`StateArray` of
        ``n_envs`` rows).

        :param train_steps: the budget (agent steps) that schedules run over; ``total_timesteps`` by default.
        """
        if self._agent is None:
            steps = train_steps if train_steps is not None else self.learner.plan.settings.total_timesteps
            self._agent = training_agent(self.learner.model, self.learner.held, steps)
        elif train_steps is not None and train_steps != self._agent.train_steps:
            raise ValueError(f"this preset's agent was built with train_steps={self._agent.train_steps}")
        return self._agent

    def test_agent(self, deterministic: bool | None = None) -> TestAgent:
        """A test agent on a snapshot of the preset's model and statistics as they are now, learning off: it does not
        change when the training agent goes on learning (ALL's ``test_agent()``).

        :param deterministic: default: the config's ``deterministic_test``.
        """
        learner = self.learner
        if deterministic is None:
            deterministic = learner.plan.settings.deterministic_test
        normalization = FrozenNormalization.snapshot(learner.normalizer) if learner.normalizer is not None else None
        model = snapshot(learner.model)
        plan = learner.plan
        return TestAgent(
            model, plan.representation, normalization, deterministic, plan.config, plan.spec.options.frame_stack
        )

    def save(self, path: str | Path) -> Path:
        """Write the config, the model and its statistics as a run dir at ``path`` (never over an existing run).

        :return: the run dir, for :func:`~rlzoo.agents.load_agent`.
        """
        run = RunDir(Path(path).resolve())
        learner = self.learner
        run.claim()
        config = OmegaConf.create(OmegaConf.to_container(learner.plan.config))
        config.run_dir = str(run.path)
        run.write_config(config)  # type: ignore[arg-type]
        save_model(run.path, learner.model, learner.normalizer)
        return run.path
