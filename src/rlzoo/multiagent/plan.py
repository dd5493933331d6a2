"""A multi-agent run planned once: the config checked (env, layout (:mod:`rlzoo.multiagent.layouts`), algorithm
against every learner's spaces) before anything is written. One PettingZoo env is made and closed here, for its
agents' spaces (it builds no network)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from rlzoo.algos.factory import AlgorithmFactory, check_action_space
from rlzoo.errors import ConfigError
from rlzoo.hardware import Hardware
from rlzoo.multiagent.layouts import LayoutSettings, make_layout
from rlzoo.multiagent.pettingzoo_envs import AgentSpaces, PettingZooSpec, agent_spaces
from rlzoo.multiagent.run_files import multiagent_run
from rlzoo.rundir import RunDir
from rlzoo.schema import parse
from rlzoo.training.plan import LogPlan, Prologue
from rlzoo.training.resume import ResumePoint, training_seed
from rlzoo.training.settings import RunSettings

MASKED_ALGOS = ("dqn", "qrdqn")  # the algo options whose classes rlzoo masks (SB3 DQN and QR-DQN)


@dataclass(frozen=True)
class MultiagentPlan:
    """Everything a multi-agent run needs, checked.

    :param agents: every possible agent's spaces, in the env's order.
    :param learners: learner name → the agent keys it acts for (:meth:`rlzoo.multiagent.layouts.Layout.learners`);
        keys in no learner play the fixed opponent.
    :param seats: the seats the one learner takes in turn, one episode each (the opponent plays the others); empty:
        every key keeps its role.
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
        return multiagent_run(Path(self.settings.run_dir))

    @property
    def seed(self) -> int:
        """The seed the learners and the opponent are built with (offset in a resumed run, whose generators then come
        from its checkpoint); game ``i`` of the run is seeded ``settings.seed + i``."""
        return training_seed(self.settings.seed, self.resume_point)

    @property
    def learning_keys(self) -> tuple[str, ...]:
        return tuple(key for keys in self.learners.values() for key in keys)

    def learning_seats(self, episode: int) -> tuple[str, ...]:
        """The seats learners play in episode ``episode`` of a seat rotation: the one learner's seat of that episode
        (``seats[episode % n]``) where it alternates seats, else every learning key's own."""
        return (self.seats[episode % len(self.seats)],) if self.seats else self.learning_keys


def plan_multiagent(
    cfg: DictConfig, overrides: tuple[str, ...] | list[str] = (), *, run_dir_state: bool = False
) -> MultiagentPlan:
    """Check ``cfg`` (``multiagent`` set or ``env=pettingzoo``) and plan the run: every check of a single-agent plan's
    prologue (:class:`rlzoo.training.plan.Prologue`), then the env, the layout and every learner's spaces; ``cfg`` is
    not changed. The run keys a multi-agent run does not honour are refused before
    (:func:`rlzoo.training.kind.refuse_unhonoured`).

    :param run_dir_state: read the run dir's state (refuse a finished run, find a resume point): a run to train;
        off for loading a trained run.
    """
    prologue = Prologue.of(cfg, overrides)
    values, settings, factory = prologue.values, prologue.settings, prologue.factory
    layout_values, env_values = values.get("multiagent"), values["env"]
    if layout_values is None:
        raise ConfigError("env=pettingzoo is a multi-agent env: add multiagent=independent, shared or fixed_opponent")
    layout = parse(LayoutSettings, layout_values, prefix="multiagent.")
    if "api" not in env_values:
        raise ConfigError(
            f"multiagent={layout.layout} needs a PettingZoo env: env=pettingzoo env.id=<module> (env.id="
            f"{env_values.get('id')} is a single-agent env; train it without multiagent)"
        )
    representation = values["srl_model"].get("name")
    if representation != "ground_truth":
        raise ConfigError(
            f"multi-agent runs observe the env's own observations: srl_model=ground_truth (got {representation})"
        )
    spec = PettingZooSpec.from_values(env_values)
    env = spec.make()
    try:
        agents = agent_spaces(env)
    finally:
        env.close()
    if len(agents) < 2:
        raise ConfigError(f"env.id={spec.id} has a single agent ({', '.join(agents)}): train it without multiagent")
    arrangement = make_layout(layout)
    learners = arrangement.learners(agents)
    for name, keys in learners.items():
        _check_learner(factory, name, [agents[k] for k in keys])
    values["normalize"] = False  # recorded: multi-agent learners see the env's observations as they are
    config, resume_point = prologue.finish(run_dir_state)
    return MultiagentPlan(
        config, settings, layout, prologue.hardware, factory, spec, agents, learners, factory.policy_for("Mlp"),
        prologue.logging, resume_point, arrangement.seats(agents, learners),
    )  # fmt: skip


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
