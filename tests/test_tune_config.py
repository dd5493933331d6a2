"""``rlzoo.tune``'s config: every algorithm option has a search space that plans and builds; bad input fails with one
message before the study folder is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.errors import MissingConfigException
from omegaconf import OmegaConf

from conftest import TINY_ALGO_RUNS
from extras import require_extra
from rlzoo.config import CONFIG_DIR, compose_config
from rlzoo.errors import ConfigError
from rlzoo.training.build import RunBuilder
from rlzoo.training.plan import plan_run

require_extra("optuna", "tune")

from rlzoo.tune.settings import TuneSettings  # noqa: E402  (after the extra check)
from rlzoo.tune.space import SearchSpace  # noqa: E402
from rlzoo.tune.trial import check_space, trial_base, trial_config  # noqa: E402
from rlzoo.tune.worker import tune  # noqa: E402
from test_tune import compose_tune, tune_study  # noqa: E402

ALGOS = sorted(p.stem for p in (CONFIG_DIR / "algo").glob("*.yaml"))
# Search spaces beside the algos' own, and the algo each is for: sac_walltime, a wall-time study's (headline_study.md).
EXTRA_SPACES = {"sac_walltime": "sac"}
CUSTOM_ALGORITHM = Path(__file__).parent / "custom_algorithm" / "conf"


def test_every_algo_option_has_a_search_space() -> None:
    assert {p.stem for p in (CONFIG_DIR / "search_space").glob("*.yaml")} == set(ALGOS) | set(EXTRA_SPACES)


def _space_and_base(algo: str, tmp_path: Path, space: str | None = None) -> tuple[SearchSpace, dict, TuneSettings]:
    env = next(o for o in TINY_ALGO_RUNS[algo] if o.startswith("env="))
    overrides = [f"algo={algo}", env, f"tune.dir={tmp_path / 'study'}", *([f"search_space={space}"] if space else [])]
    cfg = compose_config(overrides, run_dir=tmp_path, config_name="tune")
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    settings = TuneSettings.from_values(values)
    base = trial_base(values, settings)
    return SearchSpace.from_values(values["search_space"], base), base, settings


@pytest.mark.parametrize(
    ("algo", "space_name"), [*((a, None) for a in ALGOS if a != "random"), *((a, s) for s, a in EXTRA_SPACES.items())]
)
def test_search_space_plans_and_builds_at_its_bounds(algo: str, space_name: str | None, tmp_path: Path) -> None:
    if algo.startswith("sbx_"):
        require_extra("sbx", "jax")
    space, base, _ = _space_and_base(algo, tmp_path, space_name)
    assert space.params
    check_space(space, base, tmp_path)  # every bound of every entry, planned as a run
    # Models build with every entry at its first, then at its last candidate (networks, policy keywords, buffers).
    for pick in (-1,) if algo.startswith("sbx_") else (0, -1):  # (a JAX model compiles for seconds)
        assignment = {p.path: p.candidates()[pick] for p in space.params}
        plan = plan_run(trial_config(base, assignment, tmp_path / "run"), run_dir_state=False)
        build = RunBuilder(plan)
        venv = build.training_env()
        try:
            model = build.model(venv, None)
        finally:
            venv.close()
        assert type(model).__name__ == plan.factory.name


def test_algo_without_search_space_names_the_options(tmp_path: Path) -> None:
    overrides = [f"hydra.searchpath=[file://{CUSTOM_ALGORITHM}]", "algo=vpg", "env=CartPole"]
    with pytest.raises(MissingConfigException, match=r"search_space/vpg"):
        compose_config(overrides, run_dir=tmp_path, config_name="tune")


def test_algo_without_hyperparameters_is_refused(tmp_path: Path) -> None:
    cfg = compose_config(["algo=random", f"tune.dir={tmp_path / 'study'}"], run_dir=tmp_path, config_name="tune")
    with pytest.raises(ConfigError, match=r"the search space is empty"):
        tune(cfg, log=lambda _: None)
    assert not (tmp_path / "study").exists()


BAD_INPUT = {
    "unknown keyword": (
        ["+search_space.algo.foo={type:float,low:0,high:1}"],
        r"search_space\.algo\.foo \(at 0\.0\): algo\.foo is not a keyword of PPO; allowed: .*batch_size",
    ),
    "low above high": (
        ["search_space.algo.learning_rate.low=0.1"],
        r"search_space\.algo\.learning_rate: low=0\.1 > high=0\.002; allowed: low ≤ high",
    ),
    "no choices": (["search_space.algo.n_epochs.choices=[]"], r"search_space\.algo\.n_epochs\.choices is empty"),
    "unknown distribution": (
        ["search_space.algo.gamma.type=normal"],
        r"search_space\.algo\.gamma\.type='normal'; allowed: float, int, categorical",
    ),
    "unknown entry key": (["+search_space.algo.gamma.sigma=1"], r"unknown key\(s\) search_space\.algo\.gamma\.sigma"),
    "wrong value type": (
        ["search_space.algo.n_epochs.choices=[1.5]"],
        r"search_space\.algo\.n_epochs \(at 1\.5\): algo\.n_epochs=1\.5 has the wrong type",
    ),
    "log from zero": (
        ["search_space.algo.max_grad_norm.low=0", "+search_space.algo.max_grad_norm.log=true"],
        r"search_space\.algo\.max_grad_norm: log=true needs low > 0",
    ),
    "when names nothing": (
        ["+search_space.algo.vf_coef={type:float,low:0.1,high:1,when:{algo.nothing:true}}"],
        r"search_space\.algo\.vf_coef\.when names algo\.nothing, which is neither",
    ),
    "at_most names nothing": (
        ["search_space.algo.batch_size.at_most=[algo.n_stepz]"],
        r"search_space\.algo\.batch_size\.at_most names algo\.n_stepz",
    ),
    "fixed value in a search space": (["+search_space.algo.vf_coef=0.5"], r"search_space\.algo\.vf_coef=0\.5 is not"),
    "n_trials=0": (["n_trials=0"], r"^n_trials=0 must be ≥ 1$"),
    "bad pruner": (["tune.pruner=asha"], r"tune\.pruner='asha'; allowed: median, halving, hyperband, none"),
    "bad sampler": (["tune.sampler=grid"], r"tune\.sampler='grid'; allowed: tpe, random"),
    "unknown tune key": (["+tune.trials=3"], r"unknown tune key\(s\) tune\.trials; allowed: tune\.budget"),
    "eval_freq past the budget": (["tune.eval_freq=256"], r"tune\.eval_freq=256 ≥ tune\.budget=256"),
    "storage folder missing": (["tune.storage=/nonexistent/rlzoo/s.journal"], r"folder /nonexistent/rlzoo does not"),
    "storage not a journal": (["tune.storage=/tmp/s.db"], r"tune\.storage=/tmp/s\.db must end in \.journal"),
    "resume of no study": (["tune.resume=true"], r"tune\.resume=true but tune\.storage=.* holds no study 'ppo_Cart"),
    "episode budget": (["total_episodes=10"], r"total_episodes=10: rlzoo\.tune gives every trial a budget of agent"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_fails_before_the_study_folder_is_written(case: str, tmp_path: Path) -> None:
    overrides, message = BAD_INPUT[case]
    with pytest.raises(ConfigError, match=message):
        tune(compose_tune(tmp_path, "n_trials=2", *overrides), log=lambda _: None)
    assert not (tmp_path / "study").exists()


def test_a_study_refuses_another_config_and_a_fresh_start(tmp_path: Path) -> None:
    tune_study(tmp_path, "n_trials=1", "tune.pruner=none")
    journal = tmp_path / "study" / "study.journal"
    before = journal.read_bytes()
    resume = ["n_trials=2", "tune.resume=true"]
    a2c = [
        "algo=a2c",
        "env=CartPole",
        "n_envs=2",
        "tune.name=ppo_CartPole",
        f"tune.dir={tmp_path / 'study'}",
        "tune.budget=256",
        "tune.eval_freq=64",
        *resume,
    ]
    cases = [
        (compose_tune(tmp_path, "n_trials=2"), r"already holds the study 'ppo_CartPole': tune\.resume=true continues"),
        (
            compose_tune(tmp_path, *resume, "env=Acrobot", "tune.name=ppo_CartPole"),
            r"was run with another config; it differs in config\.env\.id: CartPole-v1 → Acrobot-v1;",
        ),
        (
            compose_config(a2c, run_dir=tmp_path / "hydra", config_name="tune"),
            r"config\.algo\._target_: stable_baselines3\.PPO → stable_baselines3\.A2C",
        ),
        (
            compose_tune(tmp_path, *resume, "tune.name=a2c_CartPole"),
            r"holds no study 'a2c_CartPole' \(it holds ppo_CartPole\)",
        ),
        (
            compose_tune(tmp_path, *resume, "search_space.algo.n_epochs.choices=[1,2,4]"),
            r"search_space\.algo\.n_epochs\.choices: \[1, 2\] → \[1, 2, 4\]",
        ),
    ]
    for cfg, message in cases:
        with pytest.raises(ConfigError, match=message):
            tune(cfg, log=lambda _: None)
    assert journal.read_bytes() == before  # nothing was written to the study
