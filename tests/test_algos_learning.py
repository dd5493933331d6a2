"""Learning checks of rlzoo's own algorithms (slow: ``python -m pytest -m slow tests/test_algos_learning.py``).

The DQN family and the actor-critics train on CartPole-v1 with their pairs (``conf/algo_env/<algo>_CartPole``: the
DQN family with rl-baselines3-zoo's DQN settings, ACER and ACKTR with their defaults on 8 envs), evaluated every
2,500 steps by keep-best evaluation (10 deterministic episodes); the check is on the best evaluation. CMA-ES, ARS and
the random agent run ``train(cfg)`` on MobileRobot (ground truth, fixed target), checked on their 100 test episodes.
Measured figures: docs/algorithms.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from rlzoo.algos.factory import build_algorithm_factory
from rlzoo.config import compose_config
from rlzoo.train import train
from rlzoo.training.keep_best import KeepBest

pytestmark = pytest.mark.slow


def best_on_cartpole(algo: str, tmp_path: Path, seed: int = 0, overrides: tuple[str, ...] = ()) -> tuple[float, float]:
    """Train ``algo`` with its CartPole config (plain observations, as the tuned pairs set ``normalize: false``);
    return the best evaluation and the final model's mean return over 20 episodes."""
    cfg = compose_config([f"algo={algo}", "env=CartPole", f"seed={seed}", *overrides], run_dir=tmp_path)
    factory = build_algorithm_factory(cfg.algo)
    env = make_vec_env("CartPole-v1", n_envs=cfg.n_envs, seed=seed)
    model = factory(env=env, policy="MlpPolicy", seed=seed, device="cpu", verbose=0)
    every = max(2500 // cfg.n_envs, 1) * cfg.n_envs
    eval_env = make_vec_env("CartPole-v1", n_envs=5, seed=seed + 1000)
    keep = KeepBest(eval_env, tmp_path / "best", tmp_path / "evaluations.csv", every_steps=every, episodes=10)
    model.learn(cfg.total_timesteps, callback=keep)
    final = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=seed + 2000), n_eval_episodes=20)[0]
    return keep.best_return, float(final)


@pytest.mark.parametrize("algo", ["ddqn", "per", "c51", "rainbow"])
def test_dqn_family_balances_cartpole_within_50k_steps(algo: str, tmp_path: Path) -> None:
    best, _ = best_on_cartpole(algo, tmp_path)
    assert best >= 475


@pytest.mark.parametrize("algo", ["acer", "acktr"])
def test_actor_critics_balance_cartpole_within_100k_steps(algo: str, tmp_path: Path) -> None:
    best, _ = best_on_cartpole(algo, tmp_path)  # conf/algo_env/<algo>_CartPole: 8 envs, 100k steps
    assert best >= 475


MOBILE_ROBOT_DQN = [
    "env=MobileRobot", "env.random_target=true", "total_timesteps=30000", "n_envs=1", "checkpoint_freq=0",
    "verbose=0", "logger.formats=[csv]", "algo.learning_starts=1000", "algo.buffer_size=50000", "algo.batch_size=64",
    "algo.learning_rate=0.001", "algo.exploration_fraction=0.2", "algo.train_freq=4", "algo.gradient_steps=1",
    "+algo.policy_kwargs.net_arch=[64,64]",
]  # fmt: skip


@pytest.mark.xfail(
    reason="measured at 30k steps: Rainbow 202.1 against DQN 234.0, mean of 3 seeds (docs/algorithms.md)", strict=False
)
def test_rainbow_at_least_as_good_as_dqn_on_mobile_robot(tmp_path: Path) -> None:
    """The same budget and shared settings; DQN's target copied every 1,000 env steps (250 gradient steps), Rainbow's
    every 250 gradient steps; mean test return over seeds 0, 1, 2."""
    means = {}
    settings = {
        "dqn": ["algo.target_update_interval=1000"],
        "rainbow": ["algo.target_update_interval=250", "algo.v_min=-100", "algo.v_max=100"],
    }
    for algo, extra in settings.items():
        runs = [
            train(
                compose_config(
                    [f"algo={algo}", f"seed={s}", *MOBILE_ROBOT_DQN, *extra], run_dir=tmp_path / f"{algo}{s}"
                )
            )
            for s in range(3)
        ]
        means[algo] = sum(m["test/mean_return"] for m in runs) / len(runs)
    assert means["rainbow"] >= means["dqn"]


@pytest.mark.xfail(reason="not reached: best measured CMA-ES 25.8 (300k), ARS 0.0 (docs/algorithms.md)", strict=False)
@pytest.mark.parametrize("algo", ["cmaes", "ars"])
def test_search_methods_reach_the_target_on_mobile_robot(algo: str, tmp_path: Path) -> None:
    overrides = [f"algo={algo}", "env=MobileRobot", "n_envs=8", "total_timesteps=100000", "verbose=0"]
    metrics = train(compose_config([*overrides, "logger.formats=[csv]"], run_dir=tmp_path))
    assert metrics["test/mean_return"] >= 200


def test_random_agent_is_the_baseline_row_on_mobile_robot(tmp_path: Path) -> None:
    overrides = ["algo=random", "env=MobileRobot", "total_timesteps=10000", "verbose=0", "logger.formats=[csv]"]
    metrics = train(compose_config(overrides, run_dir=tmp_path))
    assert metrics["test/episodes"] == 100 and -10 < metrics["test/mean_return"] < 10  # measured: -1.6 (seed 0)


def test_dqn_zoo_pair_keeps_its_best_model_on_cartpole(tmp_path: Path) -> None:
    """rl-baselines3-zoo's DQN CartPole-v1 pair, which evaluates every 2,500 steps and tests its best model: the
    zoo's figure (500 at 50k steps) is a best-model figure. Measured (seed 0): best 500 at 5,000 steps, its 100 test
    episodes 499.9; the final model 17.3 at its last evaluation."""
    metrics = train(compose_config(["algo=dqn", "env=CartPole", "seed=0", "verbose=0"], run_dir=tmp_path))
    assert metrics["eval/best_return"] >= 475 and metrics["test/mean_return"] >= 475
