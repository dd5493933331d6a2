"""A multi-agent run planned once: the config checked (env, layout, algorithm against every learner's spaces) before
anything is written. One PettingZoo env is made and closed here, for its agents' spaces (it builds no network)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from omegaconf import DictConfig, OmegaConf

from rlzoo.algos.factory import AlgorithmFactory, build_algorithm_factory, check_action_space
from rlzoo.config import resolved_values
from rlzoo.errors import ConfigError
from rlzoo.hardware import Hardware
from rlzoo.multiagent.pettingzoo_envs import AgentSpaces, PettingZooSpec, agent_spaces
from rlzoo.rundir import RunDir
from rlzoo.schema import parse
from rlzoo.training.budget import check_budget
from rlzoo.training.plan import LogPlan, log_plan
from rlzoo.training.resume import ResumePoint, find_resume_point, resume_config, training_seed
from rlzoo.training.settings import RunSettings

LAYOUTS = ("independent", "shared", "fixed")
SHARED = "shared"  # the learner name of the shared layout (models/shared/)
MASKED_ALGOS = ("dqn", "qrdqn")  # the algo options whose classes rlzoo masks (SB3 DQN and QR-DQN)


@dataclass(frozen=True)
class LayoutSettings:
    """The ``multiagent`` group (see ``conf/multiagent/*.yaml``)."""

    layout: Literal["independent", "shared", "fixed"]
    learner: str | None = None
    opponent: str | None = None
    alternate_seats: bool = False


@dataclass(frozen=True)
class MultiagentPlan:
    """Everything a multi-agent run needs, checked.

    :param agents: every possible agent's spaces, in the env's order.
    :param learners: learner name → the agent keys it acts for (independent: one key each; shared: all keys under
        ``shared``; fixed: the learning key); keys in no learner play the fixed opponent.
    :param seats: the fixed layout with ``alternate_seats``: the seats its one learner takes in turn, one episode
        each (the opponent plays the others); empty: every key keeps its role.
    """

    config: DictConfig
    settings: RunSettings
    layout: LayoutSettings
    hardware: Hardware
    factory: AlgorithmFactory
    spec: PettingZooSpec
    agents: dict[str, AgentSpaces]
    learners: dict[str, tuple[str, ...]]
    policy: str | type
    logging: LogPlan
    resume_point: ResumePoint | None = None
    seats: tuple[str, ...] = ()

    @property
    def run(self) -> RunDir:
        return RunDir(Path(self.settings.run_dir))

    @property
    def seed(self) -> int:
        """The seed training starts from (a resumed run plays new episodes)."""
        return training_seed(self.settings.seed, self.resume_point)

    @property
    def learning_keys(self) -> tuple[str, ...]:
        return tuple(key for keys in self.learners.values() for key in keys)


def plan_multiagent(
    cfg: DictConfig, overrides: tuple[str, ...] | list[str] = (), *, run_dir_state: bool = False
) -> MultiagentPlan:
    """Check ``cfg`` (``multiagent`` set or ``env=pettingzoo``) and plan the run; ``cfg`` is not changed. The run
    keys a multi-agent run does not honour are refused before (:func:`rlzoo.training.kind.refuse_unhonoured`).

    :param run_dir_state: read the run dir's state (refuse a finished run, find a resume point): a run to train;
        off for loading a trained run.
    """
    if cfg.get("resume"):
        cfg = resume_config(Path(str(cfg.resume)), cfg, list(overrides))
    values = resolved_values(cfg)
    layout_values, env_values = values.get("multiagent"), values["env"]
    if layout_values is None:
        raise ConfigError("env=pettingzoo is a multi-agent env: add multiagent=independent, shared or random")
    layout = parse(LayoutSettings, layout_values, prefix="multiagent.")
    if "api" not in env_values:
        raise ConfigError(
            f"multiagent={layout.layout} needs a PettingZoo env: env=pettingzoo env.id=<module> (env.id="
            f"{env_values.get('id')} is a single-agent env; train it without multiagent)"
        )
    settings = RunSettings.from_values({k: v for k, v in values.items() if k != "multiagent"})
    representation = values["srl_model"].get("name")
    if representation != "ground_truth":
        raise ConfigError(
            f"multi-agent runs observe the env's own observations: srl_model=ground_truth (got {representation})"
        )
    check_budget(settings, overrides)
    factory = build_algorithm_factory(OmegaConf.create(values["algo"]))
    spec = PettingZooSpec.from_values(env_values)
    env = spec.make()
    try:
        agents = agent_spaces(env)
    finally:
        env.close()
    if len(agents) < 2:
        raise ConfigError(f"env.id={spec.id} has a single agent ({', '.join(agents)}): train it without multiagent")
    learners = _learners(layout, agents)
    for name, keys in learners.items():
        _check_learner(factory, name, [agents[k] for k in keys])
    values["normalize"] = False  # recorded: multi-agent learners see the env's observations as they are
    policy = factory.policy_for("Mlp")
    config = OmegaConf.create(values)
    resume_point = find_resume_point(RunDir(Path(settings.run_dir)), config) if run_dir_state else None
    return MultiagentPlan(
        config, settings, layout, Hardware.from_config(values["hardware"]), factory, spec, agents, learners, policy,
        log_plan(values["logger"], settings.verbose), resume_point, _seats(layout, agents, learners),
    )  # fmt: skip


def _learners(layout: LayoutSettings, agents: dict[str, AgentSpaces]) -> dict[str, tuple[str, ...]]:
    keys = list(agents)
    if layout.layout == "independent":
        return {key: (key,) for key in keys}
    if layout.layout == "shared":
        first = agents[keys[0]]
        for key in keys[1:]:
            other = agents[key]
            if other.observation != first.observation or other.action != first.action:
                raise ConfigError(
                    f"multiagent=shared needs one observation and action space for every agent ({keys[0]}: "
                    f"{first.observation}, {first.action}; {key}: {other.observation}, {other.action}): "
                    "use multiagent=independent"
                )
        if first.observation.shape is None:
            raise ConfigError(f"multiagent=shared flattens observations; {first.observation} has no shape")
        return {SHARED: tuple(keys)}
    learner = layout.learner or keys[0]
    if learner not in agents:
        raise ConfigError(f"multiagent.learner={learner!r} is not an agent of this env; its agents: {', '.join(keys)}")
    opponent = layout.opponent or "random"
    if opponent != "random" and not RunDir(Path(opponent)).is_run():
        raise ConfigError(f"multiagent.opponent={opponent!r} is neither 'random' nor a run dir (no config.yaml)")
    return {learner: (learner,)}


def _seats(
    layout: LayoutSettings, agents: dict[str, AgentSpaces], learners: dict[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """The seats the fixed layout's learner takes in turn: its own first, then the others in the env's order."""
    if layout.layout != "fixed" or not layout.alternate_seats:
        return ()
    ((learner,),) = learners.values()
    for key, spaces_ in agents.items():
        if spaces_ != agents[learner]:
            raise ConfigError(
                f"multiagent.alternate_seats=true: the learner ({learner}) cannot take {key}'s seat, whose "
                "observation or action space differs; set multiagent.alternate_seats=false"
            )
    return (learner, *(key for key in agents if key != learner))


def _check_learner(factory: AlgorithmFactory, name: str, spaces_: list[AgentSpaces]) -> None:
    """The algorithm honours action masks where the env gives them (checked first: the algorithms that take the
    action space are not all accepted), and takes the learner's action space."""
    if any(s.masked for s in spaces_) and not masked_q_learning(factory.algo_class):
        raise ConfigError(
            f"learner {name} has action masks, which rlzoo honours by masked argmax over Q-values: use "
            f"{' or '.join(f'algo={algo}' for algo in MASKED_ALGOS)} (not {factory.name})"
        )
    try:
        check_action_space(factory.algo_class, spaces_[0].action)
    except ConfigError as error:
        raise ConfigError(f"learner {name}: {error}") from None


def masked_q_learning(algo_class: type) -> bool:
    """Whether rlzoo can mask this algorithm's actions (a DQN or QR-DQN: masked ε-greedy and argmax)."""
    from sb3_contrib import QRDQN
    from stable_baselines3 import DQN

    return issubclass(algo_class, (DQN, QRDQN))
