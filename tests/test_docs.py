"""Every documented command works: each ``python -m rlzoo.<command>`` line of README.md and docs/*.md is composed
in-process with Hydra's compose API (what ``--cfg job`` prints), placeholders (``<run dir>`` ...) filled from a fixture
run; a key, option or group that does not exist fails. The cheap training commands also train at a tiny budget.

Not composed (:data:`NOT_COMPOSED`): lines that need a file the reader makes first (``my_conf/``, a custom algorithm).
Sweeps (``-m``) are composed with the first value of each swept key (what their first job composes).
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig

from conftest import TINY_ON_POLICY
from rlzoo.config import CONFIG_DIR, USER_CONFIG_ENV, compose_config
from rlzoo.train import train

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CONFIGS = {"train": "train", "enjoy": "enjoy", "plot": "plot", "report": "report", "collect": "collect",
           "srl.train": "srl_train", "srl.evaluate": "srl_evaluate", "tune": "tune",
           "pipeline": "pipeline", "records": "records"}  # fmt: skip
COMMAND = re.compile(r"python -m rlzoo\.([a-z_.]+)((?:[^`#\n\\]|\\\n)*)")
# Hydra flags that take no part in composing: --cfg job, --info searchpath, -m.
FLAGS = {"-m", "--multirun", "--cfg", "--info", "job", "all", "hydra", "searchpath", "..."}
# Lines that need files the reader writes first.
NOT_COMPOSED = {
    "algo=vpg": "tests/custom_algorithm: the reader's own algorithm module and my_conf/ folder (docs/algorithms.md)",
}
RUN_KEYS = ("run", "resume", "init_from", "dir", "collect_policy.run")
PLACEHOLDERS = {"experiment=<name>": "experiment=srl_benchmark_small"}
# Training commands also train at a tiny budget when their env is one of these (no extra, no simulator, seconds).
CHEAP_ENVS = {"CartPole-v1", "Pendulum-v1", "Acrobot-v1", "Taxi-v4", "rlzoo/MobileRobot-v0", "rlzoo/MobileRobot1D-v0"}
TINY = ["total_timesteps=64", "test_episodes=1", "checkpoint_freq=0", "verbose=0", "logger.formats=[csv]",
        "progress_bar=false"]  # fmt: skip


@dataclass(frozen=True)
class Documented:
    """One documented command: where it is, the entrypoint and its arguments."""

    where: str
    command: str
    arguments: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.where}: python -m rlzoo.{self.command} {' '.join(self.arguments)}"


def documented_commands() -> Iterator[Documented]:
    for doc in DOCS:
        text = doc.read_text()
        for match in COMMAND.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            command, rest = match.group(1).rstrip("."), match.group(2).replace("\\\n", " ")
            rest = re.sub(r"<[^<>\n]*>", lambda m: m.group(0).replace(" ", "_"), rest)  # <run dir>: one word
            if command in CONFIGS:
                yield Documented(f"{doc.name}:{line}", command, tuple(shlex.split(rest)))


COMMANDS = list(documented_commands())


def test_the_docs_hold_commands_of_every_entrypoint() -> None:
    assert len(COMMANDS) > 80
    assert {c.command for c in COMMANDS} == set(CONFIGS)


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny trained run (PPO on MobileRobot) standing for ``<run dir>`` and the run folders the docs name."""
    path = tmp_path_factory.mktemp("docs") / "run"
    overrides = ["algo=ppo", "env=MobileRobot", "n_envs=1", *TINY_ON_POLICY, "algo.n_epochs=1", "total_timesteps=64",
                 "test_episodes=1", "checkpoint_freq=32", "verbose=0", "logger.formats=[csv]"]  # fmt: skip
    train(compose_config(overrides, run_dir=path))
    return path


@pytest.fixture(scope="module")
def user_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user config folder holding the tuned pair the docs use (``algo_env=tuned/ppo_MobileRobot``), as
    ``rlzoo.tune`` exports it (here: the hand-tuned pair under that name)."""
    folder = tmp_path_factory.mktemp("user_conf")
    pair = folder / "algo_env" / "tuned" / "ppo_MobileRobot.yaml"
    pair.parent.mkdir(parents=True)
    pair.write_text((CONFIG_DIR / "algo_env" / "ppo_MobileRobot.yaml").read_text())
    return folder


def filled(arguments: tuple[str, ...], run: Path, user_config: Path) -> list[str]:
    """The overrides of a documented command: flags dropped, a sweep's first value, placeholders filled."""
    overrides = []
    for argument in arguments:
        argument = PLACEHOLDERS.get(argument, argument)
        if argument in FLAGS:
            continue
        key, equals, value = argument.partition("=")
        if key.lstrip("+~") in RUN_KEYS and (value.startswith(("outputs/", "multirun/", "<")) or "<" in value):
            tail = value.rpartition(":")[2] if ":" in value and key == "init_from" else ""
            value = str(run) + (f":{tail}" if tail.isdigit() or tail in ("latest", "final", "best") else "")
        value = value.replace("file://<tune.dir>/conf", f"file://{user_config}")
        overrides.append(f"{key}={value}" if equals else argument)
    parser = OverridesParser.create()
    first = []
    for override, text in zip(parser.parse_overrides(overrides), overrides, strict=True):
        if override.is_sweep_override():
            values = list(override.sweep_string_iterator())
            first.append(f"{text.split('=', 1)[0]}={values[0]}")
        else:
            first.append(text)
    return first


def compose_documented(documented: Documented, run: Path, user_config: Path, run_dir: Path) -> DictConfig:
    """Compose a documented command as its entrypoint would (``--cfg job``), in-process."""
    reason = next((why for marker, why in NOT_COMPOSED.items() if marker in documented.arguments), None)
    if reason is not None:
        pytest.skip(reason)
    overrides = filled(documented.arguments, run, user_config)
    config = CONFIGS[documented.command]
    with_run_dir = config in ("train", "tune", "collect", "srl_train", "pipeline")
    return compose_config(overrides, run_dir=run_dir if with_run_dir else None, config_name=config)


@pytest.mark.parametrize("documented", COMMANDS, ids=str)
def test_every_documented_command_composes(
    documented: Documented, fixture_run: Path, user_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(USER_CONFIG_ENV, str(user_config))
    compose_documented(documented, fixture_run, user_config, tmp_path / "run")


def test_a_documented_key_that_does_not_exist_fails(fixture_run: Path, user_config: Path, tmp_path: Path) -> None:
    """The check itself can fail: a misspelt key, an unknown option, an unknown group."""
    for wrong in ("eval_frequency=2500", "algo=dqnn", "algorithm=dqn", "algo_env=tuned/ppo_Nowhere"):
        documented = Documented("made up", "train", ("algo=dqn", "env=CartPole", wrong))
        with pytest.raises(Exception, match=r"eval_frequency|dqnn|algorithm|ppo_Nowhere"):
            compose_documented(documented, fixture_run, user_config, tmp_path / "run")


def why_not_trained(cfg: DictConfig, documented: Documented) -> str | None:
    """Why a documented training command is only composed, not trained at a tiny budget (None: it trains)."""
    env = cfg.env.get("id")
    if env not in CHEAP_ENVS:
        return f"env {env}: an extra, a simulator or a long episode (composed only)"
    if cfg.srl_model.name != "ground_truth":
        return f"srl_model={cfg.srl_model.name}: pixels or an encoder to train first (composed only)"
    if cfg.hardware.get("device") not in ("cpu", "auto"):
        return f"hardware.device={cfg.hardware.device}: a GPU profile (composed only)"
    if cfg.get("resume") or cfg.get("init_from"):
        return "resume / init_from: continue another run, with its own network (composed only)"
    if cfg.logger.get("wandb") or cfg.logger.get("visdom"):
        return "logger=wandb/visdom: tested in tests/test_loggers.py and test_live_plot.py (composed only)"
    if str(cfg.algo._target_).startswith("sbx."):
        return "the JAX backend ([jax] extra): trained in tests/test_jax_backend.py (composed only)"
    return None


TRAINING = [c for c in COMMANDS if c.command == "train"]


@pytest.mark.parametrize("documented", TRAINING, ids=str)
def test_cheap_documented_training_commands_train(
    documented: Documented, fixture_run: Path, user_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A training command on a cheap env trains at a tiny budget (64 steps, 1 test episode; an episode budget: 2
    episodes); the others are composed only, for the reason the skip gives."""
    monkeypatch.setenv(USER_CONFIG_ENV, str(user_config))
    cfg = compose_documented(documented, fixture_run, user_config, tmp_path / "composed")
    reason = why_not_trained(cfg, documented)
    if reason is not None:
        pytest.skip(reason)
    tiny = [t for t in TINY if not (cfg.total_episodes and t.startswith("total_timesteps"))]
    episodes = ["total_episodes=2"] if cfg.total_episodes else []
    overrides = [*filled(documented.arguments, fixture_run, user_config), *tiny, *episodes]
    metrics = train(compose_config(overrides, run_dir=tmp_path / "run"))
    assert metrics["test/episodes"] == 1


# The run the replay lines of README.md and docs/replay.md name (``outputs/<date>/<time>_ppo_CartPole``): README's "Two
# commands" training command.
README_RUN = ("algo=ppo", "env=CartPole")


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """README's own CartPole run, with its checkpoint schedule (``n_envs``, ``n_steps``, ``checkpoint_freq`` as
    documented) up to its first checkpoint, learning cheaply (one epoch per rollout, one test episode)."""
    documented = next(c for c in TRAINING if c.where.startswith("README.md") and c.arguments == README_RUN)
    path = tmp_path_factory.mktemp("readme") / "run"
    first = compose_config(list(documented.arguments), run_dir=path).checkpoint_freq
    cheap = [f"total_timesteps={first}", "algo.n_epochs=1", *[t for t in TINY if not t.startswith(("total", "check"))]]
    train(compose_config([*documented.arguments, *cheap], run_dir=path))
    return path


REPLAYS = [c for c in COMMANDS if c.command == "enjoy" and c.where.startswith(("README.md", "replay.md"))]


@pytest.mark.parametrize("documented", REPLAYS, ids=str)
def test_the_replay_lines_replay_the_readme_run(
    documented: Documented, readme_run: Path, fixture_run: Path, user_config: Path
) -> None:
    """Each ``rlzoo.enjoy`` line of README.md and docs/replay.md replays README's own CartPole run as written (its
    checkpoint numbers included), one episode; a trajectory plot, which its comment scopes to the MobileRobot envs,
    replays the MobileRobot fixture run."""
    from rlzoo.enjoy import EnjoySettings, enjoy

    run = fixture_run if any("trajectory" in a for a in documented.arguments) else readme_run
    overrides = [a.replace(str(fixture_run), str(run)) for a in filled(documented.arguments, fixture_run, user_config)]
    cfg = compose_config([*overrides, "n_episodes=1"], run_dir=None, config_name="enjoy")
    replay = enjoy(EnjoySettings.from_config(cfg), log=lambda line: None)
    assert len(replay.returns) == 1 and all(f.is_file() for f in replay.files)


def test_the_python_api_blocks_use_only_names_they_define() -> None:
    """Read in order, docs/agents.md's Python blocks import or assign every name they use (a missing ``import``
    fails)."""
    import ast
    import builtins

    readme = (ROOT / "docs" / "agents.md").read_text()
    defined, missing = set(dir(builtins)), []
    for block in re.findall(r"```python\n(.*?)```", readme, flags=re.S):
        tree = ast.parse(block)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
        used = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)})
        missing += [name for name in used if name not in defined]
    assert len(re.findall(r"```python", readme)) >= 3
    assert missing == []


def config_table() -> ModuleType:
    """``scripts/config_table.py``, the generator of docs/config.md's option tables, imported from its path."""
    spec = importlib.util.spec_from_file_location("config_table", ROOT / "scripts" / "config_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_option_tables_of_config_md_are_generated_from_conf() -> None:
    """docs/config.md holds, between the generator's markers, exactly what ``python scripts/config_table.py`` writes
    from ``conf/``; that is a table for each group of ``conf/train.yaml``'s defaults and a row for each option file."""
    generator = config_table()
    text = (ROOT / "docs" / "config.md").read_text()
    assert generator.with_tables(text) == text, "docs/config.md differs from conf/: python scripts/config_table.py"
    assert generator.main(["--check"]) == 0
    groups = generator.groups()
    assert len(groups) == 8, groups
    for group in groups:
        section = text[text.index(f"### `{group}`") :].split("\n\n")[1]
        rows = {line.split("|")[1].strip().strip("`") for line in section.splitlines()[2:] if line.startswith("|")}
        assert rows == {path.stem for path in (CONFIG_DIR / group).glob("*.yaml")}, group


def test_the_config_table_generator_rewrites_only_between_its_markers(tmp_path: Path) -> None:
    """A new option file appears in the generated tables, its header comment's first sentence beside it; the text
    around the markers stays; a doc that lacks the markers is refused."""
    generator = config_table()
    conf = tmp_path / "conf"
    shutil.copytree(CONFIG_DIR, conf)
    (conf / "logger" / "mine.yaml").write_text("# My logger (Doe et al., 2024): CSV only. More.\nformats: [csv]\n")
    begin, end = generator.BEGIN, generator.END
    written = generator.with_tables(f"before\n{begin}\nstale\n{end}\nafter\n", conf)
    assert written.startswith(f"before\n{begin}\n### `algo`") and written.endswith(f"{end}\nafter\n")
    assert "stale" not in written and "| `mine` | My logger (Doe et al., 2024): CSV only |" in written
    with pytest.raises(ValueError, match=r"must hold"):
        generator.with_tables("no markers", conf)
